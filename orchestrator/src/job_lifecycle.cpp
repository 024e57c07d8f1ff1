// Job lifecycle outside rounds: placement on regions, assignment, readiness,
// rejection, region loss, and the terminal states.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <queue>

#include "job_index.h"
#include "job_runtime.h"
#include "job_spec_limits.h"
#include "longhaul/common/checksum.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/proto/frame.h"
#include "longhaul/proto/wire_enums.h"
#include "longhaul/proto/wire_timeouts.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::orchestrator {

void Orchestrator::RecordMembers(Job& job) {
  job.rec.regions.clear();
  for (const auto& m : job.members)
    job.rec.regions.push_back({m.region, m.index, m.ready, m.holds_state, m.endpoint, m.intra_region,
                               m.intra_region_reason, m.start_param_hash});
}

void Orchestrator::NoteWriteFailure(Job& job, std::string_view what, const longhaul::Status& s) {
  job.write_error = "state file write failed while " + std::string(what) + ": " + s.message() + " (retrying)";
  spdlog::error("{}: {}", job.rec.id, job.write_error);
  if (metrics_) metrics_->StateWriteFailed(what);
}

longhaul::Status Orchestrator::Transition(Job& job, std::string_view what, const std::function<void(Job&)>& change,
                                          const std::function<longhaul::Status(const JobRecord&)>& write) {
  JobRecord rec = job.rec;
  std::vector<JobMember> members = job.members;
  const Clock::TimePoint phase_since = job.phase_since;
  change(job);
  RecordMembers(job);
  longhaul::Status s = write ? write(job.rec) : store_->SaveJob(job.rec);
  if (s.ok()) {
    job.write_error.clear();
    index_->Update(job);
    return s;
  }
  job.rec = std::move(rec);
  job.members = std::move(members);
  job.phase_since = phase_since;
  NoteWriteFailure(job, what, s);
  return s;
}

void Orchestrator::Event(const Job& job, const std::string& kind, const std::string& message) {
  longhaul::Status s = store_->AppendEvent(job.rec.id, kind, message, clock_.UnixSeconds());
  if (!s.ok()) {
    spdlog::error("event for {}: {}", job.rec.id, s.ToString());
    if (metrics_) metrics_->StateWriteFailed("recording an event");
  }
}

std::map<std::string, std::string> Orchestrator::RegionAssignments() const {
  std::map<std::string, std::string> out;
  for (const auto& id : index_->placed())
    for (const auto& m : jobs_.at(id)->members) out[m.region] = id;
  return out;
}

std::vector<Orchestrator::Job*> Orchestrator::JobsNamed(const std::set<std::string>& ids) {
  std::vector<Job*> out;  // a copy: handling a job may file it elsewhere
  for (const auto& id : ids) out.push_back(jobs_.at(id).get());
  return out;
}

std::vector<Orchestrator::Job*> Orchestrator::PlacedJobs() { return JobsNamed(index_->placed()); }

void Orchestrator::PlaceWaitingJobs() {
  // Jobs of one placement class get one answer from PlaceJob on the same
  // regions, and a pass only ever takes regions: once a class's next job
  // cannot be placed, none of the class can in this pass. Classes are merged
  // by job id (a min-heap of each class's next job), so jobs are tried in
  // submit order with backfill, at O(classes + placements) per pass, not O(jobs).
  std::map<std::string, std::string> assignments = RegionAssignments();
  using Next = std::pair<std::string, std::string>;  // job id, class
  std::priority_queue<Next, std::vector<Next>, std::greater<>> next;
  for (const auto& [cls, jobs] : index_->waiting()) next.push({jobs.begin()->first, cls});
  while (!next.empty()) {
    const std::string id = next.top().first, cls = next.top().second;
    next.pop();
    Job* job = jobs_.at(id).get();
    const auto try_next = [&] {
      if (Job* after = index_->NextWaiting(cls, id)) next.push({after->rec.id, cls});
    };
    if (job->pending_finish) {
      try_next();
      continue;
    }
    JobPlacement p = PlaceJob(job->rec.spec, registry_.Health(assignments));
    if (!p.ok) {
      if (index_->SetReason(cls, p.reason)) spdlog::info("{} waiting: {}", id, p.reason);
      continue;
    }
    longhaul::Status saved = Transition(*job, "scheduling the job", [&](Job& j) {
      j.members.clear();
      for (size_t i = 0; i < p.regions.size(); ++i) {
        JobMember m;
        m.region = p.regions[i];
        m.index = static_cast<uint32_t>(i);
        j.members.push_back(std::move(m));
      }
      j.rec.state = JobState::kScheduled;
      j.rec.reason = p.reason;
      j.phase_since = clock_.Now();
    });
    if (!saved.ok()) continue;  // still submitted: placed again on the next tick
    for (const auto& m : job->members) assignments[m.region] = id;
    try_next();
    job->waiting_reason.clear();
    spdlog::info("{} scheduled: {}", id, p.reason);
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
    *a->mutable_timeouts() = proto::TimeoutsToWire(options_.timeouts);
    if (!m.restore_from.empty()) {
      a->set_checkpoint_path(m.restore_from);
      a->set_checkpoint_round(job.rec.last_committed_round);
      a->set_checkpoint_param_hash(job.last_hash);
    }
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
  if (!job.Member(r.region()))
    return Reject("wrong_job", r.region() + " is ready for " + job.rec.id + " but was not assigned to it");
  const auto want = job.rec.spec.workers_per_region();
  if (static_cast<uint32_t>(r.endpoint().shard_endpoints_size()) != want) {
    Reject("bad_job_ready", r.region() + " reported " + std::to_string(r.endpoint().shard_endpoints_size()) +
                                " shard endpoints for " + job.rec.id + ", expected " + std::to_string(want));
    return;
  }
  if (!r.endpoint().public_key().empty()) {
    if (auto bad = wan_transport::ValidateZ85Key(r.endpoint().public_key(), "WAN public key"); !bad.ok()) {
      return Reject("bad_job_ready", r.region() + " reported a bad " + bad.message() + " for " + job.rec.id);
    }
  }
  if (!IsParameterHash(r.param_hash()) && !r.param_hash().empty()) {
    const std::string why = "its JobReady carried a parameter hash that is not 16 hex digits: " +
                            spec_limits::ShortQuote(r.param_hash());
    job.Member(r.region())->detail = why;  // named if the job gives up waiting for it
    return Reject("bad_job_ready", r.region() + " for " + job.rec.id + ": " + why);
  }
  if (const JobMember* m = job.Member(r.region());
      !m->restore_from.empty() && r.restored_round() != job.rec.last_committed_round) {
    // The launch from before the restore was asked for answering late: the
    // region is ready once its workers restored the checkpoint.
    spdlog::info("{}: {} ready without round {}; waiting for its restore", job.rec.id, r.region(),
                 job.rec.last_committed_round);
    return;
  }
  longhaul::Status saved = Transition(job, "recording a region ready", [&](Job& j) {
    JobMember* m = j.Member(r.region());
    m->ready = true;
    m->confirmed = true;
    m->heartbeats_without_job = 0;
    m->endpoint = r.endpoint();
    m->endpoint.set_region(r.region());
    m->intra_region = r.intra_region();
    m->intra_region_reason = r.intra_region_reason();
    m->start_param_hash = r.param_hash();
    m->detail.clear();
    // Until a round commits, every region initialises theta(0) from the job
    // seed, so all hold the state: also one assigned again after round 1
    // failed (else no region could bootstrap the others and round 1 would
    // wait for ever). A script that builds other parameters is told apart by
    // its start hash when the round starts (StartAttempt). Later, a region holds it when its workers restored the
    // checkpoint of the last committed round it was assigned (they verified
    // the round and the committed hash).
    m->holds_state = j.rec.last_committed_round == 0 ||
                     (!m->restore_from.empty() && r.restored_round() == j.rec.last_committed_round);
    m->restore_from.clear();
  });
  if (!saved.ok()) {
    // Not ready as far as the state file knows: the assignment goes out again
    // on the next tick and the agent answers it with job_ready again.
    job.Member(r.region())->assignment_sent = false;
    return;
  }
  spdlog::info("{}: {} ready with {} shard endpoints, intra-region {} ({})", job.rec.id, r.region(), want,
               proto::IntraRegionName(r.intra_region()), r.intra_region_reason());
  if (metrics_) metrics_->IntraRegionBackend(job.rec.id, r.region(), r.intra_region());
  if (job.rec.state == JobState::kScheduled) CheckScheduledJob(job);
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
  if (!m->restore_from.empty() && r.error().message().find(m->restore_from) == std::string::npos) {
    // Every refusal of a checkpoint names its file (the agent's admission, the
    // workers' restore and checks): this one came from the launch before the
    // restore was asked for, whose answer is still to come.
    spdlog::info("{}: {}'s rejection predates its restore; waiting for the restore's answer", job.rec.id, r.region());
    return;
  }
  m->ready = false;
  m->detail = "rejected: " + r.error().message();
  if (!m->restore_from.empty()) {
    // Its checkpoint was refused (missing, damaged, another round or hash):
    // the next round start tries another region's; this one is assigned
    // again without it and joins from whichever region restores.
    job.checkpoints_refused.insert(r.region());
    m->restore_from.clear();
    m->assignment_sent = false;
    Event(job, "restore_refused", why);
    return;
  }
  job.KeepWorkerOutput(r.region(), r.error());  // saved with failing the job, when it fails
  if (job.rec.state == JobState::kScheduled || job.rec.last_committed_round == 0)
    return FinishJob(job, JobState::kFailed, why);
  Event(job, "rejected", why);  // a rejoin refused: the job goes on without this region
}

void Orchestrator::ObserveHeartbeat(const std::string& region, const v1::Heartbeat& hb) {
  for (Job* job : PlacedJobs()) {
    const std::string& id = job->rec.id;
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
    longhaul::Status saved = Transition(*job, "recording a region that lost the job",
                                        [&](Job& j) { j.Member(region)->ForgetLaunch("agent lost the job"); });
    if (!saved.ok()) continue;  // the next heartbeat without the job tries again
    spdlog::warn("{}: {} no longer runs the job; it will be assigned again", id, region);
    Event(*job, "region_lost", region + " no longer runs the job (agent restarted?)");
  }
}

void Orchestrator::RegionWentDown(const std::string& region) {
  for (Job* job : PlacedJobs()) {
    const std::string& id = job->rec.id;
    if (!job->Member(region)) continue;
    Event(*job, "region_down", region + " is down");
    if (job->rec.state == JobState::kScheduled) {
      ReleaseScheduledJob(*job, region + " went down before the job started");
      continue;
    }
    // Rounds go by the registry's view (down is down), so a failed write here
    // loses nothing: the restored member is confirmed by heartbeats again.
    longhaul::Status saved =
        Transition(*job, "recording a region down", [&](Job& j) { j.Member(region)->ForgetLaunch("down"); });
    if (!saved.ok()) spdlog::warn("{}: rounds go on without {}, which the state file still lists as ready", id, region);
    job->Member(region)->restore_from.clear();  // (kept in memory only) another region's checkpoint may serve
    if (job->attempt) DecideAttempt(*job);
  }
}

void Orchestrator::RegionRestarted(const std::string& region) {
  for (Job* job : PlacedJobs()) {
    const std::string& id = job->rec.id;
    const JobMember* m = job->Member(region);
    if (!m || (!m->assignment_sent && !m->ready)) continue;
    const auto forget = [&](Job& j) { j.Member(region)->ForgetLaunch("agent restarted"); };
    // Starts and rounds go by these flags in memory, so they change even when
    // the write fails: the old process's launch is gone either way (a member
    // the file still lists as ready is confirmed by heartbeats after a restart).
    if (!Transition(*job, "recording a region whose agent restarted", forget).ok()) {
      spdlog::warn("{}: {} is assigned again, which the state file still lists as ready", id, region);
      forget(*job);
    }
    spdlog::warn("{}: the agent of {} restarted; assigning the job to it again", id, region);
    Event(*job, "region_restarted", region + "'s agent restarted (a new session); assigned again");
    if (job->rec.state == JobState::kScheduled) {
      CheckScheduledJob(*job);
    } else {
      if (job->attempt) DecideAttempt(*job);  // first: an abort would clear the assignment sent below
      if (job->rec.state == JobState::kRunning) SendAssignments(*job);
    }
  }
}

void Orchestrator::RegionReconnected(const std::string& region) {
  for (Job* job : PlacedJobs()) {
    JobMember* m = job->Member(region);
    if (!m || m->ready || !m->assignment_sent) continue;
    if (job->rec.state != JobState::kScheduled && job->rec.state != JobState::kRunning) continue;
    m->assignment_sent = false;
    spdlog::info("{}: {} reconnected before answering its assignment; sending it again", job->rec.id, region);
    SendAssignments(*job);
  }
}

void Orchestrator::ReleaseScheduledJob(Job& job, const std::string& why) {
  // Not started yet: release every region and place the job again. Durable
  // first: the regions hear STOP only once the state file has the job back
  // as submitted (else CheckScheduledJob tries again on the next tick).
  const std::vector<JobMember> released = job.members;
  longhaul::Status saved = Transition(job, "placing the job again", [&](Job& j) {
    j.members.clear();
    j.rec.state = JobState::kSubmitted;
    j.rec.reason = why + "; placing again";
  });
  if (!saved.ok()) return;
  for (const auto& other : released) {
    v1::ControlMessage stop;
    auto* c = stop.mutable_round_command();
    c->set_job_id(job.rec.id);
    c->set_kind(v1::RoundCommand::STOP);
    c->set_reason(why);
    SendToRegion(other.region, std::move(stop));
  }
}

void Orchestrator::CheckScheduledJob(Job& job) {
  for (const auto& m : job.members)
    if (!registry_.IsUp(m.region)) return ReleaseScheduledJob(job, m.region + " went down before the job started");
  SendAssignments(job);
  std::vector<std::string> pending;
  for (const auto& m : job.members)
    if (!m.ready) pending.push_back(m.region + (m.detail.empty() ? "" : " (" + m.detail + ")"));
  if (pending.empty()) {
    longhaul::Status saved = Transition(job, "starting the job", [&](Job& j) {
      j.rec.state = JobState::kRunning;
      j.rec.reason = "all " + std::to_string(j.members.size()) + " regions ready";
      if (j.rec.started_at == 0) j.rec.started_at = clock_.UnixSeconds();
      j.phase_since = clock_.Now();
    });
    if (!saved.ok()) return;
    spdlog::info("{} running on {} regions", job.rec.id, job.members.size());
    Event(job, "running", job.rec.reason);
    return DriveRunningJob(job);
  }
  const auto waited = clock_.Now() - job.phase_since;
  if (waited > options_.timeouts.round) {
    std::string names;
    for (const auto& p : pending) names += (names.empty() ? "" : ", ") + p;
    FinishJob(job, JobState::kFailed,
              names + " did not report ready within " +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(options_.timeouts.round).count()) +
                  " s");
  }
}

void Orchestrator::FinishJob(Job& job, JobState state, const std::string& reason) {
  // Durable before any region hears STOP. If the write fails the job stays as
  // it was, with the outcome pending: Tick finishes it once the file takes it.
  longhaul::Status saved = Transition(job, "finishing the job", [&](Job& j) {
    j.rec.state = state;
    j.rec.reason = reason;
    j.rec.finished_at = clock_.UnixSeconds();
  });
  if (!saved.ok()) {
    job.pending_finish = Job::PendingFinish{state, reason};
    index_->Update(job);
    return;
  }
  job.pending_finish.reset();
  index_->Update(job);
  for (const auto& m : job.members) {
    v1::ControlMessage stop;
    auto* c = stop.mutable_round_command();
    c->set_job_id(job.rec.id);
    c->set_kind(v1::RoundCommand::STOP);
    c->set_epoch(job.rec.epoch);
    c->set_round(job.rec.last_committed_round);
    c->set_reason(std::string(JobStateName(state)) + ": " + reason);
    c->set_job_completed(state == JobState::kSucceeded);
    SendToRegion(m.region, std::move(stop));
    registry_.NoteJobEnded(m.region, job.rec.id);
  }
  job.attempt.reset();
  job.waiting_reason.clear();
  spdlog::info("{} {}: {}", job.rec.id, JobStateName(state), reason);
  Event(job, std::string(JobStateName(state)), reason);
  UpdateGauges();
}

}  // namespace longhaul::orchestrator
