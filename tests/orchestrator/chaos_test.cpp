// Chaos tests with the real processes: a 3-region DiLoCo job on a real
// orchestrator and real agents whose WAN links go through longhaul-linkem, and
// one fault per test case while it runs: kill -9 of a worker, of an agent (with
// its workers and links; the agent is then restarted), of the orchestrator
// (restarted on the same port), and of one link emulator (the link is cut).
//
// The job is far longer than the test: each case waits for the events it
// checks (the faulted region gone from the rounds table and back, and round
// kCompareRound committed), checks, then cancels the job; it never races the
// job's end. Checked: rounds 1..n committed exactly once, in order; every
// participant's own worker log shows the committed hash for every committed
// round (the replicas stayed bitwise identical); the validation loss at round
// kCompareRound is within 5% of an undisturbed run of the same spec in the same
// cluster. Each case prints its recovery time (fault -> the first round
// committed after the orchestrator noticed the fault, and fault -> the first
// round with all three regions again) for information: time is measured, not
// asserted, in tests. Every wait is bounded.
#include <catch2/catch.hpp>

#include <signal.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <regex>

#include "longhaul/orchestrator/job_spec.h"
#include "real_cluster.h"

using namespace longhaul;
using namespace longhaul::testing;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string>& kRegions = kClusterRegions;
// 1200 inner steps per worker at bench/convergence's lr 2e-2: the loss falls
// from ~5.5 (uniform bytes) to ~1.6 (floor 1.11), so 5% is a real margin.
// Measured: undisturbed runs with other model seeds land within 2% of each
// other, the faulted runs 0.6-1.9% above; at 600 steps (still on the steep part
// of the curve) a region lost at round 3 cost 3.6%.
constexpr uint32_t kCompareRound = 24;
// Rounds in the spec: far more than any case waits for (it cancels the job);
// equal for the reference and the faulted run, so both see the same inner
// learning-rate schedule (cosine over the job's steps) up to kCompareRound.
constexpr uint32_t kJobRounds = 100000;
constexpr uint32_t kInnerSteps = 50;
constexpr uint32_t kFaultAtRound = 3;  // inject once this many rounds are committed
constexpr double kLossTolerance = 0.05;
constexpr auto kRoundsLimit = 300s;  // bound on reaching kCompareRound, faults and recovery included

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Polls until `parent` has a child named `name` (workers and linkems start
// after the job is assigned); -1 when none appears within `limit`.
pid_t WaitForChild(pid_t parent, const std::string& name, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto kids = ChildrenNamed(parent, name);
    if (!kids.empty()) return kids.front();
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

// "round R epoch E: hash H" lines of one worker log -> hash by (round, epoch).
std::map<std::pair<uint32_t, uint64_t>, std::string> HashesInLog(const fs::path& log) {
  std::map<std::pair<uint32_t, uint64_t>, std::string> out;
  std::ifstream in(log);
  static const std::regex line_re(R"(^round (\d+) epoch (\d+): hash (\S+) )");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, line_re))
      out[{static_cast<uint32_t>(std::stoul(m[1])), std::stoull(m[2])}] = m[3];
  return out;
}

// Every region behind longhaul-linkem links (100 Mbit/s, 10 ms one way), so
// there are links to cut. val_loss from 64 held-out batches: with the default
// 4, undisturbed runs with another model seed already differed by up to 6%.
// Each inner step takes 10x its compute time (the rest slept; the arithmetic is
// unchanged), so the second or so a relaunched worker takes to rejoin costs a
// few rounds, not 8 or more. The loss at kCompareRound depends on which rounds
// the region missed: over 17 unthrottled runs (2026-12-07, some with both cores
// loaded) a region back at round 6-10 ended -2.2% to +1.2% from the undisturbed
// run, and one back at round 11 or 12 (the load slowed its relaunch, a round
// took ~0.1 s) +5.0% to +5.4%, failing the 5% bound. Throttled, with both cores
// loaded, it was back at round 6 or 7 (-0.7% to +1.2%).
RealClusterOptions ChaosOptions() {
  return {{"--wan-rate-mbit", "100", "--wan-delay-ms", "10", "--wan-jitter-ms", "1", "--validation-batches", "64",
           "--compute-throttle-percent", "1000"}};
}

// The defaults (synthetic order-1 Markov data, IID over regions) with
// bench/convergence's training setting.
v1::JobSpec ChaosSpec() {
  v1::JobSpec s = orchestrator::DefaultJobSpec();
  s.set_name("chaos");
  s.clear_regions();
  for (const auto& r : kRegions) s.add_regions(r);
  s.set_region_count(3);
  s.set_min_regions(2);
  s.set_workers_per_region(1);
  s.set_rounds(kJobRounds);
  s.set_checkpoint_interval(0);
  s.mutable_inner()->set_lr(2e-2);
  s.mutable_inner()->set_warmup_steps(10);
  s.mutable_inner()->set_batch_size(16);
  s.mutable_outer()->set_lr(0.7);
  s.mutable_outer()->set_momentum(0.5);
  s.mutable_sync()->set_kind("diloco");
  s.mutable_sync()->set_inner_steps(kInnerSteps);
  s.mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
  s.mutable_compression()->set_block_size(256);
  return s;
}

// Polls the orchestrator's region list until `region` is in `state` ("down", "up").
bool WaitForRegionState(const RealCluster& c, const std::string& region, const std::string& state,
                        std::chrono::seconds limit) {
  auto client = c.Client();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    v1::ControlMessage req;
    req.mutable_list_regions();
    auto reply = client->Call(req);
    if (reply.ok())
      for (const auto& r : reply->list_regions_reply().regions())
        if (r.region() == region && r.state() == state) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

fs::path WorkerLog(const RealCluster& c, const std::string& region, const std::string& job) {
  return c.dir / region / job / "worker-0.log";
}

// The validation loss of round kCompareRound of `job` (rounds: its table).
double LossAtCompareRound(const std::vector<orchestrator::CommittedRound>& rounds) {
  REQUIRE(rounds.size() >= kCompareRound);
  REQUIRE(rounds[kCompareRound - 1].round == kCompareRound);
  REQUIRE(rounds[kCompareRound - 1].val_loss > 0);
  return rounds[kCompareRound - 1].val_loss;
}

// An undisturbed run of the spec: its validation loss at kCompareRound.
double ReferenceLoss(RealCluster& c) {
  const std::string job = c.Submit(ChaosSpec());
  auto rounds = c.WaitForRounds(job, [](const auto& r) { return r.size() >= kCompareRound; }, kRoundsLimit);
  INFO("reference run: " << rounds.size() << " rounds committed (logs in " << c.dir << ")");
  const double loss = LossAtCompareRound(rounds);
  CHECK(c.Cancel(job).state() == "cancelled");
  return loss;
}

// Rounds 1..n each committed once, in order, and every participant's worker
// logged the committed hash.
void CheckRoundsAndReplicas(const RealCluster& c, const std::string& job,
                            const std::vector<orchestrator::CommittedRound>& rounds) {
  for (size_t i = 0; i < rounds.size(); ++i) CHECK(rounds[i].round == i + 1);
  // A commit needs every participant's hash to agree; check it from the
  // regions' side too: each participant's worker logged the committed hash.
  std::map<std::string, std::map<std::pair<uint32_t, uint64_t>, std::string>> logged;
  for (const auto& r : kRegions) logged[r] = HashesInLog(WorkerLog(c, r, job));
  for (const auto& r : rounds) {
    REQUIRE(r.participants.size() >= 2);  // min_regions
    for (const auto& p : r.participants) {
      INFO("round " << r.round << " epoch " << r.epoch << " participant " << p);
      auto it = logged[p].find({r.round, r.epoch});
      REQUIRE(it != logged[p].end());
      CHECK(it->second == r.param_hash);
    }
  }
}

// What each case checks after its fault, and the recovery line it prints.
// `back_region`: the region that must be seen gone and back ("" when the fault
// is the control plane's: then a round with every region after the fault).
void CheckRecovered(const RealCluster& c, const std::string& job, const std::string& fault,
                    const std::string& back_region, uint32_t fault_round, double fault_at, double reference) {
  // The region's return is seen either as rounds committed without it and then
  // with it again, or (when it relaunched before any round could commit without
  // it) as an aborted attempt after the fault followed by a round every region
  // committed: a killed worker or link cannot take part until relaunched.
  auto whole_after_abort = [&](const std::vector<orchestrator::CommittedRound>& rounds) {
    for (const auto& e : c.Events(job)) {
      if (e.time < fault_at || e.kind != "round_aborted") continue;
      return std::any_of(rounds.begin(), rounds.end(), [&](const auto& r) {
        return r.committed_at >= e.time && r.participants.size() == kRegions.size();
      });
    }
    return false;
  };
  auto done = [&](const std::vector<orchestrator::CommittedRound>& rounds) {
    if (rounds.size() < kCompareRound) return false;
    if (!back_region.empty()) return FindRejoin(rounds, back_region, fault_round) || whole_after_abort(rounds);
    return std::any_of(rounds.begin(), rounds.end(), [&](const auto& r) {
      return r.committed_at >= fault_at && r.participants.size() == kRegions.size();
    });
  };
  const auto rounds = c.WaitForRounds(job, done, kRoundsLimit);
  const auto st = c.WaitFor(job, [](const v1::JobStatus&) { return true; }, 5s);
  INFO(fault << ": job " << job << " " << st.state() << " after " << rounds.size() << " rounds: " << st.reason()
             << " (logs in " << c.dir << ")");
  REQUIRE(done(rounds));  // the region came back (or the job went on), and the job reached kCompareRound
  CheckRoundsAndReplicas(c, job, rounds);

  const double loss = LossAtCompareRound(rounds);
  const double rel = std::abs(loss - reference) / reference;
  INFO("round " << kCompareRound << " val_loss " << loss << " vs undisturbed " << reference);
  CHECK(rel <= kLossTolerance);

  // Recovery, printed: the fault is noticed at the first abort (or restore)
  // after it; recovered at the first commit after that; whole again at the
  // first commit with every region.
  auto events = c.Events(job);
  std::optional<double> noticed;
  for (const auto& e : events)
    if (e.time >= fault_at && (e.kind == "round_aborted" || e.kind == "restored" || e.kind == "region_down" ||
                               e.kind == "region_lost")) {
      noticed = e.time;
      break;
    }
  REQUIRE(noticed);  // the fault took effect: the orchestrator saw it
  const orchestrator::CommittedRound* next = nullptr;
  const orchestrator::CommittedRound* whole = nullptr;
  for (const auto& r : rounds) {
    if (!next && r.committed_at >= *noticed) next = &r;
    if (next && !whole && r.participants.size() == kRegions.size()) whole = &r;
  }
  REQUIRE(next != nullptr);
  REQUIRE(whole != nullptr);
  int aborts = 0;
  for (const auto& e : events) aborts += e.kind == "round_aborted" && e.time >= fault_at ? 1 : 0;
  std::printf(
      "chaos: %s (%s): recovered in %.1f s (round %u committed by %zu regions), all %zu regions in %.1f s (round "
      "%u); %d aborted attempt(s); round %u val_loss %.4f vs undisturbed %.4f (%+.2f%%)\n",
      fault.c_str(), back_region.empty() ? "control plane" : back_region.c_str(), next->committed_at - fault_at,
      next->round, next->participants.size(), kRegions.size(), whole->committed_at - fault_at, whole->round, aborts,
      kCompareRound, loss, reference, 100.0 * (loss - reference) / reference);
  std::fflush(stdout);
  CHECK(c.Cancel(job).state() == "cancelled");
}

// Boots the cluster, runs the reference, submits the job under test and waits
// until kFaultAtRound rounds are committed.
struct ChaosRun {
  RealCluster c;
  double reference = 0;
  std::string job;
  uint32_t fault_round = 0;

  explicit ChaosRun(const std::string& tag) : c(tag, ChaosOptions()) {
    c.StartOrchestrator();
    for (const auto& r : kRegions) c.StartAgent(r);
    reference = ReferenceLoss(c);
    job = c.Submit(ChaosSpec());
    auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= kFaultAtRound || JobDone(s); }, 120s);
    INFO("job " << job << ": " << st.reason());
    REQUIRE(st.state() == "running");
    REQUIRE(st.round() >= kFaultAtRound);
    fault_round = st.round();
  }

  // kill -9 of one process the region's agent started (a worker, a link
  // emulator), then the recovery checks.
  void KillChildOfAgent(const std::string& region, const std::string& name, const std::string& fault) {
    const pid_t child = WaitForChild(c.agents[region].pid(), name, 10s);
    REQUIRE(child > 0);
    const double fault_at = UnixNow();
    REQUIRE(::kill(child, SIGKILL) == 0);
    CheckRecovered(c, job, fault, region, fault_round, fault_at, reference);
  }
};

}  // namespace

TEST_CASE("chaos: kill -9 one worker, the region relaunches it and rejoins", "[chaos]") {
  ChaosRun run("chaos-worker");
  run.KillChildOfAgent("us-east", "longhaul-worker", "kill -9 worker");
}

TEST_CASE("chaos: kill -9 one agent with its workers, restarted, the region rejoins", "[chaos]") {
  ChaosRun run("chaos-agent");
  const std::string region = "ap-south";
  const double fault_at = UnixNow();
  run.c.agents[region].Kill();  // the agent, its workers and its links
  // Restarted once the orchestrator has marked it down, as an operator (or
  // systemd) would after the crash.
  CHECK(WaitForRegionState(run.c, region, "down", 10s));
  run.c.StartAgent(region);
  CheckRecovered(run.c, run.job, "kill -9 agent", region, run.fault_round, fault_at, run.reference);
}

TEST_CASE("chaos: kill -9 the orchestrator, restarted on the same port, the job resumes", "[chaos]") {
  ChaosRun run("chaos-orchestrator");
  const std::string port = run.c.ep.control.substr(run.c.ep.control.rfind(':') + 1);
  const double fault_at = UnixNow();
  run.c.orchestrator.Kill();
  run.c.StartOrchestrator("tcp://127.0.0.1:" + port);
  CheckRecovered(run.c, run.job, "kill -9 orchestrator", "", run.fault_round, fault_at, run.reference);
}

TEST_CASE("chaos: one WAN link cut (its linkem killed), the region relaunches and rejoins", "[chaos]") {
  ChaosRun run("chaos-link");
  run.KillChildOfAgent("eu-west", "longhaul-linkem", "link cut (linkem killed)");
}

TEST_CASE("chaos: every agent killed with its workers and restarted, the job resumes from a region's checkpoint",
          "[chaos][checkpoint]") {
  // No region holds the last committed parameters any more: one restores them
  // from its own checkpoint of that round (its workers check the round and the
  // committed hash) and the others are bootstrapped from it.
  RealCluster c("chaos-all-agents");
  c.StartOrchestrator();
  for (const auto& r : kRegions) c.StartAgent(r);
  v1::JobSpec spec = ChaosSpec();
  constexpr uint32_t kRounds = 8;
  spec.set_rounds(kRounds);
  spec.set_checkpoint_interval(1);
  const std::string job = c.Submit(spec);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 2 || JobDone(s); }, 120s);
  INFO("job " << job << ": " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "running");
  const uint32_t killed_after = st.round();
  const double fault_at = UnixNow();
  for (const auto& r : kRegions) c.agents[r].Kill();  // agents, workers and their state
  for (const auto& r : kRegions) CHECK(WaitForRegionState(c, r, "down", 10s));
  for (const auto& r : kRegions) c.StartAgent(r);
  st = c.WaitFor(job, JobDone, 180s);
  INFO("after the restart: " << st.state() << ": " << st.reason());
  REQUIRE(st.state() == "succeeded");
  const auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == kRounds);  // none lost, none applied twice (the table's key is the round)
  CheckRoundsAndReplicas(c, job, rounds);
  CHECK(st.param_hash() == rounds.back().param_hash);
  const auto events = c.Events(job);
  const auto restoring = std::find_if(events.begin(), events.end(), [&](const orchestrator::EventRecord& e) {
    return e.kind == "restoring" && e.time >= fault_at;
  });
  REQUIRE(restoring != events.end());
  std::printf("chaos: every agent killed after round %u; %s\n", killed_after, restoring->message.c_str());
}
