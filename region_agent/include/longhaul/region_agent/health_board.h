// HealthBoard: what the agent's heartbeat says, shared between the job
// controller (which writes it when a worker crashes or a job starts/ends) and
// the orchestrator session's heartbeat thread (which reads it). A crash keeps
// the region unhealthy for a hold time, or until the next accepted assignment.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "longhaul/common/clock.h"
#include "longhaul/common/timeouts.h"

namespace longhaul::region_agent {

struct HealthSnapshot {
  bool healthy = true;
  std::string detail;
  std::vector<std::string> running_jobs;
};

class HealthBoard {
 public:
  explicit HealthBoard(const Clock& clock = SystemClock::Instance()) : clock_(clock) {}

  void MarkUnhealthy(std::string detail, Duration hold);
  void ClearUnhealthy();
  void SetRunningJobs(std::vector<std::string> jobs);
  HealthSnapshot Snapshot() const;

 private:
  const Clock& clock_;
  mutable std::mutex mu_;
  std::string detail_;
  Clock::TimePoint unhealthy_until_{};
  std::vector<std::string> running_jobs_;
};

}  // namespace longhaul::region_agent
