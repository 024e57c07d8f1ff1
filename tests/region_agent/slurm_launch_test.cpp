// longhaul-agent with --launcher slurm against a real single-host Slurm
// cluster (munged, slurmctld and slurmd started here): a job's workers run as
// one srun step and train through its rounds to the end; a step cancelled with
// scancel fails the region with Slurm's words and a new assignment relaunches
// it, which rejoins and trains; an allocation the cluster can never satisfy
// fails the launch with Slurm's reason; a pre-empted step does too. And a
// region over two nodes (each slurmd in a network namespace and a mount
// namespace of its own, the agent's folder not shared) runs its rounds, its
// workers' output in the agent's logs, and a torch.distributed program's
// group spans both nodes.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "agent_rig.h"
#include "longhaul/orchestrator/region_netns.h"
#include "support/skip.h"
#include "support/slurm_cluster.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

using longhaul::testing::ChildrenNamed;
using longhaul::testing::SkipTest;
using longhaul::testing::SlurmCluster;
using longhaul::testing::TempDir;
using namespace agent_rig;

namespace {

// Runs rounds [first, last] of a one-region job, each committed.
void RunRounds(FakeOrchestrator& orch, const std::string& job, const v1::PeerEndpoint& endpoint, uint32_t first,
               uint32_t last, uint64_t epoch) {
  for (uint32_t round = first; round <= last; ++round) {
    orch.Send("eu", Start(job, round, epoch, {endpoint}));
    auto report = orch.WaitFor(Body(v1::ControlMessage::kRoundReport, "eu"), 60s);
    REQUIRE(report);
    INFO(report->msg.round_report().error().message());
    REQUIRE(report->msg.round_report().ok());
    CHECK(report->msg.round_report().round() == round);
    orch.Send("eu", Verdict(job, round, epoch, true));
  }
}

// The job's last round committed: STOP (completed) lets the workers end by
// themselves, and the agent reports every process stopped.
void CompleteJob(FakeOrchestrator& orch, const Subprocess& agent, const std::string& job) {
  v1::ControlMessage done;
  done.mutable_round_command()->set_job_id(job);
  done.mutable_round_command()->set_kind(v1::RoundCommand::STOP);
  done.mutable_round_command()->set_job_completed(true);
  orch.Send("eu", done);
  REQUIRE(agent.WaitForLine("job " + job + ": all processes stopped", 30s));
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts an agent for `region` with `flags`, assigns it a two-worker job and
// returns why the region refused it (JobRejected); the agent is stopped.
std::string Rejection(FakeOrchestrator& orch, const std::filesystem::path& dir, const std::string& region,
                      const std::string& job, const std::vector<std::string>& flags) {
  auto agent = StartAgent(region, orch, 2, dir, {}, flags);
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion, region), 10s));
  orch.Send(region, Wrap(TinyJob(job, region, 0, 1, 2)));
  auto rejected = orch.WaitFor(Body(v1::ControlMessage::kJobRejected, region), 30s);
  REQUIRE(rejected);
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(15s) == 0);
  return rejected->msg.job_rejected().error().message();
}

}  // namespace

TEST_CASE("region_agent: slurm launcher runs a region's workers as a Slurm step, relaunches a cancelled one, "
          "reports Slurm's reason",
          "[agent][slurm]") {
  if (const std::string why = SlurmCluster::Unavailable(); !why.empty()) SkipTest(why);
  const TempDir tmp("slurm");
  const auto& dir = tmp.path();
  auto cluster = SlurmCluster::Start(dir / "cluster", 4);
  REQUIRE(cluster.ok());
  FakeOrchestrator orch;
  auto agent = StartAgent("eu", orch, 2, dir, {}, {"--launcher", "slurm", "--slurm-nodes", "1", "--slurm-ntasks-per-node", "2"});
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion), 10s));

  // A job runs through its rounds to the end on Slurm's workers.
  orch.Send("eu", Wrap(TinyJob("j1", "eu", 0, 1, 2)));
  auto ready = orch.WaitFor(Body(v1::ControlMessage::kJobReady), 60s);
  REQUIRE(ready);
  CHECK(ready->msg.job_ready().endpoint().shard_endpoints_size() == 2);
  const std::string first_launch = "longhaul-eu-j1-launch-1";
  CHECK((*cluster)->JobState(first_launch).find("RUNNING") != std::string::npos);
  // The workers are the step's tasks (slurmstepd's children), not the agent's.
  CHECK(ChildrenNamed(agent.pid(), "longhaul-worker").empty());
  CHECK(ChildrenNamed(agent.pid(), "srun").size() == 1);
  RunRounds(orch, "j1", ready->msg.job_ready().endpoint(), 1, 4, 1);
  CompleteJob(orch, agent, "j1");
  CHECK((*cluster)->JobState(first_launch).find("COMPLETED") != std::string::npos);

  // A step cancelled through Slurm: the region fails with Slurm's words, and
  // the job assigned again runs in a new step that rejoins the rounds.
  orch.Send("eu", Wrap(TinyJob("j2", "eu", 0, 1, 2)));
  ready = orch.WaitFor(Body(v1::ControlMessage::kJobReady), 60s);
  REQUIRE(ready);
  RunRounds(orch, "j2", ready->msg.job_ready().endpoint(), 1, 1, 1);
  const std::string j2_launch = "longhaul-eu-j2-launch-2";
  const std::string state = (*cluster)->JobState(j2_launch);
  REQUIRE(state.find("RUNNING") != std::string::npos);
  const std::string job_id = state.substr(0, state.find(' '));
  std::string out;
  REQUIRE((*cluster)->Run("scancel " + job_id + ".0", &out) == 0);
  auto sick = orch.WaitFor([](const FakeOrchestrator::Incoming& in) {
    return in.msg.has_heartbeat() && !in.msg.heartbeat().healthy();
  }, 30s);
  REQUIRE(sick);
  const std::string detail = sick->msg.heartbeat().detail();
  INFO(detail);
  CHECK(detail.find("srun of workers 0-1") != std::string::npos);
  CHECK(detail.find("slurm job " + job_id) != std::string::npos);
  REQUIRE(agent.WaitForLine("job j2: all processes stopped", 30s));
  orch.Send("eu", Wrap(TinyJob("j2", "eu", 0, 1, 2)));
  ready = orch.WaitFor(Body(v1::ControlMessage::kJobReady), 60s);
  REQUIRE(ready);
  CHECK((*cluster)->JobState("longhaul-eu-j2-launch-3").find("RUNNING") != std::string::npos);
  RunRounds(orch, "j2", ready->msg.job_ready().endpoint(), 1, 1, 2);

  // Pre-empted: a job of a partition with a higher priority tier needs every
  // CPU, Slurm cancels the launch's job (PreemptMode=CANCEL), srun ends, and
  // the region fails saying so in Slurm's words.
  REQUIRE((*cluster)->Run("sbatch --partition=urgent --ntasks=4 --job-name=urgent --output=/dev/null "
                          "--wrap='sleep 600'", &out) == 0);  // returns at once; the job starts once debug's is gone
  sick = orch.WaitFor([](const FakeOrchestrator::Incoming& in) {
    return in.msg.has_heartbeat() && !in.msg.heartbeat().healthy() &&
           in.msg.heartbeat().detail().find("longhaul-eu-j2-launch-3") != std::string::npos;
  }, 60s);
  REQUIRE(sick);
  INFO(sick->msg.heartbeat().detail());
  CHECK(sick->msg.heartbeat().detail().find("DUE TO PREEMPTION") != std::string::npos);
  REQUIRE(agent.WaitForLine("job j2: all processes stopped", 30s));
  // Once the CPUs are free again, the job assigned again runs.
  REQUIRE((*cluster)->Run("scancel --quiet --name=urgent", &out) == 0);
  orch.Send("eu", Wrap(TinyJob("j2", "eu", 0, 1, 2)));
  ready = orch.WaitFor(Body(v1::ControlMessage::kJobReady), 60s);
  REQUIRE(ready);
  RunRounds(orch, "j2", ready->msg.job_ready().endpoint(), 1, 1, 3);
  CHECK((*cluster)->JobState("longhaul-eu-j2-launch-4").find("RUNNING") != std::string::npos);
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(15s) == 0);
  // The agent cancelled its launch on the way out: still listed, no longer running.
  const std::string after = (*cluster)->JobState("longhaul-eu-j2-launch-4");
  INFO("after the agent stopped: " << after);
  CHECK_FALSE(after.empty());
  CHECK(after.find("RUNNING") == std::string::npos);

  // An allocation the cluster can never give (a partition it does not have):
  // the launch fails with Slurm's reason.
  const std::string why = Rejection(orch, dir, "ap", "j3", {"--launcher", "slurm", "--slurm-partition", "gpu"});
  INFO(why);
  CHECK(why.find("Invalid partition name specified") != std::string::npos);

  // A launch Slurm never starts (another job holds every CPU): at the start
  // timeout the region fails with the job's state in Slurm's words.
  REQUIRE((*cluster)->Run("salloc --no-shell --ntasks=4 --job-name=blocker", &out) == 0);
  const std::string pending = Rejection(orch, dir, "sa", "j4", {"--launcher", "slurm", "--worker-start-timeout-s", "2"});
  INFO(pending);
  CHECK(pending.find("did not report ready within 2 s") != std::string::npos);
  CHECK(pending.find("PENDING") != std::string::npos);
  CHECK((*cluster)->JobState("longhaul-sa-j4-launch-1").find("PENDING") == std::string::npos);  // cancelled
}

TEST_CASE("region_agent: slurm launcher spreads a region's workers over two nodes, each on a host of its own",
          "[agent][slurm]") {
  if (const std::string why = SlurmCluster::Unavailable(); !why.empty()) SkipTest(why);
  const TempDir tmp("slurm-nodes");
  const auto& dir = tmp.path();
  // Two nodes, each in a network namespace with an address of its own; the
  // agent and slurmctld on the bridge that joins them. The agent's work
  // folder is not shared with the nodes: each sees an empty one of its own.
  auto nets = longhaul::orchestrator::RegionNetworks::Create({{"n0", 0, 0, 0}, {"n1", 0, 0, 0}});
  REQUIRE(nets.ok());
  const auto& net = **nets;
  const auto work = dir / "eu";
  std::filesystem::create_directories(work);
  auto cluster = SlurmCluster::Start(dir / "cluster", 2,
                                     {{"n0", net.address(0), net.netns(0), {work}},
                                      {"n1", net.address(1), net.netns(1), {work}}},
                                     net.host_address());
  REQUIRE(cluster.ok());
  FakeOrchestrator orch;
  std::vector<std::string> flags = {"--launcher",   "slurm", "--slurm-nodes",  "2",
                                    "--slurm-ntasks-per-node", "1", "--data-host", "auto",
                                    "--worker-bind", net.host_address()};
#ifdef LONGHAUL_PYTHON
  flags.insert(flags.end(), {"--allow-command", LONGHAUL_PYTHON, "--allow-working-dir", dir.string()});
#endif
  auto agent = StartAgent("eu", orch, 2, dir, {}, flags);
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion), 10s));
  orch.Send("eu", Wrap(TinyJob("j1", "eu", 0, 1, 2)));
  auto ready = orch.WaitFor(Body(v1::ControlMessage::kJobReady), 60s);
  REQUIRE(ready);
  // Each worker bound its WAN endpoint on its own node's address, found on its
  // route to the agent; they formed their group through the agent's store.
  const auto& shards = ready->msg.job_ready().endpoint().shard_endpoints();
  REQUIRE(shards.size() == 2);
  std::set<std::string> hosts;
  for (const auto& e : shards) hosts.insert(e.substr(6, e.rfind(':') - 6));
  CHECK(hosts == std::set<std::string>{net.address(0), net.address(1)});
  std::string nodes;
  REQUIRE((*cluster)->Run("squeue --noheader --name=longhaul-eu-j1-launch-1 --format=%N", &nodes) == 0);
  CHECK(nodes == "n[0-1]\n");
  RunRounds(orch, "j1", ready->msg.job_ready().endpoint(), 1, 2, 1);
  CompleteJob(orch, agent, "j1");
  // Each worker's output came back through srun into the agent's folder
  // (the nodes' own copies of it are empty tmpfs).
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = ReadFile(work / "j1" / ("worker-" + std::to_string(rank) + ".log"));
    INFO("worker " << rank << ":\n" << log);
    CHECK(log.find("round 2 epoch 1: hash ") != std::string::npos);
    CHECK(log.rfind(std::to_string(rank) + ": ", 0) != 0);  // the labels are gone
    CHECK(log.find("\n" + std::to_string(rank) + ": ") == std::string::npos);
  }
#ifdef LONGHAUL_PYTHON
  // A torch.distributed program: rank 0 listens on its own node, the other
  // rank finds it through the agent's store (MASTER_ADDR), and the group's
  // all_reduce spans both nodes; then the program trains through the rounds.
  const auto script = dir / "torch_group.py";
  std::ofstream(script) << R"(import os
import torch
import torch.distributed as dist
import longhaul.torch as lh
cfg = lh.job_config()
dist.init_process_group("gloo", init_method="env://")
rank, size = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"torch group: rank {rank} of {size}, sum {t.item():g}, master {os.environ['MASTER_ADDR']}", flush=True)
torch.manual_seed(cfg.seed)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
diloco = lh.DiLoCo(model)
x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank))
while not diloco.finished:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad.div_(size)
    opt.step()
    diloco.step(loss=loss)
)";
  auto torch_job = TinyJob("j2", "eu", 0, 1, 2);
  auto* cmd = torch_job.mutable_spec()->mutable_worker()->mutable_command();
  cmd->add_argv(LONGHAUL_PYTHON);
  cmd->add_argv(script.string());
  (*cmd->mutable_env())["OMP_NUM_THREADS"] = "1";
  cmd->set_working_dir(dir.string());
  orch.Send("eu", Wrap(torch_job));
  ready = orch.WaitFor([](const FakeOrchestrator::Incoming& in) {
    return in.msg.has_job_ready() || in.msg.has_job_rejected();
  }, 90s);
  if (ready && ready->msg.has_job_rejected()) FAIL("rejected: " << ready->msg.job_rejected().error().message());
  if (!ready) FAIL("no JobReady; worker 0:\n" << ReadFile(work / "j2" / "worker-0.log") << "\nworker 1:\n"
                                             << ReadFile(work / "j2" / "worker-1.log") << "\nsrun:\n"
                                             << ReadFile(work / "j2" / "srun.log"));
  RunRounds(orch, "j2", ready->msg.job_ready().endpoint(), 1, 2, 1);
  CompleteJob(orch, agent, "j2");
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = ReadFile(work / "j2" / ("worker-" + std::to_string(rank) + ".log"));
    INFO("worker " << rank << ":\n" << log);
    CHECK(log.find("torch group: rank " + std::to_string(rank) + " of 2, sum 3, master " + net.address(0)) !=
          std::string::npos);
  }
#else
  WARN("no Python SDK in this build: the torch.distributed part is not run");
#endif
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(15s) == 0);
}
