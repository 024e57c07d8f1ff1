// Job lifecycle outside rounds: placement on regions, assignment, readiness,
// rejection, region loss, and the terminal states.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "job_runtime.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/proto/frame.h"

namespace longhaul::orchestrator {

longhaul::Status Orchestrator::SaveJob(Job& job) {
  job.rec.regions.clear();
  for (const auto& m : job.members)
    job.rec.regions.push_back({m.region, m.index, m.ready, m.holds_state, m.endpoint});
  longhaul::Status s = store_->SaveJob(job.rec);
  if (!s.ok()) spdlog::error("saving {}: {}", job.rec.id, s.ToString());
  return s;
}

void Orchestrator::Event(const Job& job, const std::string& kind, const std::string& message) {
  longhaul::Status s = store_->AppendEvent(job.rec.id, kind, message, clock_.UnixSeconds());
  if (!s.ok()) spdlog::error("event for {}: {}", job.rec.id, s.ToString());
}

std::map<std::string, std::string> Orchestrator::RegionAssignments() const {
  std::map<std::string, std::string> out;
  for (const auto& [id, job] : jobs_)
    if (job->active() && job->rec.state != "submitted")
      for (const auto& m : job->members) out[m.region] = id;
  return out;
}

void Orchestrator::PlaceWaitingJobs() {
  for (auto& [id, job] : jobs_) {
    if (job->rec.state != "submitted") continue;
    JobPlacement p = PlaceJob(job->rec.spec, registry_.Health(RegionAssignments()));
    if (!p.ok) {
      if (job->waiting_reason != p.reason) spdlog::info("{} waiting: {}", id, p.reason);
      job->waiting_reason = p.reason;
      continue;
    }
    job->members.clear();
    for (size_t i = 0; i < p.regions.size(); ++i) {
      JobMember m;
      m.region = p.regions[i];
      m.index = static_cast<uint32_t>(i);
      job->members.push_back(std::move(m));
    }
    job->rec.state = "scheduled";
    job->rec.reason = p.reason;
    job->waiting_reason.clear();
    job->phase_since = clock_.Now();
    spdlog::info("{} scheduled: {}", id, p.reason);
    if (!SaveJob(*job).ok()) continue;
    Event(*job, "scheduled", p.reason);
    SendAssignments(*job);
  }
}

void Orchestrator::SendAssignments(Job& job) {
  for (auto& m : job.members) {
    if (m.ready || m.assignment_sent || !registry_.IsUp(m.region)) continue;
    v1::ControlMessage msg;
    auto* a = msg.mutable_job_assignment();
    a->set_job_id(job.rec.id);
    *a->mutable_spec() = job.rec.spec;
    a->set_region(m.region);
    a->set_region_index(m.index);
    a->set_start_round(job.rec.last_committed_round + 1);
    SendToRegion(m.region, std::move(msg));
    m.assignment_sent = true;
    m.assigned_at = clock_.Now();
    spdlog::info("{}: assigned to {} (index {}, start round {})", job.rec.id, m.region, m.index,
                 job.rec.last_committed_round + 1);
  }
}

void Orchestrator::HandleJobReady(const std::string& identity, const v1::ControlMessage& msg) {
  const auto& r = msg.job_ready();
  if (!FromRegistered(identity, r.region(), "job_ready")) return;
  auto it = jobs_.find(r.job_id());
  if (it == jobs_.end() || !it->second->active())
    return Reject("wrong_job", r.region() + " is ready for job '" + r.job_id() + "', which is not active");
  Job& job = *it->second;
  JobMember* m = job.Member(r.region());
  if (!m) return Reject("wrong_job", r.region() + " is ready for " + job.rec.id + " but was not assigned to it");
  const auto want = job.rec.spec.workers_per_region();
  if (static_cast<uint32_t>(r.endpoint().shard_endpoints_size()) != want) {
    Reject("bad_job_ready", r.region() + " reported " + std::to_string(r.endpoint().shard_endpoints_size()) +
                                " shard endpoints for " + job.rec.id + ", expected " + std::to_string(want));
    return;
  }
  m->ready = true;
  m->confirmed = true;
  m->heartbeats_without_job = 0;
  m->endpoint = r.endpoint();
  m->endpoint.set_region(r.region());
  m->detail.clear();
  // Before round 1 every region initialises theta from the job seed, so all hold state.
  m->holds_state = job.rec.state == "scheduled" && job.rec.last_committed_round == 0;
  spdlog::info("{}: {} ready with {} shard endpoints", job.rec.id, r.region(), want);
  (void)SaveJob(job);
  if (job.rec.state == "scheduled") CheckScheduledJob(job);
}

void Orchestrator::HandleJobRejected(const std::string& identity, const v1::ControlMessage& msg) {
  const auto& r = msg.job_rejected();
  if (!FromRegistered(identity, r.region(), "job_rejected")) return;
  auto it = jobs_.find(r.job_id());
  if (it == jobs_.end() || !it->second->active())
    return Reject("wrong_job", r.region() + " rejected job '" + r.job_id() + "', which is not active");
  Job& job = *it->second;
  JobMember* m = job.Member(r.region());
  if (!m) return Reject("wrong_job", r.region() + " rejected " + job.rec.id + " but was not assigned to it");
  const std::string why = r.region() + " rejected the job: " + r.error().message();
  spdlog::warn("{}: {}", job.rec.id, why);
  m->ready = false;
  m->detail = "rejected: " + r.error().message();
  if (job.rec.state == "scheduled" || job.rec.last_committed_round == 0) return FinishJob(job, "failed", why);
  Event(job, "rejected", why);  // a rejoin refused: the job goes on without this region
}

void Orchestrator::ObserveHeartbeat(const std::string& region, const v1::Heartbeat& hb) {
  for (auto& [id, job] : jobs_) {
    if (!job->active()) continue;
    JobMember* m = job->Member(region);
    if (!m) continue;
    const bool lists = std::find(hb.running_jobs().begin(), hb.running_jobs().end(), id) != hb.running_jobs().end();
    if (lists) {
      m->heartbeats_without_job = 0;
      if (m->ready) m->confirmed = true;
      continue;
    }
    if (!m->ready) continue;
    // Two heartbeats in a row without the job: the agent restarted and lost its
    // workers (one alone may have been sent just before it became ready).
    if (++m->heartbeats_without_job < 2) continue;
    spdlog::warn("{}: {} no longer runs the job; it will be assigned again", id, region);
    Event(*job, "region_lost", region + " no longer runs the job (agent restarted?)");
    m->ready = m->holds_state = m->assignment_sent = m->confirmed = false;
    m->heartbeats_without_job = 0;
    m->detail = "agent lost the job";
    (void)SaveJob(*job);
  }
}

void Orchestrator::RegionWentDown(const std::string& region) {
  for (auto& [id, job] : jobs_) {
    if (!job->active() || job->rec.state == "submitted") continue;
    JobMember* m = job->Member(region);
    if (!m) continue;
    Event(*job, "region_down", region + " is down");
    if (job->rec.state == "scheduled") {
      // Not started yet: release every region and place the job again.
      for (const auto& other : job->members) {
        v1::ControlMessage stop;
        auto* c = stop.mutable_round_command();
        c->set_job_id(id);
        c->set_kind(v1::RoundCommand::STOP);
        c->set_reason(region + " went down before the job started");
        SendToRegion(other.region, std::move(stop));
      }
      job->members.clear();
      job->rec.state = "submitted";
      job->rec.reason = region + " went down before the job started; placing again";
      (void)SaveJob(*job);
      continue;
    }
    m->ready = m->holds_state = m->assignment_sent = m->confirmed = false;
    m->detail = "down";
    (void)SaveJob(*job);
    if (job->attempt) DecideAttempt(*job);
  }
}

void Orchestrator::CheckScheduledJob(Job& job) {
  SendAssignments(job);
  std::vector<std::string> pending;
  for (const auto& m : job.members)
    if (!m.ready) pending.push_back(m.region);
  if (pending.empty()) {
    job.rec.state = "running";
    job.rec.reason = "all " + std::to_string(job.members.size()) + " regions ready";
    if (job.rec.started_at == 0) job.rec.started_at = clock_.UnixSeconds();
    job.phase_since = clock_.Now();
    spdlog::info("{} running on {} regions", job.rec.id, job.members.size());
    if (!SaveJob(job).ok()) return;
    Event(job, "running", job.rec.reason);
    return DriveRunningJob(job);
  }
  const auto waited = clock_.Now() - job.phase_since;
  if (waited > options_.timeouts.round) {
    std::string names;
    for (const auto& p : pending) names += (names.empty() ? "" : ", ") + p;
    FinishJob(job, "failed",
              names + " did not report ready within " +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(options_.timeouts.round).count()) +
                  " s");
  }
}

void Orchestrator::FinishJob(Job& job, const std::string& state, const std::string& reason) {
  for (const auto& m : job.members) {
    v1::ControlMessage stop;
    auto* c = stop.mutable_round_command();
    c->set_job_id(job.rec.id);
    c->set_kind(v1::RoundCommand::STOP);
    c->set_epoch(job.rec.epoch);
    c->set_round(job.rec.last_committed_round);
    c->set_reason(state + ": " + reason);
    SendToRegion(m.region, std::move(stop));
    registry_.NoteJobEnded(m.region, job.rec.id);
  }
  job.attempt.reset();
  job.rec.state = state;
  job.rec.reason = reason;
  job.rec.finished_at = clock_.UnixSeconds();
  job.waiting_reason.clear();
  spdlog::info("{} {}: {}", job.rec.id, state, reason);
  if (SaveJob(job).ok()) Event(job, state, reason);
  UpdateGauges();
}

}  // namespace longhaul::orchestrator
