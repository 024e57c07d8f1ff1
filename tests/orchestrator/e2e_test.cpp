// End to end with the real processes: longhaul-orchestrator, three
// longhaul-agent daemons and their longhaul-worker processes on loopback.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "real_cluster.h"
#include "support/skip.h"

using namespace longhaul;
using namespace longhaul::testing;
using namespace std::chrono_literals;

namespace {
const std::string kBin = LONGHAUL_BIN_DIR;
}  // namespace

TEST_CASE("e2e: a 3-region DiLoCo job on real agents and workers finishes", "[e2e]") {
  RealCluster c("e2e-finish");
  c.StartOrchestrator();
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  const std::string job = c.Submit(3, 5);
  auto st = c.WaitFor(job, JobDone, 180s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  CHECK(st.round() == 3);
  CHECK(st.val_loss() > 0);
  CHECK(st.wan_bytes() > 0);
  CHECK_FALSE(st.param_hash().empty());
  CHECK(st.loss_floor() > 0);  // from the agents' JobFacts
  CHECK(st.val_loss() > st.loss_floor());
  auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 3);
  for (const auto& r : rounds) CHECK(r.participants.size() == 3);
  // Workers' passive WAN measurements reached the scheduler's link matrix (the
  // tiny model's messages are small: they measure RTT; bandwidth needs >= 256 KiB).
  const std::string metrics = HttpGet(c.ep.metrics);
  size_t measured_links = 0;
  for (size_t at = metrics.find("\nlonghaul_link_rtt_seconds{"); at != std::string::npos;
       at = metrics.find("\nlonghaul_link_rtt_seconds{", at + 1))
    ++measured_links;
  CHECK(measured_links >= 3);  // every edge of the 3-region ring
  // Each region's workers agreed on their collectives: Gloo (auto; RealCluster
  // hides any GPU from them), with the reason, in status and /metrics.
  REQUIRE(st.regions_size() == 3);
  for (const auto& region : st.regions()) {
    INFO(region.region());
    CHECK(region.intra_region() == v1::INTRA_REGION_GLOO);
    CHECK_THAT(region.intra_region_reason(), Catch::StartsWith("auto: not nccl, worker rank 0"));
    CHECK_THAT(metrics, Catch::Contains("longhaul_region_intra_region_backend{backend=\"gloo\",job=\"" + job +
                                        "\",region=\"" + region.region() + "\"} 1"));
  }
}

TEST_CASE("e2e: intra_region nccl is refused, naming the worker and what it lacks", "[e2e]") {
  RealCluster c("e2e-nccl");
  c.StartOrchestrator();
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  v1::JobSpec spec = c.Spec(3, 5);
  spec.set_intra_region(v1::INTRA_REGION_NCCL);
  const std::string job = c.Submit(spec);
  // No worker sees a CUDA device (RealCluster hides any), so none can take
  // part: the first region to try rejects the job, which fails saying why.
  const v1::JobStatus st = c.WaitFor(job, JobDone, 120s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  CHECK(st.state() == "failed");
  CHECK(st.round() == 0);
  CHECK_THAT(st.reason(), Catch::Contains("intra-region group: intra_region nccl: worker rank 0"));
}

TEST_CASE("e2e: an agent killed mid-round, the job continues with two and replicas stay identical", "[e2e]") {
  RealCluster c("e2e-kill");
  c.StartOrchestrator();
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  const std::string job = c.Submit(8, 150);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 2 || JobDone(s); }, 180s);
  REQUIRE(st.round() >= 2);
  c.agents["ap-south"].Kill();  // the agent and its workers
  st = c.WaitFor(job, JobDone, 240s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 8);
  // Rounds after the kill ran on the two survivors, who agreed on every hash
  // (a commit requires it), i.e. their replicas stayed bitwise identical.
  CHECK(rounds.back().participants == std::vector<std::string>{"eu-west", "us-east"});
  auto store = orchestrator::StateStore::Open(c.dir / "state.sqlite");
  auto events = (*store)->LoadEvents(job, 200).value();
  bool retried = false;
  for (const auto& e : events) retried = retried || e.kind == "round_aborted";
  CHECK(retried);
}

TEST_CASE("e2e: each region on a host of its own, an agent killed mid-round, the other two finish", "[e2e][netns]") {
  SkipUnlessRoot("network namespaces");
  // Each agent in a network namespace with its own address: its loopback is its
  // own, so every endpoint a region advertises must be reachable from the others.
  RealCluster c("e2e-netns", {.netns = true});
  c.StartOrchestrator();
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  const std::string job = c.Submit(8, 150);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 2 || JobDone(s); }, 180s);
  REQUIRE(st.round() >= 2);
  c.agents["ap-south"].Kill();
  st = c.WaitFor(job, JobDone, 240s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 8);
  CHECK(rounds.front().participants.size() == 3);
  CHECK(rounds.back().participants == std::vector<std::string>{"eu-west", "us-east"});
}

TEST_CASE("e2e: a region's network cut and restored, each region on a host of its own: the job goes on "
          "without it, then it rejoins",
          "[e2e][netns]") {
  SkipUnlessRoot("network namespaces");
  // A partition, not a crash: every process of the region lives on, its
  // connections stall without a reset, and come back when the link does.
  RealCluster c("e2e-partition", {.netns = true});
  c.StartOrchestrator();
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  const std::string job = c.Submit(100000, 150);  // far longer than the test: it is cancelled
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 2 || JobDone(s); }, 180s);
  INFO("job " << job << ": " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "running");
  const uint32_t cut_round = st.round();
  const size_t region = 2;
  const std::string& name = kClusterRegions[region];
  const auto workers = ChildrenNamed(c.agents[name].pid(), "longhaul-worker");
  REQUIRE_FALSE(workers.empty());
  REQUIRE(c.networks->SetConnected(region, false).ok());
  // The others commit rounds without it.
  auto without = [&](const orchestrator::CommittedRound& r) {
    return r.round > cut_round && std::find(r.participants.begin(), r.participants.end(), name) == r.participants.end();
  };
  auto rounds = c.WaitForRounds(job, [&](const auto& rs) { return std::any_of(rs.begin(), rs.end(), without); }, 120s);
  const auto first_without = std::find_if(rounds.begin(), rounds.end(), without);
  REQUIRE(first_without != rounds.end());
  const uint32_t without_round = first_without->round;
  const double without_at = first_without->committed_at;  // `rounds` is read again below
  REQUIRE(c.networks->SetConnected(region, true).ok());
  // Back on the network, the same agent and workers (not a relaunch) rejoin.
  auto whole = [&](const orchestrator::CommittedRound& r) {
    return r.round > without_round && r.participants.size() == kClusterRegions.size();
  };
  rounds = c.WaitForRounds(job, [&](const auto& rs) { return std::any_of(rs.begin(), rs.end(), whole); }, 180s);
  const auto back = std::find_if(rounds.begin(), rounds.end(), whole);
  REQUIRE(back != rounds.end());
  std::printf("partition: cut after round %u, round %u committed without %s, back in round %u (%.1f s after it)\n",
              cut_round, without_round, name.c_str(), back->round, back->committed_at - without_at);
  for (size_t i = 0; i < rounds.size(); ++i) CHECK(rounds[i].round == i + 1);
  CHECK(c.agents[name].Running());
  CHECK(ChildrenNamed(c.agents[name].pid(), "longhaul-worker") == workers);
  CHECK(c.Cancel(job).state() == "cancelled");
}

TEST_CASE("e2e: the orchestrator is SIGKILLed and restarted mid-job, the job resumes", "[e2e]") {
  RealCluster c("e2e-restart");
  c.StartOrchestrator();
  const std::string port = c.ep.control.substr(c.ep.control.rfind(':') + 1);
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  const std::string job = c.Submit(8, 150);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 2 || JobDone(s); }, 180s);
  REQUIRE(st.round() >= 2);
  c.orchestrator.Kill();
  c.StartOrchestrator("tcp://127.0.0.1:" + port);
  st = c.WaitFor(job, JobDone, 240s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 8);
  for (uint32_t i = 0; i < 8; ++i) CHECK(rounds[i].round == i + 1);
}

namespace {

// Runs `longhaul demo ARGS` with a TMPDIR of its own (where the demo makes its
// folder), so a demo another test runs at the same time is not counted; the
// output, and whether the demo left its folder behind.
int RunDemo(const std::string& args, std::string* out, bool* left_behind) {
  const TempDir tmp("demo-tmp");
  const int code = RunCommand("TMPDIR=" + tmp.path().string() + " " + kBin + "/longhaul demo " + args, out);
  *left_behind = !fs::is_empty(tmp.path());
  return code;
}

}  // namespace

TEST_CASE("e2e: longhaul demo runs both policies, prints the table and leaves nothing behind", "[e2e]") {
  std::string out;
  bool left_behind = true;
  const int code = RunDemo("--no-wan-emulation --rounds 2 --inner-steps 5", &out, &left_behind);
  INFO(out);
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("DiLoCo H=5 int8") && Catch::Contains("fully synchronous (fp32)") &&
                      Catch::Contains("succeeded") && Catch::Contains("fewer WAN bytes"));
  CHECK_FALSE(left_behind);
}

TEST_CASE("e2e: longhaul demo --netns runs each region on a host of its own and removes the namespaces", "[e2e]") {
  SkipUnlessRoot("network namespaces");
  auto ours = [] {  // this run's namespaces are named longhaul-<pid % 100000>-<i>
    std::string list;
    RunCommand("ip netns list", &list);
    int n = 0;
    for (size_t at = list.find("longhaul-"); at != std::string::npos; at = list.find("longhaul-", at + 1)) ++n;
    return n;
  };
  const int before = ours();
  std::string out;
  bool left_behind = true;
  const int code = RunDemo("--netns --no-sync-baseline --rounds 3 --inner-steps 5", &out, &left_behind);
  INFO(out);
  CHECK(code == 0);
  CHECK_FALSE(left_behind);
  // Every region in a namespace with an address of its own; the orchestrator
  // on the bridge. Inside a namespace 127.0.0.1 is that namespace's alone, so
  // the job's rounds commit only if every endpoint a region advertises is
  // reachable from the others' hosts.
  CHECK_THAT(out, Catch::Contains("orchestrator on the bridge 10.231.") && Catch::Contains("agent eu-west in longhaul-") &&
                      Catch::Contains("agent us-east in longhaul-") && Catch::Contains("(tbf)") &&
                      Catch::Contains("all 3 rounds committed") && Catch::Contains("succeeded"));
  CHECK(ours() == before);
  std::string links;
  RunCommand("ip -o link show type bridge", &links);
  CHECK(links.find("lhbr") == std::string::npos);
}
