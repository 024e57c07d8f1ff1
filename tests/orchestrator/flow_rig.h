// The Orchestrator state machine driven in-process (see orchestrator_flow_test.cpp):
// fake agents are plain message exchanges, time is a ManualClock, the store is a
// real SQLite file.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <unistd.h>

#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/orchestrator.h"
#include "support/temp_dir.h"

namespace longhaul::orchestrator::testing {

using namespace std::chrono_literals;

struct Sent {
  std::string to;
  v1::ControlMessage msg;
};

class Rig {
 public:
  explicit Rig(const std::string& name) {
    file_ = dir_ / (name + ".sqlite");
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
  OrchestratorOptions& options() { return options_; }  // then Start() again
  ManualClock& clock() { return clock_; }
  StateStore& store() { return *store_; }

  std::vector<Sent> Take() { return std::exchange(sent_, {}); }
  void Send(const std::string& from, v1::ControlMessage m, const PeerKey& key = {}) {
    m.set_request_id(++rid_);
    orch_->Handle(from, m, key);
  }
  // session: the agent process's id ("" = one per identity: a new identity is
  // a new agent process unless the caller says it is a reconnect).
  void Register(const std::string& region, const std::string& identity, const PeerKey& key = {},
                const std::string& session = "") {
    v1::ControlMessage m;
    m.mutable_register_region()->set_region(region);
    m.mutable_register_region()->mutable_capacity()->set_workers(4);
    m.mutable_register_region()->set_session_id(session.empty() ? "session-" + identity : session);
    Send(identity, m, key);
  }
  void Heartbeat(const std::string& region, const std::string& identity, std::vector<std::string> jobs = {}) {
    v1::ControlMessage m;
    m.mutable_heartbeat()->set_region(region);
    m.mutable_heartbeat()->set_healthy(true);
    for (auto& j : jobs) m.mutable_heartbeat()->add_running_jobs(j);
    Send(identity, m);
  }
  // start_hash: the parameter hash its workers start from ("" = an agent that sends none).
  void Ready(const std::string& job, const std::string& region, const std::string& identity,
             uint32_t restored_round = 0, const std::string& start_hash = "") {
    v1::ControlMessage m;
    m.mutable_job_ready()->set_job_id(job);
    m.mutable_job_ready()->set_region(region);
    m.mutable_job_ready()->set_restored_round(restored_round);
    m.mutable_job_ready()->set_param_hash(start_hash);
    m.mutable_job_ready()->mutable_endpoint()->add_shard_endpoints("tcp://127.0.0.1:1/" + region);
    Send(identity, m);
  }
  void Report(const std::string& job, uint32_t round, uint64_t epoch, const std::string& region,
              const std::string& identity, const std::string& hash, double compute_seconds = 0,
              uint32_t inner_steps = 0, const std::string& checkpoint_path = "") {
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
    r->set_compute_seconds(compute_seconds);
    r->set_inner_steps(inner_steps);
    r->set_checkpoint_path(checkpoint_path);
    Send(identity, m);
  }
  // region's measurement of its link to each peer.
  void LinkReport(const std::string& region, const std::string& identity, const std::vector<std::string>& peers,
                  double bytes_per_second, double rtt_seconds) {
    v1::ControlMessage m;
    m.mutable_link_report()->set_region(region);
    for (const auto& p : peers) {
      auto* l = m.mutable_link_report()->add_links();
      l->set_peer(p);
      l->set_bytes_per_second(bytes_per_second);
      l->set_rtt_seconds(rtt_seconds);
    }
    Send(identity, m);
  }
  std::string Submit(uint32_t rounds, const std::function<void(v1::JobSpec&)>& edit = {}) {
    v1::JobSpec spec = DefaultJobSpec();
    spec.set_rounds(rounds);
    spec.set_min_regions(2);
    if (edit) edit(spec);
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
  longhaul::testing::TempDir dir_{"flow"};  // the state file lives here; removed with the rig
  std::filesystem::path file_;
  ManualClock clock_;
  OrchestratorOptions options_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Orchestrator> orch_;
  std::vector<Sent> sent_;
  uint64_t rid_ = 0;
};

// START commands in `sent`, by recipient identity.
inline std::map<std::string, v1::RoundCommand> Starts(const std::vector<Sent>& sent) {
  std::map<std::string, v1::RoundCommand> out;
  for (const auto& s : sent)
    if (s.msg.has_round_command() && s.msg.round_command().kind() == v1::RoundCommand::START)
      out[s.to] = s.msg.round_command();
  return out;
}
inline int Count(const std::vector<Sent>& sent, v1::ControlMessage::BodyCase body) {
  int n = 0;
  for (const auto& s : sent) n += s.msg.body_case() == body ? 1 : 0;
  return n;
}

// The identities `sent` assigns a job to, in order.
inline std::vector<std::string> AssignedTo(const std::vector<Sent>& sent) {
  std::vector<std::string> out;
  for (const auto& s : sent)
    if (s.msg.has_job_assignment()) out.push_back(s.to);
  return out;
}

// The messages of the job's events of `kind`, as the store keeps them.
inline std::vector<std::string> EventMessages(Rig& rig, const std::string& job, const std::string& kind) {
  const auto events = rig.store().LoadEvents(job, 1000);
  REQUIRE(events.ok());
  std::vector<std::string> out;
  for (const auto& e : *events)
    if (e.kind == kind) out.push_back(e.message);
  return out;
}

inline const std::vector<std::pair<std::string, std::string>> kAll = {{"a", "id-a"}, {"b", "id-b"}, {"c", "id-c"}};

// Every region reports each link to the others at this rate and round trip.
inline void ReportEveryLink(Rig& rig, double bytes_per_second, double rtt_seconds) {
  for (auto& [r, id] : kAll) {
    std::vector<std::string> peers;
    for (auto& [p, _] : kAll)
      if (p != r) peers.push_back(p);
    rig.LinkReport(r, id, peers, bytes_per_second, rtt_seconds);
  }
}

// Every region registered and heartbeating, a job of `rounds` submitted and
// assigned to all three, none of them ready yet. Returns its id.
inline std::string AssignJob(Rig& rig, uint32_t rounds, const std::function<void(v1::JobSpec&)>& edit = {}) {
  for (auto& [r, id] : kAll) {
    rig.Register(r, id);
    rig.Heartbeat(r, id);
  }
  rig.Take();
  const std::string job = rig.Submit(rounds, edit);
  REQUIRE(Count(rig.Take(), v1::ControlMessage::kJobAssignment) == 3);
  return job;
}

// Registers a, b, c, submits a job and brings it to round 1 started.
inline std::string StartJob(Rig& rig, uint32_t rounds, const std::function<void(v1::JobSpec&)>& edit = {}) {
  const std::string job = AssignJob(rig, rounds, edit);
  for (auto& [r, id] : kAll) rig.Ready(job, r, id);
  auto starts = Starts(rig.Take());
  REQUIRE(starts.size() == 3);
  CHECK(starts["id-a"].round() == 1);
  CHECK(starts["id-a"].epoch() == 1);
  CHECK(starts["id-a"].participants_size() == 3);
  CHECK(rig.o().JobStatusOf(job).value().state() == "running");
  return job;
}


}  // namespace longhaul::orchestrator::testing
