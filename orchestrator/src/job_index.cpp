#include "job_index.h"

namespace longhaul::orchestrator {

void JobIndex::Update(Job& job) {
  Job::Filing& was = job.filing;
  if (was.filed) {
    --by_state_[static_cast<size_t>(was.state)];
    if (was.waiting) {
      auto it = waiting_.find(job.placement_class);
      if (it != waiting_.end()) {
        it->second.erase(job.rec.id);
        if (it->second.empty()) {
          waiting_.erase(it);
          reasons_.erase(job.placement_class);
        }
      }
    }
    if (was.placed) placed_.erase(job.rec.id);
    if (was.pending) pending_.erase(job.rec.id);
    if (was.counted) {
      Usage& u = usage_[job.rec.owner_key];
      --u.active;
      u.spec_bytes -= was.spec_bytes;
      if (u.active == 0) usage_.erase(job.rec.owner_key);
    }
  }
  Job::Filing now;
  now.filed = true;
  now.state = job.rec.state;
  now.waiting = job.active() && job.rec.state == JobState::kSubmitted;
  now.placed = job.active() && job.rec.state != JobState::kSubmitted;
  now.pending = job.pending_finish.has_value();
  now.counted = job.active() && !job.rec.owner_key.empty();
  now.spec_bytes = now.counted ? job.rec.spec.ByteSizeLong() : 0;
  ++by_state_[static_cast<size_t>(now.state)];
  if (now.waiting) waiting_[job.placement_class][job.rec.id] = &job;
  if (now.placed) placed_.insert(job.rec.id);
  if (now.pending) pending_.insert(job.rec.id);
  if (now.counted) {
    Usage& u = usage_[job.rec.owner_key];
    ++u.active;
    u.spec_bytes += now.spec_bytes;
  }
  was = now;
}

JobIndex::Job* JobIndex::NextWaiting(const std::string& cls, const std::string& id) const {
  auto c = waiting_.find(cls);
  if (c == waiting_.end()) return nullptr;
  auto it = c->second.upper_bound(id);
  return it == c->second.end() ? nullptr : it->second;
}

const std::string& JobIndex::Reason(const std::string& cls) const {
  static const std::string kNone;
  auto it = reasons_.find(cls);
  return it == reasons_.end() ? kNone : it->second;
}

bool JobIndex::SetReason(const std::string& cls, const std::string& reason) {
  std::string& r = reasons_[cls];
  if (r == reason) return false;
  r = reason;
  return true;
}

JobIndex::Usage JobIndex::UsageOf(const std::string& owner_key) const {
  auto it = usage_.find(owner_key);
  return it == usage_.end() ? Usage{} : it->second;
}

std::map<std::string, int> JobIndex::CountsByState() const {
  std::map<std::string, int> out;
  for (size_t s = 0; s < by_state_.size(); ++s)
    if (by_state_[s] > 0) out[std::string(JobStateName(static_cast<JobState>(s)))] = by_state_[s];
  return out;
}

}  // namespace longhaul::orchestrator
