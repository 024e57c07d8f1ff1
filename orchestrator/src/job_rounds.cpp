// Rounds of a running job: start an attempt, collect reports, commit or abort,
// retry with the survivors, admit returning regions at the boundary.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "job_runtime.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/round_plan.h"
#include "longhaul/proto/wire_enums.h"

namespace longhaul::orchestrator {
namespace {

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::set<std::string> Orchestrator::UnavailableMembers(const Job& job) const {
  std::set<std::string> out;
  for (const auto& m : job.members)
    if (!registry_.IsUp(m.region) || !m.ready) out.insert(m.region);
  return out;
}

void Orchestrator::DriveRunningJob(Job& job) {
  SendAssignments(job);  // regions that came back get the job again
  if (job.attempt) return DecideAttempt(job);
  const auto now = clock_.Now();
  if (job.restored) {
    // After a restart, wait (at most one heartbeat-miss period) for the agents
    // that held the job to confirm they still run it, so none is needlessly
    // bootstrapped again.
    bool all_confirmed = true;
    for (const auto& m : job.members) all_confirmed = all_confirmed && (!m.ready || m.confirmed);
    const bool grace_over = now - job.restored_at > options_.timeouts.heartbeat_miss();
    if (!all_confirmed && !grace_over) {
      job.waiting_reason = "resuming after restart: waiting for regions to reconnect";
      return;
    }
    for (auto& m : job.members)
      if (m.ready && !m.confirmed) {
        m.ready = m.holds_state = m.assignment_sent = false;
        m.detail = "did not reconnect after the orchestrator restarted";
      }
    job.restored = false;
  }
  // All rounds committed but the job's end not yet written (a failed write).
  if (job.rec.last_committed_round >= job.rec.spec.rounds())
    return FinishJob(job, JobState::kSucceeded, "all " + std::to_string(job.rec.last_committed_round) +
                                                    " rounds committed");
  if (now - job.phase_since > options_.timeouts.job_idle)
    return FinishJob(job, JobState::kFailed,
                     "no round committed for " + std::to_string(static_cast<int>(Seconds(now - job.phase_since))) +
                         " s: " + job.waiting_reason);
  StartAttempt(job);
}

bool Orchestrator::RestoreFromCheckpoint(Job& job, const std::vector<JobMemberView>& views) {
  if (job.rec.last_committed_round == 0) return false;  // every region starts from the seed
  for (auto& m : job.members) {
    if (m.restore_from.empty()) continue;
    const bool down = !registry_.IsUp(m.region);
    const bool silent = m.assignment_sent && clock_.Now() - m.assigned_at > options_.timeouts.round;
    if (!down && !silent) return true;  // under way: its JobReady or JobRejected decides
    // Abandoned: another region's checkpoint is tried (one that did not answer
    // within the round timeout is not tried again).
    const std::string why = m.region + (down ? " went down" : " did not answer") + " while restoring " + m.restore_from;
    if (silent) job.checkpoints_refused.insert(m.region);
    m.restore_from.clear();
    m.assignment_sent = false;
    Event(job, "restore_abandoned", why);
  }
  const std::string source = ChooseCheckpointSource(views, job.checkpoints, job.checkpoints_refused);
  if (source.empty()) return false;
  const std::string& path = job.checkpoints.at(source);
  const std::string round = std::to_string(job.rec.last_committed_round);
  // The region relaunches from its own checkpoint of the last committed round
  // (its workers check the round and the committed hash); every other region
  // is then bootstrapped from it at the next round, as after any rejoin.
  longhaul::Status saved = Transition(job, "restoring from a checkpoint", [&](Job& j) {
    j.Member(source)->ForgetLaunch("restoring round " + round + " from its checkpoint");
  });
  if (!saved.ok()) return true;  // tried again on the next tick
  job.Member(source)->restore_from = path;  // in memory only: chosen afresh after an orchestrator restart
  const std::string why = "no region holds the parameters of round " + round + "; " + source +
                          " restores them from its checkpoint " + path;
  spdlog::warn("{}: {}", job.rec.id, why);
  Event(job, "restoring", why);
  job.waiting_reason = "round " + std::to_string(job.rec.last_committed_round + 1) + " paused: " + why;
  SendAssignments(job);
  return true;
}

void Orchestrator::StartAttempt(Job& job) {
  const auto& sync = job.rec.spec.sync();
  const auto kind = proto::SyncKindOf(sync);
  // Admission validated the kind; were it unknown, the hashes are compared.
  const bool replicas_identical = !kind.ok() || sync_policies::Traits(*kind).replicas_identical;
  std::vector<JobMemberView> views;
  for (const auto& m : job.members) {
    const RegionEntry* r = registry_.Find(m.region);
    views.push_back({m.region, registry_.IsUp(m.region), m.ready, m.holds_state,
                     r ? registry_.MissedHeartbeats(*r) : 0, m.detail, m.start_param_hash});
  }
  // Before the first commit, a region that starts from other parameters than
  // the reference region receives the reference's at round 1.
  StartParameters start;
  if (job.rec.last_committed_round == 0 && replicas_identical) {
    start = CompareStartParameters(views, !job.start_hashes_disagreed);
    for (auto& v : views) {
      if (v.region == start.reference) v.holds_state = true;
      if (std::find(start.differing.begin(), start.differing.end(), v.region) != start.differing.end())
        v.holds_state = false;
    }
  }
  RoundMembership ms = PlanRoundMembership(views, job.rec.spec.min_regions());
  if (!ms.ok && RestoreFromCheckpoint(job, views)) return;
  if (!ms.ok) {
    std::string reason = "round " + std::to_string(job.rec.last_committed_round + 1) + " paused: " + ms.reason;
    const bool state_lost = job.rec.last_committed_round > 0 &&
                            std::none_of(views.begin(), views.end(), [](const auto& v) { return v.holds_state; });
    if (state_lost) {
      reason += "; no region has a usable checkpoint of round " + std::to_string(job.rec.last_committed_round);
      if (job.rec.spec.checkpoint_interval() != 1)
        reason += " (checkpoint_interval " + std::to_string(job.rec.spec.checkpoint_interval()) +
                  ": only a checkpoint of the last committed round can serve)";
    }
    if (job.waiting_reason != reason) {
      spdlog::warn("{}: {}", job.rec.id, reason);
      Event(job, "paused", reason);
    }
    job.waiting_reason = reason;
    return;
  }
  RoundShape shape{.payload_bytes = job.payload_bytes,
                   .kind = kind.ok() ? *kind : sync_policies::SyncKind::kDiLoCo,
                   .inner_steps = sync.inner_steps(),
                   .fragments = sync.fragments(),
                   .overlap_steps = sync.overlap_steps(),
                   .step_seconds = job.step_seconds};
  // The slowest participant sets the pace; the fastest waits for it.
  double slowest = 0, fastest = 0;
  for (const auto& region : ms.participants) {
    auto it = job.region_step_seconds.find(region);
    if (it == job.region_step_seconds.end()) {
      slowest = fastest = 0;
      break;
    }
    slowest = std::max(slowest, it->second);
    fastest = fastest == 0 ? it->second : std::min(fastest, it->second);
  }
  if (slowest > 0) {
    shape.step_seconds = slowest;
    shape.fastest_step_seconds = fastest;
  }
  shape = PacedShape(shape, job.rec.spec);
  // A region's rate over whole exchanges holds their latency: it stands for an
  // unmeasured link in the job whose exchanges it timed, no other.
  LinkTable links = links_;
  for (const auto& [region, rate] : job.region_rates) links.SetRegionRate(region, rate);
  auto plan = PlanRound(ms.participants, links, ShapeWithPlan(shape, job.rec.spec, job.rec.plan), options_.schedule);
  // The round's inner steps and codec: the spec's, or re-planned (sync.adaptive)
  // from the links and step times measured so far.
  const ChosenRoundPlan chosen = ChooseRoundPlan({.spec = &job.rec.spec,
                                                  .current = job.rec.plan,
                                                  .first_step = job.rec.inner_steps_done,
                                                  .shape = shape,
                                                  .wan = plan.ok() ? plan->wan : std::nullopt,
                                                  .last_comm_seconds = job.last_actual,
                                                  .last_plan = job.last_plan,
                                                  .return_streak = job.replan_return_streak,
                                                  .round_timeout_seconds = Seconds(options_.timeouts.round)});
  if (chosen.changed) plan = PlanRound(ms.participants, links, ShapeWithPlan(shape, job.rec.spec, chosen.plan), options_.schedule);
  RoundSchedule schedule;
  if (plan.ok()) {
    schedule = std::move(plan).value();
  } else {
    schedule.ring = ms.participants;
    schedule.reason = "scheduler failed (" + plan.status().message() + "); ring in job order";
  }
  // The epoch (and the plan) are durable before any START carries them: a
  // restarted orchestrator never reuses an epoch, and resumes with the plan.
  if (!Transition(job, "starting a round", [&](Job& j) {
        j.rec.epoch += 1;
        j.rec.plan = chosen.plan;
        if (chosen.changed) j.rec.replans += 1;
      }).ok())
    return;
  if (chosen.changed) {
    spdlog::info("{}: round {} re-planned: {}", job.rec.id, job.rec.last_committed_round + 1, chosen.plan.reason());
    Event(job, "replanned", "round " + std::to_string(job.rec.last_committed_round + 1) + ": " + chosen.plan.reason());
  }
  // A retry of the same round is not another round in a row.
  if (job.failed_attempts == 0) job.replan_return_streak = chosen.return_streak;
  if (metrics_) metrics_->RoundPlanned(job.rec.id, chosen.plan.inner_steps(), chosen.plan.predicted_cu(), chosen.changed);
  RoundAttempt a;
  a.job_id = job.rec.id;
  a.round = job.rec.last_committed_round + 1;
  a.epoch = job.rec.epoch;
  a.participants = schedule.ring;
  a.joining = ms.joining;
  a.replicas_identical = replicas_identical;
  a.started = clock_.Now();
  a.deadline = a.started + options_.timeouts.round;
  a.predicted_comm_seconds = schedule.predicted_comm_seconds;
  a.plan = chosen.plan;
  const uint32_t interval = job.rec.spec.checkpoint_interval();
  const bool checkpoint = interval > 0 && (a.round % interval == 0 || a.round == job.rec.spec.rounds());
  for (const auto& region : a.participants) {
    v1::ControlMessage msg;
    auto* c = msg.mutable_round_command();
    c->set_job_id(a.job_id);
    c->set_round(a.round);
    c->set_epoch(a.epoch);
    c->set_kind(v1::RoundCommand::START);
    for (const auto& p : a.participants) *c->add_participants() = job.Member(p)->endpoint;
    c->set_connections_per_link(schedule.connections_per_link);
    c->set_checkpoint(checkpoint);
    if (!options_.checkpoint_dir.empty()) c->set_checkpoint_dir((options_.checkpoint_dir / a.job_id).string());
    c->set_reason(ms.reason + "; " + schedule.reason);
    for (const auto& j : ms.joining) c->add_joining_regions(j);
    c->set_bootstrap_region(ms.bootstrap_region);
    *c->mutable_plan() = a.plan;
    SendToRegion(region, std::move(msg));
  }
  spdlog::info("{}: START round {} epoch {}: {}; {}", a.job_id, a.round, a.epoch, ms.reason, schedule.reason);
  if (job.failed_attempts > 0 || !ms.joining.empty())
    Event(job, "round_started", "round " + std::to_string(a.round) + " epoch " + std::to_string(a.epoch) + ": " +
                                    ms.reason);
  if (!start.reason.empty() && start.reason != job.start_parameters_said) {  // once, not at every retry
    spdlog::warn("{}: round {} epoch {}: {}", a.job_id, a.round, a.epoch, start.reason);
    Event(job, "start_parameters_differ",
          "round " + std::to_string(a.round) + " epoch " + std::to_string(a.epoch) + ": " + start.reason);
    job.start_parameters_said = start.reason;
  }
  job.waiting_reason = "round " + std::to_string(a.round) + " epoch " + std::to_string(a.epoch) + " started";
  job.attempt = std::move(a);
}

void Orchestrator::HandleRoundReport(const std::string& identity, const v1::ControlMessage& msg) {
  const auto& r = msg.round_report();
  if (!FromRegistered(identity, r.region(), "round_report")) return;
  auto it = jobs_.find(r.job_id());
  if (it == jobs_.end() || !it->second->active())
    return Reject("wrong_job", "round report from " + r.region() + " for job '" + r.job_id() + "', which is not active");
  Job& job = *it->second;
  if (RecordLateFailure(job, r)) return;
  if (!job.attempt)
    return Reject("stale", "round report from " + r.region() + " for " + job.rec.id + " round " +
                               std::to_string(r.round()) + " epoch " + std::to_string(r.epoch()) +
                               " while no round is in flight");
  longhaul::Status accepted = AcceptReport(*job.attempt, r);
  if (!accepted.ok())
    return Reject(accepted.code() == StatusCode::kAborted ? "stale_epoch" : "bad_report", accepted.message());
  job.attempt->reports[r.region()] = r;
  if (!r.ok()) job.KeepWorkerOutput(r.region(), r.error());  // saved with the abort this failure causes
  if (JobMember* m = job.Member(r.region())) m->last_report = r;
  if (metrics_) {
    const double tps = r.wall_seconds() > 0 ? static_cast<double>(r.tokens()) / r.wall_seconds() : 0;
    metrics_->RegionReport(job.rec.id, r.region(), r.loss(), r.val_loss(), tps);
    metrics_->WanBytes(job.rec.id, std::string(proto::CodecName(job.attempt->plan.codec())),
                       static_cast<double>(r.wan_bytes_sent()));
  }
  if (r.comm_seconds() > 0 && r.wan_bytes_sent() > 0)
    job.region_rates[r.region()] = static_cast<double>(r.wan_bytes_sent()) / r.comm_seconds();
  DecideAttempt(job);
}

bool Orchestrator::RecordLateFailure(Job& job, const v1::RoundReport& r) {
  if (r.ok() || !job.last_aborted || r.round() != job.last_aborted->round || r.epoch() != job.last_aborted->epoch ||
      job.last_aborted->unreported.erase(r.region()) == 0)
    return false;
  job.KeepWorkerOutput(r.region(), r.error());
  Event(job, "region_failed",
        "round " + std::to_string(r.round()) + " epoch " + std::to_string(r.epoch()) + " (reported after its abort): " +
            r.region() + " failed: " + (r.error().message().empty() ? "no reason given" : r.error().message()));
  return true;
}

void Orchestrator::DecideAttempt(Job& job) {
  if (!job.attempt) return;
  const auto now = clock_.Now();
  RoundDecision d = DecideRound(*job.attempt, now, UnavailableMembers(job));
  if (metrics_) metrics_->StalledFor(job.rec.id, d.waiting_on.empty() ? 0 : Seconds(now - job.attempt->started));
  switch (d.outcome) {
    case RoundOutcome::kWait: job.waiting_reason = d.reason; return;
    case RoundOutcome::kCommit: return CommitAttempt(job, d);
    case RoundOutcome::kAbort: return AbortAttempt(job, d);
  }
}

void Orchestrator::CommitAttempt(Job& job, const RoundDecision& d) {
  RoundAttempt a = std::move(*job.attempt);
  job.attempt.reset();
  CommittedRound c = SummarizeCommit(a, d.param_hash, clock_.UnixSeconds());
  const uint32_t m = static_cast<uint32_t>(a.participants.size());
  c.inner_steps = a.plan.inner_steps();
  c.codec = a.plan.codec();
  c.overlap_steps = a.plan.overlap_steps();
  const uint32_t steps = std::max(1u, a.plan.inner_steps());
  if (job.payload_bytes == 0 && m > 1) {
    uint64_t sent = 0;
    for (const auto& [_, r] : a.reports) sent = std::max<uint64_t>(sent, r.wan_bytes_sent());
    // A ring all-reduce sends 2(M-1)/M of the payload; kind sync sends one per step.
    const auto kind = proto::SyncKindOf(job.rec.spec.sync());
    const uint32_t exchanges = kind.ok() && *kind == sync_policies::SyncKind::kSync ? steps : 1;
    // Kept in the spec's codec: a re-planned codec's payload is derived from it.
    job.payload_bytes = ConvertPayloadBytes(job.rec.spec, sent * m / (2 * (m - 1)) / exchanges, a.plan.codec(),
                                            job.rec.spec.compression().codec());
  }
  // Per region: its compute over the steps it ran (time-budgeted rounds: its own count).
  job.region_step_seconds.clear();
  double step_sum = 0;
  for (const auto& [region, r] : a.reports) {
    if (r.compute_seconds() <= 0) continue;
    const double s = r.compute_seconds() / (r.inner_steps() > 0 ? r.inner_steps() : steps);
    job.region_step_seconds[region] = s;
    step_sum += s;
  }
  if (!job.region_step_seconds.empty()) job.step_seconds = step_sum / static_cast<double>(job.region_step_seconds.size());
  const auto commit = [&](Job& j) {
    j.rec.last_committed_round = a.round;
    j.rec.wan_bytes += c.wan_bytes;
    j.rec.inner_steps_done += steps;
    for (auto& mem : j.members)
      mem.holds_state = std::find(a.participants.begin(), a.participants.end(), mem.region) != a.participants.end();
  };
  longhaul::Status stored = Transition(job, "committing a round", commit,
                                       [&](const JobRecord& rec) { return store_->CommitRound(c, rec); });
  if (!stored.ok()) {
    // Not durable, so not committed (Transition put the job back): retry the round.
    job.attempt = std::move(a);
    RoundDecision abort{RoundOutcome::kAbort, "store_failed", "cannot store the commit: " + stored.message(), {}, {}, {}};
    return AbortAttempt(job, abort);
  }
  for (const auto& region : a.participants) {
    v1::ControlMessage msg;
    auto* v = msg.mutable_round_verdict();
    v->set_job_id(a.job_id);
    v->set_round(a.round);
    v->set_epoch(a.epoch);
    v->set_committed(true);
    v->set_reason(d.reason);
    SendToRegion(region, std::move(msg));
  }
  const double duration = Seconds(clock_.Now() - a.started);
  if (metrics_) metrics_->RoundCommitted(a.job_id, duration, c.predicted_comm_seconds, c.comm_seconds);
  spdlog::info("{}: committed round {}/{} epoch {} (loss {:.4f}, val {:.4f}, {:.1f} s, comm {:.2f} s predicted {:.2f} s)",
               a.job_id, a.round, job.rec.spec.rounds(), a.epoch, c.loss, c.val_loss, duration, c.comm_seconds,
               c.predicted_comm_seconds);
  job.failed_attempts = 0;
  job.phase_since = clock_.Now();
  job.last_hash = c.param_hash;
  job.checkpoints = {c.checkpoints.begin(), c.checkpoints.end()};
  job.checkpoints_refused.clear();
  job.last_val_loss = c.val_loss;
  job.last_predicted = c.predicted_comm_seconds;
  job.last_actual = c.comm_seconds;
  job.last_plan = a.plan;
  job.last_round_wall = duration;
  job.write_error.clear();
  if (a.round >= job.rec.spec.rounds())
    return FinishJob(job, JobState::kSucceeded, "all " + std::to_string(a.round) + " rounds committed");
  StartAttempt(job);
}

void Orchestrator::AbortAttempt(Job& job, const RoundDecision& d) {
  RoundAttempt a = std::move(*job.attempt);
  job.attempt.reset();
  spdlog::warn("{}: abort: {}", a.job_id, d.reason);
  job.last_aborted = Job::AbortedAttempt{a.round, a.epoch, {}};
  for (const auto& region : a.participants)
    if (!a.reports.count(region)) job.last_aborted->unreported.insert(region);
  if (metrics_) metrics_->RoundAborted(a.job_id, d.kind);
  // Round 1 ended with disagreeing hashes: a region's start hash may not say
  // what it holds (a bootstrap it received before an abort), so the next
  // attempt bootstraps every other region from the reference.
  if (d.kind == "hash_mismatch" && job.rec.last_committed_round == 0) job.start_hashes_disagreed = true;
  // Who is out of the next round, durable before the regions hear the abort.
  // The abort itself goes out whatever the write did: it makes nothing durable,
  // and a member the file still lists as ready is confirmed again by heartbeats.
  const auto exclude = [&](Job& j) {
    for (const auto& region : d.excluded) {
      JobMember* m = j.Member(region);
      if (!m) continue;
      // Timed out but alive: its workers may be wedged. It is assigned the job
      // afresh and joins again, bootstrapped, at a later round boundary.
      m->ForgetLaunch("excluded from round " + std::to_string(a.round) + " epoch " + std::to_string(a.epoch));
    }
    // Joining regions did not get the state if the round failed.
    for (const auto& region : a.joining)
      if (JobMember* m = j.Member(region)) m->holds_state = false;
  };
  if (!Transition(job, "recording an aborted round", exclude).ok()) {
    // A decision, not only a record: the next attempt must not take back a
    // region it just excluded because the file would not take the change.
    spdlog::warn("{}: aborting round {} without recording who is out of the next", a.job_id, a.round);
    exclude(job);
  }
  Event(job, "round_aborted", d.reason);
  for (const auto& region : a.participants) {
    v1::ControlMessage verdict;
    auto* v = verdict.mutable_round_verdict();
    v->set_job_id(a.job_id);
    v->set_round(a.round);
    v->set_epoch(a.epoch);
    v->set_committed(false);
    v->set_reason(d.reason);
    SendToRegion(region, std::move(verdict));
    v1::ControlMessage abort;
    auto* c = abort.mutable_round_command();
    c->set_job_id(a.job_id);
    c->set_round(a.round);
    c->set_epoch(a.epoch);
    c->set_kind(v1::RoundCommand::ABORT);
    c->set_reason(d.reason);
    SendToRegion(region, std::move(abort));
  }
  if (++job.failed_attempts >= options_.max_round_attempts)
    return FinishJob(job, JobState::kFailed,
                     "round " + std::to_string(a.round) + " failed " + std::to_string(job.failed_attempts) +
                         " times; last: " + d.reason);
  StartAttempt(job);
}

}  // namespace longhaul::orchestrator
