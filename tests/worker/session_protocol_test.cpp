// Session's protocol with its agent, every branch, in-process and
// deterministic: the test plays the agent (and the orchestrator behind it)
// through a fake AgentLink, the WAN port is a fake (one-region rounds need no
// WAN), the intra-region group has one rank. Each case waits for the message
// the session sends before answering it, never for a time.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "longhaul/common/checksum.h"

#include "longhaul/proto/job_defaults.h"
#include "longhaul/proto/wire_timeouts.h"
#include "longhaul/session/session.h"

namespace ls = longhaul::session;
namespace lw = longhaul::worker;
namespace v1 = longhaul::v1;
using namespace std::chrono_literals;

namespace {

constexpr char kJob[] = "job-7";
constexpr char kRegion[] = "eu";

// The agent's end of the link: what the test pushes reaches the session's
// watcher at once and then its Next(); what the session sends is recorded.
struct FakeAgent {
  std::mutex mu;
  std::condition_variable changed;
  std::deque<v1::ControlMessage> inbox;
  std::vector<v1::ControlMessage> sent;
  ls::AgentLink::Watcher watcher;

  struct Link final : ls::AgentLink {
    explicit Link(FakeAgent* a) : agent(a) {}
    void Send(v1::ControlMessage msg) override {
      std::lock_guard<std::mutex> lock(agent->mu);
      agent->sent.push_back(std::move(msg));
      agent->changed.notify_all();
    }
    std::optional<v1::ControlMessage> Next(longhaul::Deadline deadline) override {
      std::unique_lock<std::mutex> lock(agent->mu);
      if (!agent->changed.wait_until(lock, deadline, [&] { return !agent->inbox.empty(); })) return std::nullopt;
      v1::ControlMessage m = std::move(agent->inbox.front());
      agent->inbox.pop_front();
      return m;
    }
    FakeAgent* agent;
  };

  void Push(const v1::ControlMessage& msg) {
    watcher(msg);  // as the real channel does on its thread, before queueing
    std::lock_guard<std::mutex> lock(mu);
    inbox.push_back(msg);
    changed.notify_all();
  }
  // Waits (bounded) for the n-th sent message (0-based) and returns it.
  v1::ControlMessage Sent(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(changed.wait_for(lock, 30s, [&] { return sent.size() > n; }));
    return sent[n];
  }
};

struct FakeWan final : lw::WanPort {
  std::string endpoint() const override { return "tcp://127.0.0.1:1"; }
  longhaul::Result<std::unique_ptr<longhaul::sync_policies::CollectiveLink>> Join(const std::vector<lw::WanPeer>&, int,
                                                                                 uint32_t, uint64_t, int,
                                                                                 longhaul::Deadline) override {
    return longhaul::Internal("a one-region round needs no WAN group");
  }
  void CancelThrough(uint64_t epoch) override { cancelled_through = epoch; }
  std::map<std::string, longhaul::sync_policies::LinkEstimate> measurements() const override { return {}; }
  std::atomic<uint64_t> cancelled_through{0};
};

v1::ControlMessage Start(uint32_t round, uint64_t epoch, bool joining = false) {
  v1::ControlMessage m;
  auto* c = m.mutable_round_command();
  c->set_job_id(kJob);
  c->set_kind(v1::RoundCommand::START);
  c->set_round(round);
  c->set_epoch(epoch);
  auto* p = c->add_participants();
  p->set_region(kRegion);
  p->add_shard_endpoints("tcp://127.0.0.1:1");
  if (joining) {
    c->add_joining_regions(kRegion);
    c->set_bootstrap_region(kRegion);
  }
  return m;
}

v1::ControlMessage Command(v1::RoundCommand::Kind kind, uint32_t round, uint64_t epoch) {
  v1::ControlMessage m;
  auto* c = m.mutable_round_command();
  c->set_job_id(kJob);
  c->set_kind(kind);
  c->set_round(round);
  c->set_epoch(epoch);
  return m;
}

v1::ControlMessage Verdict(uint32_t round, uint64_t epoch, bool committed) {
  v1::ControlMessage m;
  auto* v = m.mutable_round_verdict();
  v->set_job_id(kJob);
  v->set_round(round);
  v->set_epoch(epoch);
  v->set_committed(committed);
  return m;
}

// A session of a 2-round DiLoCo job with H = 2 over 8 parameters.
struct Rig {
  FakeAgent agent;
  FakeWan* wan = nullptr;
  std::unique_ptr<ls::Session> session;
  std::vector<float> params = std::vector<float>(8, 1.0f);

  std::future<longhaul::Status> started;

  // Opens the session and answers its hello with `first` (nothing: the test does).
  explicit Rig(std::optional<v1::ControlMessage> first = Start(1, 1), int compute_throttle_percent = 100,
               std::optional<v1::Timeouts> timeouts = std::nullopt) {
    v1::JobAssignment a;
    if (timeouts) *a.mutable_timeouts() = *timeouts;
    a.set_job_id(kJob);
    a.set_region(kRegion);
    auto* spec = a.mutable_spec();
    spec->set_rounds(2);
    spec->set_region_count(1);
    spec->mutable_worker()->mutable_command()->add_argv("the-user-program");
    spec->mutable_sync()->set_inner_steps(2);
    longhaul::proto::FillJobDefaults(spec);
    ls::SessionOptions o;
    o.region = kRegion;
    o.collective_timeout = 10s;
    o.compute_throttle_percent = compute_throttle_percent;
    ls::Session::Collaborators c;
    c.group = longhaul::trainer::MakeSingleRankGroup();
    c.intra_region = {longhaul::trainer::IntraRegionBackend::kGloo, "the rig's group"};
    auto fake = std::make_unique<FakeWan>();
    wan = fake.get();
    c.wan = std::move(fake);
    c.connect = [this](ls::AgentLink::Watcher w) -> longhaul::Result<std::unique_ptr<ls::AgentLink>> {
      agent.watcher = std::move(w);
      return std::unique_ptr<ls::AgentLink>(new FakeAgent::Link(&agent));
    };
    auto s = ls::Session::Create(o, a, std::move(c));
    REQUIRE(s.ok());
    session = std::move(*s);
    started = std::async(std::launch::async, [this] { return session->Start(params, {}); });
    const auto hello = agent.Sent(0);
    REQUIRE(hello.has_worker_hello());
    if (hello.worker_hello().error().code() == v1::ERROR_CODE_UNSPECIFIED) {  // a refused start says why instead
      CHECK(hello.worker_hello().num_params() == params.size());
      CHECK(hello.worker_hello().intra_region() == v1::INTRA_REGION_GLOO);  // its group's backend, and why
      CHECK(hello.worker_hello().intra_region_reason() == "the rig's group");
    }
    if (!first) return;
    agent.Push(*first);
    REQUIRE(started.get().ok());
  }
  // One inner step: the parameters move by `by`.
  std::future<longhaul::Result<ls::StepEvent>> Step(float by) {
    for (auto& p : params) p += by;
    return std::async(std::launch::async, [this] { return session->Step(1.0f, 1); });
  }
  // Both steps of a round; returns the round's report (the session then waits for a verdict).
  std::pair<std::future<longhaul::Result<ls::StepEvent>>, v1::RoundReport> RoundToReport(size_t report_index) {
    REQUIRE(*Step(0.5f).get() == ls::StepEvent::kNone);
    auto last = Step(0.25f);
    const auto report = agent.Sent(report_index);
    REQUIRE(report.has_round_report());
    return {std::move(last), report.round_report()};
  }
};

}  // namespace

TEST_CASE("session: a committed round holds theta(t), the last commit returns finished", "[session]") {
  Rig rig;
  auto [last, report] = rig.RoundToReport(1);
  CHECK(report.ok());
  CHECK(report.round() == 1);
  rig.agent.Push(Verdict(1, 1, true));
  rig.agent.Push(Start(2, 2));  // the session waits for the next START before it returns
  REQUIRE(*last.get() == ls::StepEvent::kCommitted);
  CHECK(rig.session->committed_round() == 1);
  CHECK(std::vector<float>(rig.session->theta().begin(), rig.session->theta().end()) == rig.params);
  CHECK(rig.params[0] != 1.0f);
  CHECK(report.param_hash() == longhaul::ParameterHash(rig.session->theta()));
  auto [end, second] = rig.RoundToReport(2);
  CHECK(second.round() == 2);
  rig.agent.Push(Verdict(2, 2, true));
  CHECK(*end.get() == ls::StepEvent::kFinished);
  CHECK(rig.session->finished());
  CHECK(rig.session->committed_round() == 2);
}

TEST_CASE("session: a verdict of another epoch is ignored", "[session]") {
  Rig rig;
  auto [last, report] = rig.RoundToReport(1);
  rig.agent.Push(Verdict(1, 0, true));   // stale: an earlier attempt
  rig.agent.Push(Verdict(1, 1, false));  // this attempt: aborted
  rig.agent.Push(Start(1, 2));
  CHECK(*last.get() == ls::StepEvent::kRolledBack);
  CHECK(rig.session->committed_round() == 0);
}

TEST_CASE("session: an abort while waiting for the verdict rolls back to theta(t-1) exactly", "[session]") {
  Rig rig;
  const std::vector<float> before = rig.params;
  auto [last, report] = rig.RoundToReport(1);
  rig.agent.Push(Command(v1::RoundCommand::ABORT, 1, 1));
  rig.agent.Push(Start(1, 2));
  CHECK(*last.get() == ls::StepEvent::kRolledBack);
  CHECK(rig.params == before);
  CHECK(rig.session->round() == 1);
  CHECK(rig.session->job_step() == 0);  // the round runs again from its first step
}

TEST_CASE("session: a START without a verdict means the last round did not commit", "[session]") {
  Rig rig;
  const std::vector<float> before = rig.params;
  auto [last, report] = rig.RoundToReport(1);
  rig.agent.Push(Start(1, 2));
  CHECK(*last.get() == ls::StepEvent::kRolledBack);
  CHECK(rig.params == before);
  CHECK(rig.session->committed_round() == 0);
}

TEST_CASE("session: STOP while waiting for the verdict finishes at the last committed round", "[session]") {
  Rig rig;
  const std::vector<float> before = rig.params;
  auto [last, report] = rig.RoundToReport(1);
  rig.agent.Push(Command(v1::RoundCommand::STOP, 0, 1));
  CHECK(*last.get() == ls::StepEvent::kFinished);
  CHECK(rig.session->finished());
  CHECK(rig.params == before);
  CHECK(*rig.session->Step(0, 0) == ls::StepEvent::kFinished);  // and stays finished
}

TEST_CASE("session: an ABORT mid-round cancels the WAN exchange and ends the round at the next step", "[session]") {
  Rig rig;
  const std::vector<float> before = rig.params;
  REQUIRE(*rig.Step(0.5f).get() == ls::StepEvent::kNone);
  rig.agent.Push(Command(v1::RoundCommand::ABORT, 1, 1));
  CHECK(rig.wan->cancelled_through == 1);  // at once, from the link's thread, not at the next step
  auto next = rig.Step(0.5f);
  rig.agent.Push(Start(1, 2));
  CHECK(*next.get() == ls::StepEvent::kRolledBack);
  CHECK(rig.params == before);
  // An ABORT of an older epoch does not touch the round in progress.
  rig.agent.Push(Command(v1::RoundCommand::ABORT, 1, 1));
  CHECK(rig.wan->cancelled_through == 1);
  CHECK(*rig.Step(0.5f).get() == ls::StepEvent::kNone);
}

TEST_CASE("session: a round that cannot start is reported failed and the session waits for the next", "[session]") {
  Rig rig(std::nullopt);
  v1::ControlMessage bad = Start(1, 1);
  bad.mutable_round_command()->mutable_participants(0)->set_region("elsewhere");  // we are not a participant
  rig.agent.Push(bad);
  const auto report = rig.agent.Sent(1);
  REQUIRE(report.has_round_report());
  CHECK_FALSE(report.round_report().ok());
  CHECK_THAT(report.round_report().error().message(), Catch::Contains("region eu is not among the round's participants"));
  rig.agent.Push(Start(1, 2));
  REQUIRE(rig.started.get().ok());
  CHECK(rig.session->round() == 1);
}

TEST_CASE("session: a region that joins a running job is told it was re-synchronised", "[session]") {
  Rig rig(Start(2, 5, /*joining=*/true));
  CHECK(rig.session->resynced_at_start());
  CHECK(rig.session->job_step() == 2);  // round 2's first step: the job is one round in
  auto [last, report] = rig.RoundToReport(1);
  CHECK(report.round() == 2);
  rig.agent.Push(Verdict(2, 5, true));
  CHECK(*last.get() == ls::StepEvent::kFinished);
}

TEST_CASE("session: STOP before the first round ends the session cleanly", "[session]") {
  Rig rig(Command(v1::RoundCommand::STOP, 0, 0));
  CHECK(rig.session->finished());
  CHECK(*rig.session->Step(0, 0) == ls::StepEvent::kFinished);
}

TEST_CASE("session: a round the worker's own code fails carries its words as worker output, not in the message",
          "[session]") {
  Rig rig;
  REQUIRE(*rig.Step(0.5f).get() == ls::StepEvent::kNone);
  auto failed = std::async(std::launch::async, [&] {
    return rig.session->FailRound(rig.session->UserCodeFailed("the script failed the round", "API_TOKEN=hunter2 leaked"));
  });
  const auto report = rig.agent.Sent(1);
  REQUIRE(report.has_round_report());
  CHECK_FALSE(report.round_report().ok());
  CHECK_THAT(report.round_report().error().message(),
             Catch::Contains("the script failed the round") && !Catch::Contains("hunter2"));
  CHECK(report.round_report().error().worker_output() == "API_TOKEN=hunter2 leaked");
  rig.agent.Push(Start(2, 2));
  REQUIRE(failed.get().ok());
  // The text went with that report only: a library failure later carries none.
  REQUIRE(*rig.Step(0.5f).get() == ls::StepEvent::kNone);
  auto again = std::async(std::launch::async, [&] { return rig.session->FailRound(longhaul::Aborted("gloo broke")); });
  const auto second = rig.agent.Sent(2);
  REQUIRE(second.has_round_report());
  CHECK(second.round_report().error().worker_output().empty());
  rig.agent.Push(Start(3, 3));
  REQUIRE(again.get().ok());
}

TEST_CASE("session: a throttled session takes its percentage of each step's compute, and reports it as compute",
          "[session]") {
  Rig rig(Start(1, 1), 300);
  // The worker's own work between steps (a sleep of 20 ms stands for it); at
  // 300% each step takes at least 60 ms.
  auto step = [&](float by) {
    std::this_thread::sleep_for(20ms);
    return rig.Step(by);
  };
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(*step(0.5f).get() == ls::StepEvent::kNone);
  auto last = step(0.25f);
  const auto report = rig.agent.Sent(1);
  REQUIRE(report.has_round_report());
  CHECK(report.round_report().compute_seconds() >= 2 * 0.060);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= 2 * 0.060);
  rig.agent.Push(Verdict(1, 1, true));
  rig.agent.Push(Start(2, 2));  // the session waits for the next START before it returns
  CHECK(*last.get() == ls::StepEvent::kCommitted);
}

TEST_CASE("session options: the compute throttle travels in the worker's environment and is bounded", "[session]") {
  ls::SessionOptions o;
  o.agent_endpoint = "tcp://127.0.0.1:1";
  o.job_id = "job";
  o.region = kRegion;
  o.insecure = true;
  o.compute_throttle_percent = 250;
  CHECK(o.Validate().ok());
  const auto env = ls::WorkerEnvironment(o, 1, "127.0.0.1", 1);
  CHECK(env.at("LONGHAUL_COMPUTE_THROTTLE_PERCENT") == "250");
  o.compute_throttle_percent = 99;
  CHECK_THAT(o.Validate().message(), Catch::Contains("compute_throttle_percent must be in [100, 10000], got 99"));
}

namespace {
// Short timeouts as the orchestrator would send them (the hierarchy holds).
v1::Timeouts ShortTimeouts() {
  longhaul::Timeouts t;
  t.link_io = 100ms;
  t.collective = 200ms;
  t.heartbeat_interval = 10ms;
  t.heartbeat_misses = 2;
  t.round = 500ms;
  t.job_idle = 1500ms;
  return longhaul::proto::TimeoutsToWire(t);
}
}  // namespace

TEST_CASE("session: the orchestrator's timeouts bound its waits: no verdict rolls the round back after the round "
          "timeout and no START ends the worker after the job idle timeout",
          "[session][timeouts]") {
  Rig rig(Start(1, 1), 100, ShortTimeouts());
  const auto t0 = std::chrono::steady_clock::now();
  auto [last, report] = rig.RoundToReport(1);
  CHECK(report.ok());
  // Nobody answers: rolled back after 0.5 s, then given up after 1.5 s more.
  auto result = last.get();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == longhaul::StatusCode::kDeadlineExceeded);
  CHECK_THAT(result.status().message(), Catch::Contains("job idle timeout"));
  CHECK(waited >= 1.9);
  CHECK(waited < 10);
  CHECK(rig.session->committed_round() == 0);
  CHECK(std::vector<float>(rig.session->theta().begin(), rig.session->theta().end()) == std::vector<float>(8, 1.0f));
}

TEST_CASE("session: an assignment whose timeouts break the hierarchy is refused in the hello, naming the pair",
          "[session][timeouts]") {
  v1::Timeouts bad = ShortTimeouts();
  bad.set_collective_ms(900);  // above the round timeout
  Rig rig(std::nullopt, 100, bad);
  REQUIRE_FALSE(rig.started.get().ok());
  const auto hello = rig.agent.Sent(0).worker_hello();
  CHECK_THAT(hello.error().message(), Catch::Contains("the assignment's timeouts") && Catch::Contains("collective"));
}
