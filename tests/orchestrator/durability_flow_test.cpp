// What the orchestrator does when its state file will not take a write, and
// the requests that must stay correct across retries and any amount of stored
// data: idempotent submit, paged job lists.
#include <catch2/catch.hpp>

#include "flow_rig.h"

using namespace longhaul;
using namespace longhaul::orchestrator;
using namespace longhaul::orchestrator::testing;
using namespace std::chrono_literals;

namespace {

// Fails every write of the given kinds while `on`.
struct FailingWrites {
  bool on = false;
  std::set<std::string> kinds;
  void Install(StateStore& store) {
    store.SetWriteHook([this](const StateWrite& w, bool committed) {
      if (on && !committed && kinds.count(std::string(w.kind))) return Internal("injected: disk I/O error");
      return Status::Ok();
    });
  }
};

int Stops(const std::vector<Sent>& sent) {
  int n = 0;
  for (const auto& s : sent) n += s.msg.has_round_command() && s.msg.round_command().kind() == v1::RoundCommand::STOP;
  return n;
}

v1::ControlMessage SubmitMsg(uint32_t rounds, const std::string& key) {
  v1::ControlMessage m;
  auto* spec = m.mutable_submit_job()->mutable_spec();
  *spec = DefaultJobSpec();
  spec->set_rounds(rounds);
  spec->set_min_regions(2);
  m.mutable_submit_job()->set_idempotency_key(key);
  return m;
}

v1::ControlMessage ReplyTo(Rig& rig, v1::ControlMessage req) {
  rig.Send("cli", std::move(req));
  for (auto& s : rig.Take())
    if (s.to == "cli") return s.msg;
  FAIL("no reply to the CLI");
  return {};
}

}  // namespace

TEST_CASE("durability: a transition whose write fails announces nothing, shows why, and is retried",
          "[orchestrator][durability]") {
  Rig rig("write-fails");
  FailingWrites fail{false, {"save_job"}};
  fail.Install(rig.store());
  for (auto& [r, id] : kAll) {
    rig.Register(r, id);
    rig.Heartbeat(r, id);
  }
  rig.Take();

  // Placement: not written, so no assignment goes out and the job stays submitted.
  fail.on = true;
  const std::string job = rig.Submit(2);
  CHECK(Count(rig.Take(), v1::ControlMessage::kJobAssignment) == 0);
  auto st = rig.o().JobStatusOf(job).value();
  CHECK(st.state() == "submitted");
  CHECK_THAT(st.reason(), Catch::Contains("state file write failed while scheduling the job: injected: disk I/O error"));
  fail.on = false;
  rig.o().Tick();
  CHECK(Count(rig.Take(), v1::ControlMessage::kJobAssignment) == 3);
  CHECK(rig.store().LoadJob(job).value()->state == JobState::kScheduled);

  // Readiness: not written, so no START; the assignment is sent again and the
  // agents' second job_ready starts the job.
  fail.on = true;
  for (auto& [r, id] : kAll) rig.Ready(job, r, id);
  CHECK(Starts(rig.Take()).empty());
  fail.on = false;
  rig.o().Tick();
  CHECK(Count(rig.Take(), v1::ControlMessage::kJobAssignment) == 3);
  for (auto& [r, id] : kAll) rig.Ready(job, r, id);
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].epoch() == 1);

  // The next round's epoch: not written, so no START carries it.
  fail.on = true;
  for (auto& [r, id] : kAll) rig.Report(job, 1, 1, r, id, "h1");  // commit_round still works
  auto sent = rig.Take();
  CHECK(Count(sent, v1::ControlMessage::kRoundVerdict) == 3);
  CHECK(Starts(sent).empty());
  CHECK(rig.store().LoadRounds(job).value().size() == 1);
  fail.on = false;
  rig.o().Tick();
  starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 2);
  CHECK(starts["id-a"].epoch() == 2);
  CHECK(rig.store().LoadJob(job).value()->epoch == 2);

  // The job's end: not written, so no STOP, and the job is not reported finished
  // until the state file has it.
  fail.on = true;
  for (auto& [r, id] : kAll) rig.Report(job, 2, 2, r, id, "h2");
  CHECK(Stops(rig.Take()) == 0);
  st = rig.o().JobStatusOf(job).value();
  CHECK(st.state() == "running");
  CHECK_THAT(st.reason(), Catch::Contains("finishing the job"));
  rig.o().Tick();
  CHECK(Stops(rig.Take()) == 0);
  fail.on = false;
  rig.o().Tick();
  CHECK(Stops(rig.Take()) == 3);
  st = rig.o().JobStatusOf(job).value();
  CHECK(st.state() == "succeeded");
  CHECK(st.reason() == "all 2 rounds committed");
  CHECK(rig.store().LoadJob(job).value()->state == JobState::kSucceeded);
}

TEST_CASE("durability: a round whose commit cannot be written is aborted and retried, never applied",
          "[orchestrator][durability]") {
  Rig rig("commit-fails");
  FailingWrites fail{false, {"commit_round"}};
  fail.Install(rig.store());
  const std::string job = StartJob(rig, 2);
  fail.on = true;
  for (auto& [r, id] : kAll) rig.Report(job, 1, 1, r, id, "h1");
  auto sent = rig.Take();
  for (const auto& s : sent)
    if (s.msg.has_round_verdict()) CHECK_FALSE(s.msg.round_verdict().committed());
  auto starts = Starts(sent);
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 1);  // the same round again, under a new epoch
  CHECK(starts["id-a"].epoch() == 2);
  CHECK(rig.store().LoadRounds(job).value().empty());
  fail.on = false;
  for (auto& [r, id] : kAll) rig.Report(job, 1, 2, r, id, "h1");
  CHECK(rig.store().LoadRounds(job).value().size() == 1);
}

TEST_CASE("durability: a cancel that cannot be written is refused with the reason and completed later",
          "[orchestrator][durability]") {
  Rig rig("cancel-fails");
  FailingWrites fail{false, {"save_job"}};
  fail.Install(rig.store());
  const std::string job = StartJob(rig, 5);
  fail.on = true;
  v1::ControlMessage cancel;
  cancel.mutable_cancel_job()->set_job_id(job);
  rig.Send("cli", cancel);
  auto sent = rig.Take();
  CHECK(Stops(sent) == 0);
  bool refused = false;
  for (const auto& s : sent)
    if (s.to == "cli" && s.msg.has_error()) {
      refused = true;
      CHECK_THAT(s.msg.error().message(), Catch::Contains("not in the state file yet"));
    }
  CHECK(refused);
  CHECK(rig.o().JobStatusOf(job).value().state() == "running");
  fail.on = false;
  rig.o().Tick();
  CHECK(Stops(rig.Take()) == 3);
  CHECK(rig.o().JobStatusOf(job).value().state() == "cancelled");
  CHECK(rig.store().LoadJob(job).value()->state == JobState::kCancelled);
}

TEST_CASE("submit: a retry with the same idempotency key gets the first job, across a restart",
          "[orchestrator][idempotency]") {
  Rig rig("idempotent");
  auto first = ReplyTo(rig, SubmitMsg(3, "cli-0123abcd"));
  REQUIRE(first.has_submit_job_reply());
  CHECK_FALSE(first.submit_job_reply().existing());
  const std::string id = first.submit_job_reply().job_id();
  auto again = ReplyTo(rig, SubmitMsg(3, "cli-0123abcd"));
  CHECK(again.submit_job_reply().job_id() == id);
  CHECK(again.submit_job_reply().existing());
  rig.Start();  // the reply was lost to a crash; the CLI sends again to the new process
  auto after = ReplyTo(rig, SubmitMsg(3, "cli-0123abcd"));
  CHECK(after.submit_job_reply().job_id() == id);
  CHECK(after.submit_job_reply().existing());
  CHECK(rig.store().LoadJobs().value().size() == 1);
  // The same key with another spec is a mistake, not a retry.
  auto other = ReplyTo(rig, SubmitMsg(4, "cli-0123abcd"));
  REQUIRE(other.has_error());
  CHECK(other.error().code() == v1::ERROR_CODE_INVALID_ARGUMENT);
  CHECK_THAT(other.error().message(), Catch::Contains("was used for " + id));
  // Keys are bounded and plain.
  auto bad = ReplyTo(rig, SubmitMsg(3, std::string(129, 'k')));
  REQUIRE(bad.has_error());
  CHECK_THAT(bad.error().message(), Catch::Contains("at most 128 characters"));
  auto fresh = ReplyTo(rig, SubmitMsg(3, "cli-other"));
  CHECK(fresh.submit_job_reply().job_id() != id);
  CHECK(rig.store().LoadJobs().value().size() == 2);
}

TEST_CASE("jobs: the list comes in pages, without specs, and every job is on exactly one page",
          "[orchestrator][paging]") {
  Rig rig("paging");
  for (int i = 0; i < 230; ++i) REQUIRE(ReplyTo(rig, SubmitMsg(1, "")).has_submit_job_reply());
  std::vector<std::string> ids;
  std::vector<int> sizes;
  std::string token;
  do {
    v1::ControlMessage req;
    req.mutable_list_jobs()->set_page_token(token);
    auto reply = ReplyTo(rig, req);
    REQUIRE(reply.has_job_list());
    sizes.push_back(reply.job_list().jobs_size());
    for (const auto& j : reply.job_list().jobs()) {
      ids.push_back(j.job_id());
      CHECK_FALSE(j.has_spec());
    }
    token = reply.job_list().next_page_token();
    REQUIRE(sizes.size() < 10);
  } while (!token.empty());
  CHECK(sizes == std::vector<int>{100, 100, 30});
  REQUIRE(ids.size() == 230);
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == 230);
  CHECK(ids.front() == "job-000001");
  CHECK(ids.back() == "job-000230");

  v1::ControlMessage small;
  small.mutable_list_jobs()->set_page_size(7);
  small.mutable_list_jobs()->set_page_token("job-000225");
  auto tail = ReplyTo(rig, small);
  CHECK(tail.job_list().jobs_size() == 5);
  CHECK(tail.job_list().next_page_token().empty());

  v1::ControlMessage huge;
  huge.mutable_list_jobs()->set_page_size(5000);
  auto refused = ReplyTo(rig, huge);
  REQUIRE(refused.has_error());
  CHECK_THAT(refused.error().message(), Catch::Contains("page_size 5000 is over the limit of 1000"));
}

TEST_CASE("durability: a region excluded from an aborted round stays out of the next attempt when the write fails",
          "[orchestrator][durability]") {
  // The exclusion is a decision, not only a record: the next attempt must not
  // include the region it just excluded (its workers may be wedged) because
  // the state file would not take the change.
  Rig rig("abort-write-fails");
  FailingWrites fail{false, {"save_job"}};
  fail.Install(rig.store());
  const std::string job = StartJob(rig, 3);
  rig.Report(job, 1, 1, "a", "id-a", "h1");
  rig.Report(job, 1, 1, "b", "id-b", "h1");
  rig.Take();
  fail.on = true;
  rig.Pass(5100ms, kAll, {job});  // c heartbeats but never reports: past the 5 s round deadline
  CHECK(Starts(rig.Take()).empty());  // aborted; the next attempt waits for the file to take its epoch
  fail.on = false;
  rig.Pass(100ms, kAll, {job});
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 2);
  CHECK(starts.count("id-c") == 0);
  CHECK(starts["id-a"].participants_size() == 2);
  CHECK(starts["id-a"].round() == 1);
}
