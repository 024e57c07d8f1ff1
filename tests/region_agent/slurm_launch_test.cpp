// longhaul-agent with --launcher slurm against a real single-host Slurm
// cluster (munged, slurmctld and slurmd started here): a job's workers run as
// one srun step and train through its rounds to the end; a step cancelled with
// scancel fails the region with Slurm's words and a new assignment relaunches
// it, which rejoins and trains; an allocation the cluster can never satisfy
// fails the launch with Slurm's reason. And a region over two nodes (each
// slurmd in a network namespace of its own) runs its rounds.
#include <catch2/catch.hpp>

#include <signal.h>

#include <set>
#include <string>

#include "agent_rig.h"
#include "longhaul/orchestrator/region_netns.h"
#include "support/slurm_cluster.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

using longhaul::testing::ChildrenNamed;
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
  if (const std::string why = SlurmCluster::Unavailable(); !why.empty()) {
    WARN("SKIPPED: " << why);
    return;
  }
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
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(15s) == 0);
  // The agent cancelled its launch on the way out.
  CHECK((*cluster)->JobState("longhaul-eu-j2-launch-3").find("RUNNING") == std::string::npos);

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
  if (const std::string why = SlurmCluster::Unavailable(); !why.empty()) {
    WARN("SKIPPED: " << why);
    return;
  }
  const TempDir tmp("slurm-nodes");
  const auto& dir = tmp.path();
  // Two nodes, each in a network namespace with an address of its own; the
  // agent and slurmctld on the bridge that joins them.
  auto nets = longhaul::orchestrator::RegionNetworks::Create({{"n0", 0, 0, 0}, {"n1", 0, 0, 0}});
  REQUIRE(nets.ok());
  const auto& net = **nets;
  auto cluster = SlurmCluster::Start(dir / "cluster", 2,
                                     {{"n0", net.address(0), net.netns(0)}, {"n1", net.address(1), net.netns(1)}},
                                     net.host_address());
  REQUIRE(cluster.ok());
  FakeOrchestrator orch;
  auto agent = StartAgent("eu", orch, 2, dir, {},
                          {"--launcher", "slurm", "--slurm-nodes", "2", "--slurm-ntasks-per-node", "1", "--data-host",
                           "auto", "--worker-bind", net.host_address()});
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
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(15s) == 0);
}
