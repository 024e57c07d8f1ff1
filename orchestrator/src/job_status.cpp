// JobStatus as `longhaul status` shows it: progress per region, stall diagnosis.
#include <algorithm>
#include <chrono>

#include "job_index.h"
#include "job_runtime.h"
#include "longhaul/orchestrator/authorization.h"

namespace longhaul::orchestrator {

Result<v1::JobStatus> Orchestrator::JobStatusOf(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return NotFound("unknown job '" + job_id + "'");
  return BuildStatus(*it->second);
}

Result<v1::JobStatus> Orchestrator::JobStatusOf(const std::string& job_id, const PeerKey& caller) const {
  LONGHAUL_ASSIGN_OR_RETURN(v1::JobStatus s, JobStatusOf(job_id));
  const JobRecord& rec = jobs_.at(job_id)->rec;
  if (ManagesJob({rec.owner_key, rec.owner_name}, caller)) s.set_worker_output(rec.worker_output);
  return s;
}

v1::JobStatus Orchestrator::BuildStatus(const Job& job) const {
  v1::JobStatus s;
  const auto& rec = job.rec;
  s.set_job_id(rec.id);
  s.set_name(rec.spec.name());
  s.set_state(std::string(JobStateName(rec.state)));
  if (!job.write_error.empty())
    s.set_reason(job.write_error);
  else if (rec.state == JobState::kSubmitted && !index_->Reason(job.placement_class).empty())
    s.set_reason(index_->Reason(job.placement_class));
  else if (rec.state == JobState::kRunning || rec.state == JobState::kSubmitted)
    s.set_reason(job.waiting_reason.empty() ? rec.reason : job.waiting_reason);
  else
    s.set_reason(rec.reason);
  s.set_round(rec.last_committed_round);
  s.set_total_rounds(rec.spec.rounds());
  s.set_epoch(rec.epoch);
  s.set_wan_bytes(rec.wan_bytes);
  const double end = rec.finished_at > 0 ? rec.finished_at : clock_.UnixSeconds();
  s.set_wall_seconds(rec.started_at > 0 ? std::max(0.0, end - rec.started_at) : 0);
  s.set_val_loss(job.last_val_loss);
  s.set_loss_floor(job.loss_floor);
  *s.mutable_spec() = rec.spec;
  s.set_predicted_comm_seconds(job.last_predicted);
  s.set_actual_comm_seconds(job.last_actual);
  s.set_param_hash(job.last_hash);
  *s.mutable_plan() = rec.plan;
  s.set_replans(rec.replans);
  const uint32_t left = rec.spec.rounds() > rec.last_committed_round ? rec.spec.rounds() - rec.last_committed_round : 0;
  const double per_round = rec.last_committed_round > 0 && s.wall_seconds() > 0
                               ? s.wall_seconds() / rec.last_committed_round
                               : job.last_round_wall;
  std::vector<std::string> not_reported;
  if (job.attempt)
    for (const auto& p : job.attempt->participants)
      if (!job.attempt->reports.count(p)) not_reported.push_back(p);
  for (const auto& m : job.members) {
    auto* p = s.add_regions();
    p->set_region(m.region);
    const bool up = registry_.IsUp(m.region);
    const bool in_round = job.attempt && std::find(job.attempt->participants.begin(), job.attempt->participants.end(),
                                                   m.region) != job.attempt->participants.end();
    std::string state;
    if (!job.active()) state = JobStateName(rec.state);
    else if (!up) state = "down";
    else if (!m.ready) state = m.assignment_sent ? "starting" : "waiting";
    else if (in_round) state = job.attempt->reports.count(m.region) ? "reported" : "training";
    else state = m.holds_state ? "idle" : "joining";
    p->set_state(state);
    p->set_intra_region(m.intra_region);
    p->set_intra_region_reason(m.intra_region_reason);
    p->set_round(m.last_report ? m.last_report->round() : rec.last_committed_round);
    if (m.last_report) {
      p->set_loss(m.last_report->loss());
      p->set_val_loss(m.last_report->val_loss());
      if (m.last_report->wall_seconds() > 0)
        p->set_tokens_per_second(static_cast<double>(m.last_report->tokens()) / m.last_report->wall_seconds());
    }
    if (job.active()) p->set_eta_seconds(per_round * left);
    if (in_round && job.attempt->reports.count(m.region) && !not_reported.empty()) {
      std::string w;
      for (const auto& n : not_reported) w += (w.empty() ? "" : ", ") + n;
      const double since = std::chrono::duration<double>(clock_.Now() - job.attempt->started).count();
      p->set_waiting_on(w + " (round started " + std::to_string(static_cast<int>(since)) + " s ago)");
    } else if (!m.detail.empty()) {
      p->set_waiting_on(m.detail);
    }
  }
  return s;
}

}  // namespace longhaul::orchestrator
