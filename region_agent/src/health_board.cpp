#include "longhaul/region_agent/health_board.h"

namespace longhaul::region_agent {

void HealthBoard::MarkUnhealthy(std::string detail, Duration hold) {
  std::lock_guard lock(mu_);
  detail_ = std::move(detail);
  unhealthy_until_ = clock_.Now() + hold;
}

void HealthBoard::ClearUnhealthy() {
  std::lock_guard lock(mu_);
  detail_.clear();
  unhealthy_until_ = {};
}

void HealthBoard::SetRunningJobs(std::vector<std::string> jobs) {
  std::lock_guard lock(mu_);
  running_jobs_ = std::move(jobs);
}

HealthSnapshot HealthBoard::Snapshot() const {
  std::lock_guard lock(mu_);
  HealthSnapshot s;
  s.healthy = clock_.Now() >= unhealthy_until_;
  if (!s.healthy) s.detail = detail_;
  s.running_jobs = running_jobs_;
  return s;
}

}  // namespace longhaul::region_agent
