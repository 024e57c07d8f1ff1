// The Orchestrator state machine driven in-process: fake agents are plain
// message exchanges, time is a ManualClock, the store is a real SQLite file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/orchestrator.h"

using namespace longhaul;
using namespace longhaul::orchestrator;
using namespace std::chrono_literals;

namespace {

struct Sent {
  std::string to;
  v1::ControlMessage msg;
};

class Rig {
 public:
  explicit Rig(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() / ("longhaul-flow-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    file_ = dir / (name + ".sqlite");
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file_.string() + suffix);
    options_.timeouts.heartbeat_interval = 100ms;
    options_.timeouts.heartbeat_misses = 3;
    options_.timeouts.link_io = 500ms;
    options_.timeouts.collective = 2s;
    options_.timeouts.round = 5s;
    Start();
  }
  void Start() {
    orch_.reset();
    store_.reset();
    store_ = std::move(StateStore::Open(file_).value());
    orch_ = std::move(Orchestrator::Create(store_.get(), clock_, options_, nullptr,
                                           [this](const std::string& to, const v1::ControlMessage& m) {
                                             sent_.push_back({to, m});
                                           })
                          .value());
  }
  Orchestrator& o() { return *orch_; }
  ManualClock& clock() { return clock_; }
  StateStore& store() { return *store_; }

  std::vector<Sent> Take() { return std::exchange(sent_, {}); }
  void Send(const std::string& from, v1::ControlMessage m, const PeerKey& key = {}) {
    m.set_request_id(++rid_);
    orch_->Handle(from, m, key);
  }
  void Register(const std::string& region, const std::string& identity, const PeerKey& key = {}) {
    v1::ControlMessage m;
    m.mutable_register_region()->set_region(region);
    m.mutable_register_region()->mutable_capacity()->set_workers(4);
    Send(identity, m, key);
  }
  void Heartbeat(const std::string& region, const std::string& identity, std::vector<std::string> jobs = {}) {
    v1::ControlMessage m;
    m.mutable_heartbeat()->set_region(region);
    m.mutable_heartbeat()->set_healthy(true);
    for (auto& j : jobs) m.mutable_heartbeat()->add_running_jobs(j);
    Send(identity, m);
  }
  void Ready(const std::string& job, const std::string& region, const std::string& identity) {
    v1::ControlMessage m;
    m.mutable_job_ready()->set_job_id(job);
    m.mutable_job_ready()->set_region(region);
    m.mutable_job_ready()->mutable_endpoint()->add_shard_endpoints("tcp://127.0.0.1:1/" + region);
    Send(identity, m);
  }
  void Report(const std::string& job, uint32_t round, uint64_t epoch, const std::string& region,
              const std::string& identity, const std::string& hash) {
    v1::ControlMessage m;
    auto* r = m.mutable_round_report();
    r->set_job_id(job);
    r->set_round(round);
    r->set_epoch(epoch);
    r->set_region(region);
    r->set_ok(true);
    r->set_param_hash(hash);
    r->set_loss(3.0 - round * 0.1);
    r->set_val_loss(3.1 - round * 0.1);
    r->set_tokens(1000);
    r->set_wan_bytes_sent(4000);
    r->set_comm_seconds(0.5);
    r->set_wall_seconds(2.0);
    Send(identity, m);
  }
  std::string Submit(uint32_t rounds) {
    v1::JobSpec spec = DefaultJobSpec();
    spec.set_rounds(rounds);
    spec.set_min_regions(2);
    v1::ControlMessage m;
    *m.mutable_submit_job()->mutable_spec() = spec;
    Send("cli", m);
    std::string id;
    std::vector<Sent> rest;
    for (auto& s : Take()) {
      if (s.msg.has_submit_job_reply()) id = s.msg.submit_job_reply().job_id();
      else rest.push_back(std::move(s));
    }
    sent_ = std::move(rest);  // assignments stay for the caller to inspect
    REQUIRE_FALSE(id.empty());
    return id;
  }
  // Advances time in heartbeat steps; the listed regions keep heartbeating.
  void Pass(std::chrono::milliseconds d, const std::vector<std::pair<std::string, std::string>>& alive,
            const std::vector<std::string>& jobs) {
    for (auto t = 0ms; t < d; t += 100ms) {
      clock_.Advance(100ms);
      for (auto& [region, id] : alive) Heartbeat(region, id, jobs);
      orch_->Tick();
    }
  }

 private:
  std::filesystem::path file_;
  ManualClock clock_;
  OrchestratorOptions options_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Orchestrator> orch_;
  std::vector<Sent> sent_;
  uint64_t rid_ = 0;
};

// START commands in `sent`, by recipient identity.
std::map<std::string, v1::RoundCommand> Starts(const std::vector<Sent>& sent) {
  std::map<std::string, v1::RoundCommand> out;
  for (const auto& s : sent)
    if (s.msg.has_round_command() && s.msg.round_command().kind() == v1::RoundCommand::START)
      out[s.to] = s.msg.round_command();
  return out;
}
int Count(const std::vector<Sent>& sent, v1::ControlMessage::BodyCase body) {
  int n = 0;
  for (const auto& s : sent) n += s.msg.body_case() == body ? 1 : 0;
  return n;
}

const std::vector<std::pair<std::string, std::string>> kAll = {{"a", "id-a"}, {"b", "id-b"}, {"c", "id-c"}};

// Registers a, b, c, submits a job and brings it to round 1 started.
std::string StartJob(Rig& rig, uint32_t rounds) {
  for (auto& [r, id] : kAll) {
    rig.Register(r, id);
    rig.Heartbeat(r, id);
  }
  rig.Take();
  const std::string job = rig.Submit(rounds);
  auto sent = rig.Take();
  REQUIRE(Count(sent, v1::ControlMessage::kJobAssignment) == 3);
  for (auto& [r, id] : kAll) rig.Ready(job, r, id);
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 1);
  CHECK(starts["id-a"].epoch() == 1);
  CHECK(starts["id-a"].participants_size() == 3);
  CHECK(rig.o().JobStatusOf(job).value().state() == "running");
  return job;
}

}  // namespace

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
