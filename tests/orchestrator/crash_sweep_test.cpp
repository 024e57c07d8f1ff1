// Crash-point sweep: the orchestrator dies at every state-store write of a
// job's life, once just before the write's COMMIT and once just after it
// (injected through the store's write hook, not timed), and is restarted from
// its state file. The orchestrator runs in-process (flow_rig.h) with simulated
// agents that answer at once; "dying" is an exception thrown from the hook that
// unwinds out of whatever the orchestrator was doing, after which every object
// in memory is dropped (the open transaction rolls back with its connection)
// and a new orchestrator opens the same file, as a restarted process would.
//
// After every restart the job must finish, and:
//  - nothing acknowledged is lost: the job the submit reply named exists (the
//    client retries an unanswered submit with its idempotency key, as the CLI
//    does, and gets that one job);
//  - every round a region was told is committed is in the state file
//    (announcements only after the write);
//  - no round is applied twice: rounds 1..n are each stored once, and no
//    region hears "round r committed" twice.
#include <catch2/catch.hpp>

#include <cstdio>

#include "flow_rig.h"

using namespace longhaul;
using namespace longhaul::orchestrator;
using namespace longhaul::orchestrator::testing;

namespace {

constexpr uint32_t kRounds = 3;

struct Crash {};  // the process "died" at the injected write

enum class Point { kNone, kBeforeCommit, kAfterCommit };

// One job's life with a crash at write `crash_at` (1-based, counted over the
// whole run), or none. Returns the writes the run made.
struct Life {
  Rig rig{"crash-sweep"};
  Point point = Point::kNone;
  int crash_at = 0;
  int writes = 0;
  int restarts = 0;
  std::string job;  // acknowledged by a submit reply
  std::map<std::string, std::vector<uint32_t>> heard_committed;  // region -> rounds
  std::set<std::string> running;                                 // regions assigned the job, not stopped
  std::set<std::string> stopped;
  int announced_not_stored = 0;  // rounds a region heard committed that the restarted orchestrator does not have

  static std::string Id(const std::string& region) { return "id-" + region; }
  static std::string HashOf(uint32_t round) {  // every honest replica agrees
    std::string h = "h";
    h += std::to_string(round);
    return h;
  }
  static std::string RegionOf(const std::string& id) { return id.substr(3); }

  void ArmHook() {
    rig.store().SetWriteHook([this](const StateWrite&, bool committed) -> Status {
      if (!committed) ++writes;
      const bool hit = crash_at == writes && ((point == Point::kBeforeCommit && !committed) ||
                                              (point == Point::kAfterCommit && committed));
      if (hit) throw Crash{};
      return Status::Ok();
    });
  }
  void RegisterAll() {
    for (const auto& r : {"a", "b", "c"}) rig.Register(r, Id(r), {}, "session-" + std::string(r));
  }
  void Submit() {
    v1::JobSpec spec = DefaultJobSpec();
    spec.set_rounds(kRounds);
    spec.set_min_regions(3);
    v1::ControlMessage m;
    *m.mutable_submit_job()->mutable_spec() = spec;
    m.mutable_submit_job()->set_idempotency_key("sweep-1");
    rig.Send("cli", m);
  }
  // Answers what the orchestrator sent, as agents and the CLI would, until it
  // sends nothing more.
  void Answer() {
    for (int pass = 0; pass < 100; ++pass) {
      auto sent = rig.Take();
      if (sent.empty()) return;
      for (const auto& s : sent) {
        const auto& m = s.msg;
        if (m.has_submit_job_reply()) {
          job = m.submit_job_reply().job_id();
        } else if (m.has_job_assignment()) {
          running.insert(RegionOf(s.to));
          rig.Ready(m.job_assignment().job_id(), RegionOf(s.to), s.to);
        } else if (m.has_round_command() && m.round_command().kind() == v1::RoundCommand::START) {
          const auto& c = m.round_command();
          rig.Report(c.job_id(), c.round(), c.epoch(), RegionOf(s.to), s.to, HashOf(c.round()));
        } else if (m.has_round_command() && m.round_command().kind() == v1::RoundCommand::STOP) {
          running.erase(RegionOf(s.to));
          stopped.insert(RegionOf(s.to));
        } else if (m.has_round_verdict() && m.round_verdict().committed()) {
          heard_committed[RegionOf(s.to)].push_back(m.round_verdict().round());
        } else if (m.has_error() && m.error().code() == v1::ERROR_CODE_NOT_FOUND) {
          RegisterAll();  // "not registered": the orchestrator restarted
        }
      }
    }
    FAIL("the orchestrator kept sending for 100 passes");
  }
  bool Succeeded() {
    if (job.empty()) return false;
    auto s = rig.o().JobStatusOf(job);
    return s.ok() && s->state() == "succeeded";
  }
  void Run() {
    ArmHook();
    bool registered = false;
    for (int step = 0; step < 3000 && !Succeeded(); ++step) {
      try {
        if (!registered) {
          RegisterAll();
          registered = true;
          if (job.empty()) Submit();  // unanswered: the client sends it again with its key
        }
        Answer();
        rig.clock().Advance(std::chrono::milliseconds(100));
        for (const auto& r : {"a", "b", "c"}) {
          std::vector<std::string> jobs;
          if (!job.empty() && running.count(r)) jobs.push_back(job);
          rig.Heartbeat(r, Id(r), jobs);
        }
        Answer();
        rig.o().Tick();
        Answer();
      } catch (const Crash&) {
        ++restarts;
        point = Point::kNone;  // one death per life
        rig.Take();            // what it was sending when it died is lost with it
        rig.Start();           // a new process on the same state file
        ArmHook();
        if (!job.empty()) {
          std::set<uint32_t> stored;
          const auto rounds = rig.store().LoadRounds(job);
          REQUIRE(rounds.ok());
          for (const auto& r : *rounds) stored.insert(r.round);
          for (const auto& [region, heard] : heard_committed)
            for (uint32_t r : heard) announced_not_stored += stored.count(r) ? 0 : 1;
        }
        registered = false;
      }
    }
  }
};

}  // namespace

TEST_CASE("crash-point sweep: the orchestrator killed at every state write of a job's life loses nothing "
          "acknowledged and applies no round twice",
          "[orchestrator][durability][crash_sweep]") {
  int total_writes = 0;
  {
    Life clean;
    clean.Run();
    REQUIRE(clean.Succeeded());
    total_writes = clean.writes;
  }
  REQUIRE(total_writes > 10);
  int points = 0, lost = 0, twice = 0;
  for (Point point : {Point::kBeforeCommit, Point::kAfterCommit}) {
    for (int k = 1; k <= total_writes; ++k) {
      INFO("crash " << (point == Point::kBeforeCommit ? "before" : "after") << " the COMMIT of write " << k << " of "
                    << total_writes);
      Life life;
      life.point = point;
      life.crash_at = k;
      life.Run();
      ++points;
      CHECK(life.restarts == 1);
      REQUIRE(!life.job.empty());
      INFO("job " << life.job << ": " << life.rig.o().JobStatusOf(life.job).value().reason());
      CHECK(life.Succeeded());
      const auto stored = life.rig.store().LoadJobs().value();
      const bool kept = stored.size() == 1 && stored[0].id == life.job;
      lost += kept ? 0 : 1;
      CHECK(kept);
      const auto rounds = life.rig.store().LoadRounds(life.job).value();
      REQUIRE(rounds.size() == kRounds);
      for (uint32_t i = 0; i < kRounds; ++i) CHECK(rounds[i].round == i + 1);
      for (const auto& [region, heard] : life.heard_committed) {
        INFO("region " << region);
        std::set<uint32_t> unique(heard.begin(), heard.end());
        twice += unique.size() == heard.size() ? 0 : 1;
        CHECK(unique.size() == heard.size());
      }
      CHECK(life.announced_not_stored == 0);
    }
  }
  std::printf("crash-point sweep: %d writes in a job's life, %d crash points tried (before and after each COMMIT), "
              "%d acknowledged jobs lost, %d rounds applied twice\n",
              total_writes, points, lost, twice);
}
