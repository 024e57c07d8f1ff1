// The Orchestrator state machine driven in-process: fake agents are plain
// message exchanges, time is a ManualClock, the store is a real SQLite file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "flow_rig.h"
#include "longhaul/proto/frame.h"
#include "longhaul/proto/wire_enums.h"
#include "longhaul/orchestrator/scheduler.h"

using namespace longhaul;
using namespace longhaul::orchestrator;
using namespace longhaul::orchestrator::testing;
using namespace std::chrono_literals;

TEST_CASE("a job runs through its rounds, a silent region is dropped, the round retried and the region readmitted",
          "[orchestrator]") {
  Rig rig("flow");
  const std::string job = StartJob(rig, 4);
  for (auto& [r, id] : kAll) rig.Report(job, 1, 1, r, id, "h1");
  auto sent = rig.Take();
  CHECK(Count(sent, v1::ControlMessage::kRoundVerdict) == 3);
  auto starts = Starts(sent);
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-b"].round() == 2);
  CHECK(starts["id-b"].epoch() == 2);

  // Round 2: a and b report, c goes silent.
  rig.Report(job, 2, 2, "a", "id-a", "h2");
  rig.Report(job, 2, 2, "b", "id-b", "h2");
  rig.Pass(400ms, {{"a", "id-a"}, {"b", "id-b"}}, {job});
  sent = rig.Take();
  starts = Starts(sent);
  REQUIRE(starts.size() == 2);  // the retry goes to the survivors only
  CHECK(starts.count("id-c") == 0);
  CHECK(starts["id-a"].round() == 2);
  CHECK(starts["id-a"].epoch() == 3);
  CHECK(starts["id-a"].participants_size() == 2);
  auto status = rig.o().JobStatusOf(job).value();
  CHECK(status.round() == 1);
  CHECK(status.epoch() == 3);

  // Disagreeing hashes: no commit, another retry.
  rig.Report(job, 2, 3, "a", "id-a", "x");
  rig.Report(job, 2, 3, "b", "id-b", "y");
  starts = Starts(rig.Take());
  REQUIRE(starts.size() == 2);
  CHECK(starts["id-a"].epoch() == 4);
  CHECK(rig.o().JobStatusOf(job).value().round() == 1);

  // A stale report (epoch 3) is dropped; the current epoch commits.
  rig.Report(job, 2, 3, "a", "id-a", "x");
  CHECK(rig.Take().empty());
  rig.Report(job, 2, 4, "a", "id-a", "h2");
  rig.Report(job, 2, 4, "b", "id-b", "h2");
  starts = Starts(rig.Take());
  REQUIRE(starts.size() == 2);
  CHECK(starts["id-a"].round() == 3);

  // c comes back (new agent process): it is assigned the job again and joins at
  // the next round boundary, bootstrapped from a region that holds the state.
  rig.Register("c", "id-c2");
  rig.Heartbeat("c", "id-c2");
  rig.o().Tick();
  sent = rig.Take();
  REQUIRE(Count(sent, v1::ControlMessage::kJobAssignment) == 1);
  for (const auto& s : sent) {
    if (!s.msg.has_job_assignment()) continue;
    CHECK(s.to == "id-c2");
    CHECK(s.msg.job_assignment().start_round() == 3);
  }
  rig.Ready(job, "c", "id-c2");
  rig.Report(job, 3, 5, "a", "id-a", "h3");
  rig.Report(job, 3, 5, "b", "id-b", "h3");
  starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  const auto& start4 = starts["id-c2"];
  CHECK(start4.round() == 4);
  REQUIRE(start4.joining_regions_size() == 1);
  CHECK(start4.joining_regions(0) == "c");
  CHECK((start4.bootstrap_region() == "a" || start4.bootstrap_region() == "b"));
  for (auto& [r, id] : std::vector<std::pair<std::string, std::string>>{{"a", "id-a"}, {"b", "id-b"}, {"c", "id-c2"}})
    rig.Report(job, 4, start4.epoch(), r, id, "h4");
  sent = rig.Take();
  int stops = 0;
  for (auto& s : sent) stops += s.msg.has_round_command() && s.msg.round_command().kind() == v1::RoundCommand::STOP;
  CHECK(stops == 3);
  status = rig.o().JobStatusOf(job).value();
  CHECK(status.state() == "succeeded");
  CHECK(status.round() == 4);
  CHECK(status.wan_bytes() == 4000 * (3 + 2 + 2 + 3));
  auto rounds = rig.store().LoadRounds(job).value();
  REQUIRE(rounds.size() == 4);
  CHECK(rounds[1].participants == std::vector<std::string>{"a", "b"});
  CHECK(rounds[1].param_hash == "h2");
}

TEST_CASE("flow: a region's failure that arrives just after the round's deadline aborted it is still recorded, once",
          "[orchestrator]") {
  // The agent names a hung worker (with its output) at the round timeout; the
  // orchestrator's deadline, equally long, may abort the round first.
  Rig rig("late-failure");
  const std::string job = StartJob(rig, 2);
  rig.Report(job, 1, 1, "a", "id-a", "h1");
  rig.Report(job, 1, 1, "b", "id-b", "h1");
  rig.Pass(5100ms, kAll, {job});
  REQUIRE_FALSE(EventMessages(rig, job, "round_aborted").empty());
  rig.Take();
  auto failed = [&](uint64_t epoch, bool ok) {
    v1::ControlMessage m;
    auto* r = m.mutable_round_report();
    r->set_job_id(job);
    r->set_round(1);
    r->set_epoch(epoch);
    r->set_region("c");
    r->set_ok(ok);
    if (ok) r->set_param_hash("h1");
    r->mutable_error()->set_message("worker(s) 0 sent no round report within 5 s (hung?)");
    r->mutable_error()->set_worker_output("waiting on a lock nobody releases\n");
    rig.Send("id-c", m);
  };
  auto region_failed = [&] { return EventMessages(rig, job, "region_failed"); };
  failed(1, true);  // a success after the abort says nothing worth keeping
  CHECK(region_failed().empty());
  failed(1, false);
  REQUIRE(region_failed() == std::vector<std::string>{
                                 "round 1 epoch 1 (reported after its abort): c failed: worker(s) 0 sent no round "
                                 "report within 5 s (hung?)"});
  CHECK_THAT(rig.o().JobStatusOf(job, PeerKey{}).value().worker_output(), Catch::Contains("nobody releases"));
  failed(1, false);  // once per region and attempt
  failed(2, false);  // an epoch that was not aborted: stale as before
  CHECK(region_failed().size() == 1);
  CHECK(Starts(rig.Take()).empty());  // nothing else changes
}

TEST_CASE("flow: regions assigned again before any round committed hold theta(0): round 1 never waits for a bootstrap",
          "[orchestrator]") {
  Rig rig("round1");
  const std::string job = StartJob(rig, 2);
  // Round 1 is under way when every agent loses the job (heartbeats without
  // it: restarted): nobody is ready, and nobody has committed anything.
  rig.Pass(300ms, kAll, {});
  auto sent = rig.Take();
  CHECK(Count(sent, v1::ControlMessage::kJobAssignment) >= 3);  // assigned again
  for (auto& [r, id] : kAll) rig.Ready(job, r, id);  // every agent relaunched its workers from the seed
  rig.Pass(200ms, kAll, {job});
  auto starts = Starts(rig.Take());
  INFO(rig.o().JobStatusOf(job).value().reason());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 1);
  CHECK(starts["id-a"].participants_size() == 3);
  CHECK(starts["id-a"].joining_regions_size() == 0);  // all hold theta(0): nothing to bootstrap
}

TEST_CASE("flow: a region that starts from other parameters than the first region receives the first region's at "
          "round 1 and the job says so",
          "[orchestrator]") {
  Rig rig("start-hash");
  const std::string job = AssignJob(rig, 2);
  const std::string seeded = "5eed5eed5eed5eed", other = "0123456789abcdef";
  rig.Ready(job, "a", "id-a", 0, seeded);
  rig.Ready(job, "b", "id-b", 0, other);
  // A hash that is not one is refused with the message: c is not ready.
  rig.Ready(job, "c", "id-c", 0, "not a hash");
  CHECK(Starts(rig.Take()).empty());
  CHECK(rig.o().JobStatusOf(job).value().state() == "scheduled");
  rig.Ready(job, "c", "id-c", 0, seeded);
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 1);
  CHECK(starts["id-a"].joining_regions_size() == 1);
  CHECK(starts["id-a"].joining_regions(0) == "b");
  CHECK(starts["id-a"].bootstrap_region() == "a");
  const auto said = EventMessages(rig, job, "start_parameters_differ");
  REQUIRE(said.size() == 1);
  CHECK_THAT(said[0], Catch::Contains("a from " + seeded) && Catch::Contains("b from " + other) &&
                          Catch::Contains("b receives a's at round 1"));
  // b now holds a's parameters: round 1 commits one hash, and round 2 has nothing to bootstrap.
  const uint64_t epoch = starts["id-a"].epoch();
  for (auto& [r, id] : kAll) rig.Report(job, 1, epoch, r, id, "h1");
  starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 2);
  CHECK(starts["id-a"].joining_regions_size() == 0);
  CHECK(EventMessages(rig, job, "start_parameters_differ").size() == 1);
}

TEST_CASE("flow: a job whose region sends a malformed start hash fails at the round timeout naming it",
          "[orchestrator]") {
  Rig rig("bad-start-hash");
  const std::string job = AssignJob(rig, 2);
  rig.Ready(job, "a", "id-a", 0, "5eed5eed5eed5eed");
  rig.Ready(job, "b", "id-b", 0, "5eed5eed5eed5eed");
  rig.Ready(job, "c", "id-c", 0, "5EED5EED");
  rig.Pass(6s, kAll, {job});  // the round timeout is 5 s
  const auto status = rig.o().JobStatusOf(job).value();
  CHECK(status.state() == "failed");
  CHECK_THAT(status.reason(), Catch::Contains("c (its JobReady carried a parameter hash that is not 16 hex digits") &&
                                  Catch::Contains("did not report ready"));
}

namespace {

using StartsByWorker = std::map<std::string, v1::RoundCommand>;

// Round 1 of a job (min_regions 2) whose regions a, b and c start from
// parameter hashes `a`, `b` and `c`; then a goes silent, and round 1 is
// retried with b and c. Returns the first STARTs and the retry's (two, round 1).
std::pair<StartsByWorker, StartsByWorker> Round1RetriedWithoutA(Rig& rig, const std::string& a, const std::string& b,
                                                                const std::string& c) {
  const std::string job = AssignJob(rig, 2);
  rig.Ready(job, "a", "id-a", 0, a);
  rig.Ready(job, "b", "id-b", 0, b);
  rig.Ready(job, "c", "id-c", 0, c);
  StartsByWorker first = Starts(rig.Take());
  REQUIRE(first.size() == 3);
  rig.Pass(400ms, {{"b", "id-b"}, {"c", "id-c"}}, {job});
  StartsByWorker retry = Starts(rig.Take());
  INFO(rig.o().JobStatusOf(job).value().reason());
  REQUIRE(retry.size() == 2);
  CHECK(retry["id-b"].round() == 1);
  return {first, retry};
}

const std::string kHash1 = "00000000000000a1", kHash2 = "00000000000000b2";

}  // namespace

TEST_CASE("flow: round 1 retried without the region others joined from: one that holds its own start bootstraps "
          "them",
          "[orchestrator]") {
  Rig rig("start-hash-abort");
  // b joins from a at first; a goes silent. b lost what it was joining for;
  // c holds its own start, which b takes (not the other way round).
  auto [first, retry] = Round1RetriedWithoutA(rig, kHash1, kHash2, kHash1);
  REQUIRE(first["id-b"].joining_regions_size() == 1);
  CHECK(first["id-b"].bootstrap_region() == "a");
  REQUIRE(retry["id-b"].joining_regions_size() == 1);
  CHECK(retry["id-b"].joining_regions(0) == "b");
  CHECK(retry["id-b"].bootstrap_region() == "c");
}

TEST_CASE("flow: round 1 retried after every region holding a start was lost: the first ready region gives it",
          "[orchestrator]") {
  Rig rig("start-hash-no-holder");
  // b and c both join from a at first; a goes silent, and they are left without a holder.
  auto [first, retry] = Round1RetriedWithoutA(rig, kHash1, kHash2, kHash2);
  CHECK(first["id-b"].joining_regions_size() == 2);
  REQUIRE(retry["id-b"].joining_regions_size() == 1);
  CHECK(retry["id-b"].joining_regions(0) == "c");
  CHECK(retry["id-b"].bootstrap_region() == "b");
}

TEST_CASE("flow: after round 1 failed on disagreeing hashes no start hash is trusted: the others are bootstrapped",
          "[orchestrator]") {
  Rig rig("start-hash-untrusted");
  const std::string job = AssignJob(rig, 2);
  for (auto& [r, id] : kAll) rig.Ready(job, r, id, 0, "00000000000000a1");  // all the same, so far as they say
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].joining_regions_size() == 0);
  // a reports hash x, b and c hash y: round 1 fails on disagreeing hashes.
  auto disagree = [&](uint64_t epoch) {
    rig.Report(job, 1, epoch, "a", "id-a", "x");
    rig.Report(job, 1, epoch, "b", "id-b", "y");
    rig.Report(job, 1, epoch, "c", "id-c", "y");
    return Starts(rig.Take());
  };
  starts = disagree(starts["id-a"].epoch());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 1);
  CHECK(starts["id-a"].joining_regions_size() == 2);
  CHECK(starts["id-a"].bootstrap_region() == "a");
  const auto said = EventMessages(rig, job, "start_parameters_differ");
  REQUIRE(said.size() == 1);
  CHECK_THAT(said[0], Catch::Contains("not trusted") && Catch::Contains("b, c receive a's at round 1"));
  // Disagreeing again: the same attempt again, said once.
  starts = disagree(starts["id-a"].epoch());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].joining_regions_size() == 2);
  CHECK(EventMessages(rig, job, "start_parameters_differ").size() == 1);
}

TEST_CASE("flow: an agent restarted while its job starts is assigned the job again at once, a reconnect is sent "
          "its unanswered assignment again",
          "[orchestrator][restart]") {
  Rig rig("restart-start");
  const std::string job = AssignJob(rig, 2);
  rig.Ready(job, "a", "id-a");
  rig.Ready(job, "b", "id-b");
  rig.Pass(200ms, kAll, {job});  // c's agent launches its workers
  CHECK(rig.o().JobStatusOf(job).value().state() == "scheduled");
  rig.Take();

  // The same process reconnecting (a new connection, the same session): its
  // assignment, not yet answered, is sent again on the new connection (the
  // first may have gone to the one it dropped: a region partitioned from the
  // orchestrator for a second never rejoined its job), not a new launch.
  rig.Register("c", "id-c-again", {}, "session-id-c");
  CHECK(AssignedTo(rig.Take()) == std::vector<std::string>{"id-c-again"});
  CHECK(EventMessages(rig, job, "region_restarted").empty());
  // A ready region reconnecting has nothing to answer: nothing is sent.
  rig.Register("a", "id-a", {}, "session-id-a");
  CHECK(Count(rig.Take(), v1::ControlMessage::kJobAssignment) == 0);

  // c's agent dies and systemd restarts it within the heartbeat-miss window: a
  // new session. The job is assigned to it at once, not after the round timeout.
  rig.Register("c", "id-c2");
  CHECK(AssignedTo(rig.Take()) == std::vector<std::string>{"id-c2"});
  CHECK_FALSE(EventMessages(rig, job, "region_restarted").empty());
  rig.Ready(job, "c", "id-c2");
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts.count("id-c2") == 1);
  CHECK(rig.o().JobStatusOf(job).value().state() == "running");
}

TEST_CASE("flow: an agent restarted mid-round is assigned the job again at once and the round goes on without it",
          "[orchestrator][restart]") {
  Rig rig("restart-round");
  const std::string job = StartJob(rig, 3);
  rig.Register("c", "id-c2");  // c's agent restarted: its launch is gone
  auto sent = rig.Take();
  CHECK(AssignedTo(sent) == std::vector<std::string>{"id-c2"});
  auto starts = Starts(sent);  // round 1 retried at once with the two that still run it
  REQUIRE(starts.size() == 2);
  CHECK(starts["id-a"].round() == 1);
  CHECK(starts["id-a"].participants_size() == 2);
}

namespace {
// Rounds 1..n of a running job committed, every region reporting its checkpoint
// "/ckpt/<region>-<round>". Returns the epoch of the next START.
std::string CheckpointOf(const std::string& region, uint32_t round) {
  std::string path = "/ckpt/";
  path.append(region).append("-").append(std::to_string(round));
  return path;
}
uint64_t CommitWithCheckpoints(Rig& rig, const std::string& job, uint32_t n) {
  uint64_t epoch = 1;
  for (uint32_t round = 1; round <= n; ++round) {
    std::string hash = "h";
    hash += std::to_string(round);
    for (auto& [r, id] : kAll) rig.Report(job, round, epoch, r, id, hash, 0, 0, CheckpointOf(r, round));
    auto starts = Starts(rig.Take());
    REQUIRE(starts.size() == 3);
    epoch = starts["id-a"].epoch();
  }
  return epoch;
}
// Every agent restarts (new sessions, new connections) and relaunches the job
// from nothing: ready, holding no state.
const std::vector<std::pair<std::string, std::string>> kRestarted = {{"a", "id-a2"}, {"b", "id-b2"}, {"c", "id-c2"}};
void RestartEveryAgent(Rig& rig, const std::string& job) {
  for (auto& [r, id] : kRestarted) rig.Register(r, id);
  std::set<std::string> assigned;  // a region excluded from an aborted round may hear it twice
  for (const auto& s : rig.Take())
    if (s.msg.has_job_assignment()) {
      assigned.insert(s.to);
      CHECK(s.msg.job_assignment().checkpoint_path().empty());
    }
  REQUIRE(assigned == std::set<std::string>{"id-a2", "id-b2", "id-c2"});
  for (auto& [r, id] : kRestarted) rig.Ready(job, r, id);
  rig.Pass(100ms, kRestarted, {job});  // the next round start finds no region holding the state
}
std::vector<v1::JobAssignment> Assignments(const std::vector<Sent>& sent, std::vector<std::string>* to = nullptr) {
  std::vector<v1::JobAssignment> out;
  for (const auto& s : sent)
    if (s.msg.has_job_assignment()) {
      out.push_back(s.msg.job_assignment());
      if (to) to->push_back(s.to);
    }
  return out;
}
}  // namespace

TEST_CASE("flow: after every agent restarted one region restores its checkpoint of the last committed round and "
          "bootstraps the others: no round lost or applied twice",
          "[orchestrator][checkpoint]") {
  Rig rig("ckpt-restore");
  const std::string job = StartJob(rig, 4);
  CommitWithCheckpoints(rig, job, 2);
  RestartEveryAgent(rig, job);
  // Nobody holds theta(2): a's checkpoint of round 2 is assigned, with the
  // round and the committed hash its workers must find in it.
  std::vector<std::string> to;
  auto assigned = Assignments(rig.Take(), &to);
  REQUIRE(assigned.size() == 1);
  CHECK(to[0] == "id-a2");
  CHECK(assigned[0].checkpoint_path() == "/ckpt/a-2");
  CHECK(assigned[0].checkpoint_round() == 2);
  CHECK(assigned[0].checkpoint_param_hash() == "h2");
  CHECK(assigned[0].start_round() == 3);
  CHECK_THAT(rig.o().JobStatusOf(job).value().reason(), Catch::Contains("restores them from its checkpoint"));
  rig.Ready(job, "a", "id-a2", 0);  // late: the launch from before the restore
  rig.Pass(100ms, kRestarted, {job});
  CHECK(Starts(rig.Take()).empty());  // still waiting for the restore
  rig.Ready(job, "a", "id-a2", 2);  // its workers restored and verified round 2
  rig.Pass(100ms, kRestarted, {job});
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  const auto start3 = starts["id-b2"];
  CHECK(start3.round() == 3);
  CHECK(start3.bootstrap_region() == "a");
  CHECK(start3.joining_regions_size() == 2);
  for (auto& [r, id] : kRestarted) rig.Report(job, 3, start3.epoch(), r, id, "h3");
  starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  for (auto& [r, id] : kRestarted) rig.Report(job, 4, starts["id-a2"].epoch(), r, id, "h4");
  CHECK(rig.o().JobStatusOf(job).value().state() == "succeeded");
  const auto rounds = rig.store().LoadRounds(job).value();
  REQUIRE(rounds.size() == 4);
  const std::vector<std::string> hashes = {"h1", "h2", "h3", "h4"};
  for (uint32_t i = 0; i < 4; ++i) {
    CHECK(rounds[i].round == i + 1);
    CHECK(rounds[i].param_hash == hashes[i]);
  }
}

TEST_CASE("flow: a refused checkpoint is not tried again: the next region's is",
          "[orchestrator][checkpoint]") {
  Rig rig("ckpt-refused");
  const std::string job = StartJob(rig, 4);
  CommitWithCheckpoints(rig, job, 1);
  RestartEveryAgent(rig, job);
  auto assigned = Assignments(rig.Take());
  REQUIRE(assigned.size() == 1);
  CHECK(assigned[0].checkpoint_path() == "/ckpt/a-1");
  v1::ControlMessage rejected;
  rejected.mutable_job_rejected()->set_job_id(job);
  rejected.mutable_job_rejected()->set_region("a");
  // A rejection from the launch before the restore (it names no checkpoint): not the restore's answer.
  rejected.mutable_job_rejected()->mutable_error()->set_message("worker 0 exited with status 1");
  rig.Send("id-a2", rejected);
  rig.Pass(100ms, kRestarted, {job});
  CHECK(Assignments(rig.Take()).empty());  // a's restore is still under way
  rejected.mutable_job_rejected()->mutable_error()->set_message("checkpoint /ckpt/a-1: its parameters hash to x");
  rig.Send("id-a2", rejected);
  rig.Pass(100ms, kRestarted, {job});
  std::vector<std::string> to;
  assigned = Assignments(rig.Take(), &to);
  // a is assigned again without a checkpoint; b restores its own.
  REQUIRE(assigned.size() == 2);
  for (size_t i = 0; i < assigned.size(); ++i) {
    if (to[i] == "id-a2") CHECK(assigned[i].checkpoint_path().empty());
    if (to[i] == "id-b2") CHECK(assigned[i].checkpoint_path() == "/ckpt/b-1");
  }
  CHECK(std::count(to.begin(), to.end(), "id-b2") == 1);
  CHECK_FALSE(EventMessages(rig, job, "restore_refused").empty());
}

TEST_CASE("flow: without checkpoints a job whose regions all lost the state stays paused and says why",
          "[orchestrator][checkpoint]") {
  Rig rig("ckpt-none");
  const std::string job = StartJob(rig, 4);
  for (auto& [r, id] : kAll) rig.Report(job, 1, 1, r, id, "h1");  // no checkpoint written
  rig.Take();
  RestartEveryAgent(rig, job);
  rig.Pass(200ms, kRestarted, {job});
  CHECK(Assignments(rig.Take()).empty());
  const auto status = rig.o().JobStatusOf(job).value();
  CHECK(status.state() == "running");
  CHECK_THAT(status.reason(), Catch::Contains("no ready region holds the last committed parameters"));
}

TEST_CASE("flow: the orchestrator's timeouts go with every registration reply and assignment",
          "[orchestrator][timeouts]") {
  Rig rig("timeouts");
  rig.Register("a", "id-a");
  const auto want = rig.options().timeouts;
  const auto check = [&](const v1::Timeouts& t) {
    CHECK(t.round_ms() == want.round.count());
    CHECK(t.collective_ms() == want.collective.count());
    CHECK(t.link_io_ms() == want.link_io.count());
    CHECK(t.heartbeat_misses() == static_cast<uint32_t>(want.heartbeat_misses));
    CHECK(t.job_idle_ms() == static_cast<uint64_t>(want.job_idle.count()));
  };
  auto sent = rig.Take();
  REQUIRE(sent.size() == 1);
  REQUIRE(sent[0].msg.has_register_reply());
  check(sent[0].msg.register_reply().timeouts());
  for (auto& [r, id] : kAll) {
    rig.Register(r, id);
    rig.Heartbeat(r, id);
  }
  rig.Take();
  rig.Submit(2);
  int assignments = 0;
  for (const auto& s : rig.Take())
    if (s.msg.has_job_assignment()) {
      ++assignments;
      check(s.msg.job_assignment().timeouts());
    }
  CHECK(assignments == 3);
}

TEST_CASE("a restarted orchestrator resumes from the last committed round with a new epoch", "[orchestrator]") {
  Rig rig("restart");
  const std::string job = StartJob(rig, 3);
  for (auto& [r, id] : kAll) rig.Report(job, 1, 1, r, id, "h1");
  rig.Take();
  rig.Report(job, 2, 2, "a", "id-a", "h2");  // round 2 in flight when the orchestrator dies
  rig.Start();                              // "restart": same state file, fresh process state
  CHECK(rig.o().JobStatusOf(job).value().round() == 1);
  for (auto& [r, id] : kAll) {
    rig.Register(r, id);
    rig.Heartbeat(r, id, {job});
  }
  rig.o().Tick();
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 2);
  CHECK(starts["id-a"].epoch() == 3);
  CHECK(starts["id-a"].joining_regions_size() == 0);
  rig.Report(job, 2, 2, "b", "id-b", "h2");  // from before the restart: stale
  CHECK(Starts(rig.Take()).empty());
  for (uint32_t round = 2; round <= 3; ++round) {
    const uint64_t epoch = round + 1;
    const std::string hash = std::to_string(round) + "h";  // GCC 12 -Wrestrict false positive on "h" + s
    for (auto& [r, id] : kAll) rig.Report(job, round, epoch, r, id, hash);
  }
  auto status = rig.o().JobStatusOf(job).value();
  CHECK(status.state() == "succeeded");
  auto rounds = rig.store().LoadRounds(job).value();
  REQUIRE(rounds.size() == 3);
  CHECK(rounds[2].round == 3);
}

TEST_CASE("requests the orchestrator cannot serve are answered with errors", "[orchestrator]") {
  Rig rig("errors");
  v1::ControlMessage hb;
  hb.mutable_heartbeat()->set_region("ghost");
  rig.Send("id-x", hb);
  auto sent = rig.Take();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].msg.error().code() == v1::ERROR_CODE_NOT_FOUND);
  v1::ControlMessage st;
  st.mutable_job_status_request()->set_job_id("job-999999");
  rig.Send("cli", st);
  sent = rig.Take();
  REQUIRE(sent.size() == 1);
  CHECK_THAT(sent[0].msg.error().message(), Catch::Contains("unknown job 'job-999999'"));
  v1::ControlMessage bad;
  bad.mutable_submit_job()->mutable_spec()->set_name("x");  // no rounds, no preset
  rig.Send("cli", bad);
  sent = rig.Take();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].msg.error().code() == v1::ERROR_CODE_INVALID_ARGUMENT);
  v1::ControlMessage reg;
  reg.mutable_register_region()->set_region("bad name!");
  rig.Send("id-y", reg);
  sent = rig.Take();
  REQUIRE(sent.size() == 1);
  CHECK_FALSE(sent[0].msg.register_reply().accepted());
}

TEST_CASE("a job whose region rejects it fails with the region's reason, cancel stops a job", "[orchestrator]") {
  Rig rig("reject");
  for (auto& [r, id] : kAll) {
    rig.Register(r, id);
    rig.Heartbeat(r, id);
  }
  const std::string job = rig.Submit(2);
  rig.Take();
  v1::ControlMessage rej;
  rej.mutable_job_rejected()->set_job_id(job);
  rej.mutable_job_rejected()->set_region("b");
  rej.mutable_job_rejected()->mutable_error()->set_message("unknown preset 'huge'");
  rig.Send("id-b", rej);
  auto st = rig.o().JobStatusOf(job).value();
  CHECK(st.state() == "failed");
  CHECK_THAT(st.reason(), Catch::Contains("b rejected the job: unknown preset 'huge'"));
  // The regions may still be stopping job 1's workers (no heartbeat since it
  // ended): job 2 waits for their next heartbeat, then is placed.
  const std::string job2 = rig.Submit(2);
  rig.Take();
  CHECK(rig.o().JobStatusOf(job2).value().state() == "submitted");
  CHECK_THAT(rig.o().JobStatusOf(job2).value().reason(), Catch::Contains("still stopping"));
  rig.Pass(200ms, kAll, {});
  rig.Take();
  CHECK(rig.o().JobStatusOf(job2).value().state() == "scheduled");
  v1::ControlMessage cancel;
  cancel.mutable_cancel_job()->set_job_id(job2);
  rig.Send("cli", cancel);
  auto sent = rig.Take();
  CHECK(rig.o().JobStatusOf(job2).value().state() == "cancelled");
  int stops = 0;
  for (auto& s : sent) stops += s.msg.has_round_command() && s.msg.round_command().kind() == v1::RoundCommand::STOP;
  CHECK(stops == 3);
}

TEST_CASE("a region still stopping an ended job gets no new job until its heartbeat stops listing it",
          "[orchestrator]") {
  Rig rig("stopping");
  for (auto& [r, id] : kAll) {
    rig.Register(r, id);
    rig.Heartbeat(r, id, r == "a" ? std::vector<std::string>{"job-ended"} : std::vector<std::string>{});
  }
  rig.Take();
  const std::string job = rig.Submit(2);
  CHECK(Count(rig.Take(), v1::ControlMessage::kJobAssignment) == 0);
  auto status = rig.o().JobStatusOf(job).value();
  CHECK(status.state() == "submitted");
  CHECK_THAT(status.reason(), Catch::Contains("a is busy with job-ended (still stopping)"));
  rig.Pass(200ms, kAll, {});  // a's workers are gone: its heartbeats list no job
  CHECK(Count(rig.Take(), v1::ControlMessage::kJobAssignment) == 3);
  CHECK(rig.o().JobStatusOf(job).value().state() == "scheduled");
}

TEST_CASE("flow: a region name stays bound to the agent key that registered it until `regions remove`",
          "[flow][roles]") {
  Rig rig("binding");
  const PeerKey first{"K1-public", "eu-agent"}, second{"K2-public", "spare-agent"};
  auto reply = [&rig]() {
    for (auto& s : rig.Take())
      if (s.msg.has_register_reply() || s.msg.has_error() || s.msg.has_remove_region_reply()) return s.msg;
    FAIL("no reply");
    return v1::ControlMessage{};
  };
  rig.Register("eu", "id-1", first);
  REQUIRE(reply().register_reply().accepted());
  // The same key from a new connection (agent restart) is welcome.
  rig.Register("eu", "id-1b", first);
  CHECK(reply().register_reply().accepted());
  // Another key is refused, with the binding named, and the region keeps its agent.
  rig.Register("eu", "id-2", second);
  auto refused = reply();
  CHECK_FALSE(refused.register_reply().accepted());
  CHECK_THAT(refused.register_reply().reason(), Catch::Contains("bound to agent key 'eu-agent'"));
  CHECK(rig.o().registry().Find("eu")->identity == "id-1b");

  // The binding survives a restart (it is in the state file).
  rig.Start();
  CHECK(rig.o().registry().Find("eu")->agent_key.name == "eu-agent");
  rig.Register("eu", "id-2", second);
  CHECK_FALSE(reply().register_reply().accepted());

  v1::ControlMessage remove;
  remove.mutable_remove_region()->set_region("eu");
  // Up (registered since the restart): refused unless forced.
  rig.Register("eu", "id-1c", first);
  REQUIRE(reply().register_reply().accepted());
  rig.Send("cli", remove);
  CHECK_THAT(reply().error().message(), Catch::Contains("is up"));
  // Unknown region.
  v1::ControlMessage unknown;
  unknown.mutable_remove_region()->set_region("nowhere");
  rig.Send("cli", unknown);
  CHECK_THAT(reply().error().message(), Catch::Contains("unknown region 'nowhere'"));

  remove.mutable_remove_region()->set_force(true);
  rig.Send("cli", remove);
  auto removed = reply();
  REQUIRE(removed.has_remove_region_reply());
  CHECK(removed.remove_region_reply().released_key() == "eu-agent");
  CHECK(rig.o().registry().Find("eu") == nullptr);
  // Released: the other key may now take the name, and keeps it across a restart.
  rig.Register("eu", "id-2", second);
  CHECK(reply().register_reply().accepted());
  rig.Start();
  CHECK(rig.o().registry().Find("eu")->agent_key.name == "spare-agent");
}

TEST_CASE("flow: a region taking part in an active job cannot be removed", "[flow][roles]") {
  Rig rig("remove-busy");
  const std::string job = StartJob(rig, 3);
  v1::ControlMessage remove;
  remove.mutable_remove_region()->set_region("a");
  remove.mutable_remove_region()->set_force(true);
  rig.Send("cli", remove);
  auto sent = rig.Take();
  REQUIRE(sent.size() == 1);
  CHECK_THAT(sent[0].msg.error().message(), Catch::Contains("takes part in job " + job));
}

TEST_CASE("flow: a key may have so many jobs not yet ended, and so many bytes of their specs", "[flow][quota]") {
  Rig rig("quota");
  rig.options().max_active_jobs_per_key = 2;
  rig.options().max_active_spec_bytes_per_key = 4096;
  rig.Start();
  const PeerKey alice{"ALICEKEY", "alice", false}, bob{"BOBKEY", "bob", false};
  auto submit = [&](const PeerKey& key, const std::string& name) {
    v1::JobSpec spec = DefaultJobSpec();
    spec.set_name(name);
    v1::ControlMessage m;
    *m.mutable_submit_job()->mutable_spec() = spec;
    rig.Send("cli", m, key);
    for (auto& s : rig.Take()) {
      if (s.msg.has_submit_job_reply()) return Result<std::string>(s.msg.submit_job_reply().job_id());
      if (s.msg.has_error()) return Result<std::string>(proto::FromWireError(s.msg.error()));
    }
    return Result<std::string>(Internal("no reply"));
  };
  const auto a1 = submit(alice, "a1"), a2 = submit(alice, "a2");
  REQUIRE(a1.ok());
  REQUIRE(a2.ok());
  const auto a3 = submit(alice, "a3");
  REQUIRE_FALSE(a3.ok());
  CHECK(a3.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(a3.status().message(), Catch::Contains("key 'alice' has 2 jobs not yet ended") &&
                                        Catch::Contains("--max-jobs-per-key"));
  CHECK(submit(bob, "b1").ok());  // another key's jobs do not count
  // A job that ends frees its place.
  v1::ControlMessage cancel;
  cancel.mutable_cancel_job()->set_job_id(*a1);
  rig.Send("cli", cancel, alice);
  rig.Take();
  CHECK(submit(alice, "a4").ok());
  // Bytes: a spec with a 4000-byte argument does not fit beside bob's first job.
  v1::JobSpec huge = DefaultJobSpec();
  huge.clear_model_preset();
  huge.clear_data();
  huge.mutable_worker()->mutable_command()->add_argv(std::string(4000, 'z'));
  v1::ControlMessage m;
  *m.mutable_submit_job()->mutable_spec() = huge;
  rig.options().max_active_jobs_per_key = 100;
  rig.Start();  // restored from the state file: the owners and the count come back
  const auto over = [&] {
    rig.Send("cli", m, bob);
    for (auto& s : rig.Take())
      if (s.msg.has_error()) return proto::FromWireError(s.msg.error());
    return Status::Ok();
  }();
  CHECK(over.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(over.message(), Catch::Contains("bytes of specs") && Catch::Contains("--max-spec-bytes-per-key"));
}

TEST_CASE("flow: the next round's prediction uses the links the regions measured and waits for the slowest region",
          "[orchestrator][scheduler]") {
  Rig rig("predict");
  const std::string job = StartJob(rig, 3);
  // Every link 1 MB/s with 20 ms round trips, as the workers report them with their round.
  ReportEveryLink(rig, 1e6, 0.02);
  // c computes twice as long as a and b.
  const v1::JobSpec spec = DefaultJobSpec();
  const uint32_t h = spec.sync().inner_steps();
  for (auto& [r, id] : kAll) rig.Report(job, 1, 1, r, id, "h1", r == "c" ? 2.0 : 1.0);
  REQUIRE(Starts(rig.Take()).size() == 3);
  for (auto& [r, id] : kAll) rig.Report(job, 2, 2, r, id, "h2", 1.0);
  rig.Take();
  // Round 2 was planned from round 1: the ring exchange of the 3000-byte payload
  // (4000 bytes sent per region = 2 (3 - 1) / 3 of it) paced by c's steps, and
  // a and b waiting 1 s for c to reach it.
  const RoundShape shape{.payload_bytes = 3000,
                         .kind = proto::SyncKindOf(spec.sync()).value(),
                         .inner_steps = h,
                         .fragments = spec.sync().fragments(),
                         .overlap_steps = spec.sync().overlap_steps(),
                         .step_seconds = 2.0 / h};
  const double wan = PredictRoundCommSeconds(shape, {.regions = 3, .bandwidth_bps = 8e6, .rtt_seconds = 0.02});
  CHECK(wan > 0);
  CHECK(rig.o().JobStatusOf(job).value().predicted_comm_seconds() == Approx(wan + 1.0));
}

TEST_CASE("flow: an adaptive job re-plans from measured links, says why, and keeps its plan over a restart",
          "[orchestrator][replan]") {
  Rig rig("replan");
  // Rounds of seconds on these slow links: plans are kept under half the round timeout.
  rig.options().timeouts.round = 120s;
  rig.Start();
  const auto adaptive = [](v1::JobSpec& spec) {
    auto* a = spec.mutable_sync()->mutable_adaptive();
    a->set_target_utilisation(0.6);
    a->set_max_inner_steps(spec.sync().inner_steps() * 8);
    a->add_codecs(v1::CODEC_INT8_BLOCK);
    a->add_codecs(v1::CODEC_INT4_BLOCK);
  };
  const std::string job = StartJob(rig, 6, adaptive);
  const uint32_t h = DefaultJobSpec().sync().inner_steps();
  REQUIRE(DefaultJobSpec().compression().codec() == v1::CODEC_INT8_BLOCK);
  // Round 1 runs the spec's plan: nothing is measured yet.
  auto status = rig.o().JobStatusOf(job).value();
  CHECK(status.plan().inner_steps() == h);
  CHECK(status.plan().first_step() == 0);
  CHECK_THAT(status.plan().reason(), Catch::Contains("no measured links and step times to re-plan from yet"));
  // Slow links: 1 kB/s, 20 ms. A step takes 50 ms in every region.
  ReportEveryLink(rig, 1e3, 0.02);
  for (auto& [r, id] : kAll) rig.Report(job, 1, 1, r, id, "h1", 0.05 * h);
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  const v1::RoundPlan plan = starts["id-a"].plan();
  CHECK(plan.inner_steps() > h);
  CHECK(plan.inner_steps() <= 8 * h);
  CHECK(plan.first_step() == h);
  CHECK(plan.predicted_cu() >= 0.6);
  CHECK_THAT(plan.reason(), Catch::Contains("misses the target 60.0%") && Catch::Contains("most synchronous plan"));
  for (auto& [_, start] : starts) CHECK(start.plan().SerializeAsString() == plan.SerializeAsString());
  status = rig.o().JobStatusOf(job).value();
  CHECK(status.replans() == 1);
  CHECK(status.plan().inner_steps() == plan.inner_steps());
  const auto replans = EventMessages(rig, job, "replanned");
  CHECK(std::any_of(replans.begin(), replans.end(),
                    [&](const std::string& m) { return m.find(plan.reason()) != std::string::npos; }));

  // Round 2 ran the plan: it meets the target, so round 3 keeps it.
  for (auto& [r, id] : kAll) rig.Report(job, 2, 2, r, id, "h2", 0.05 * plan.inner_steps());
  starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].plan().inner_steps() == plan.inner_steps());
  CHECK(starts["id-a"].plan().codec() == plan.codec());
  CHECK(starts["id-a"].plan().first_step() == h + plan.inner_steps());
  CHECK_THAT(starts["id-a"].plan().reason(), Catch::Contains("meets the target 60.0%"));
  CHECK(rig.o().JobStatusOf(job).value().replans() == 1);
  auto rounds = rig.store().LoadRounds(job).value();
  REQUIRE(rounds.size() == 2);
  CHECK(rounds[0].inner_steps == h);
  CHECK(rounds[1].inner_steps == plan.inner_steps());
  CHECK(rounds[1].codec == plan.codec());

  // A restarted orchestrator resumes with the plan and the job's step count.
  rig.Start();
  for (auto& [r, id] : kAll) {
    rig.Register(r, id);
    rig.Heartbeat(r, id, {job});
  }
  rig.o().Tick();
  starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 3);
  CHECK(starts["id-a"].plan().inner_steps() == plan.inner_steps());
  CHECK(starts["id-a"].plan().codec() == plan.codec());
  CHECK(starts["id-a"].plan().first_step() == h + plan.inner_steps());
}

TEST_CASE("flow: a job without sync.adaptive runs every round with the spec's plan", "[orchestrator][replan]") {
  Rig rig("no-replan");
  const std::string job = StartJob(rig, 3);
  const uint32_t h = DefaultJobSpec().sync().inner_steps();
  ReportEveryLink(rig, 1e3, 0.02);
  for (auto& [r, id] : kAll) rig.Report(job, 1, 1, r, id, "h1", 0.05 * h);
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].plan().inner_steps() == h);
  CHECK(starts["id-a"].plan().codec() == DefaultJobSpec().compression().codec());
  CHECK(starts["id-a"].plan().first_step() == h);
  CHECK(starts["id-a"].plan().reason() == "the job spec's schedule");
  CHECK(rig.o().JobStatusOf(job).value().replans() == 0);
}

TEST_CASE("flow: a time-budgeted job gives each round the fastest region's H steps of compute and keeps each "
          "region's steps", "[orchestrator][budget]") {
  Rig rig("budget");
  const std::string job = StartJob(rig, 4, [](v1::JobSpec& spec) { spec.mutable_sync()->set_time_budgeted(true); });
  const uint32_t h = DefaultJobSpec().sync().inner_steps();
  // Round 1 ran H everywhere (nothing measured): c took twice as long per step.
  CHECK(rig.o().JobStatusOf(job).value().plan().compute_budget_seconds() == 0);
  for (auto& [r, id] : kAll) rig.Report(job, 1, 1, r, id, "h1", r == "c" ? 0.1 * h : 0.05 * h, h);
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  const v1::RoundPlan plan = starts["id-c"].plan();
  CHECK(plan.compute_budget_seconds() == Approx(0.05 * h));  // H steps of a and b
  CHECK(plan.max_inner_steps() == 2 * h);
  CHECK(plan.inner_steps() == h);
  // Round 2: c fit half the steps in the budget.
  for (auto& [r, id] : kAll) rig.Report(job, 2, 2, r, id, "h2", 0.05 * h, r == "c" ? h / 2 : h);
  starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].plan().compute_budget_seconds() == Approx(0.05 * h));  // c's steps counted as its own
  auto rounds = rig.store().LoadRounds(job).value();
  REQUIRE(rounds.size() == 2);
  REQUIRE(rounds[1].regions.size() == 3);
  CHECK(rounds[1].regions[0].region == "a");
  CHECK(rounds[1].regions[0].inner_steps == h);
  CHECK(rounds[1].regions[2].region == "c");
  CHECK(rounds[1].regions[2].inner_steps == h / 2);
}
