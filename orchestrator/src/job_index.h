// JobIndex: the orchestrator's jobs filed by what each event needs of them, so
// that no event walks every job (at 30,000 waiting jobs a walk per submit made
// submits O(N^2) and starved `jobs` and `status`):
//  - waiting jobs by placement class (PlacementClass: specs PlaceJob answers
//    alike), each class in id order with its last reason;
//  - placed jobs (scheduled or running: they hold regions);
//  - jobs whose end is decided but not yet written (Job::pending_finish);
//  - per submitting key: jobs not yet ended and their specs' bytes (quotas);
//  - jobs per state (gauges).
// Update(job) after any change of a job's state files it afresh (idempotent);
// the orchestrator calls it wherever a job is created, restored or transitions.
#pragma once

#include <array>
#include <map>
#include <set>
#include <string>

#include "job_runtime.h"

namespace longhaul::orchestrator {

class JobIndex {
 public:
  using Job = Orchestrator::Job;
  struct Usage {
    int active = 0;
    size_t spec_bytes = 0;
  };

  void Update(Job& job);

  // Waiting classes: class -> (job id -> job), ids ascending.
  const std::map<std::string, std::map<std::string, Job*>>& waiting() const { return waiting_; }
  // The first waiting job of `cls` after `id` (nullptr: none).
  Job* NextWaiting(const std::string& cls, const std::string& id) const;
  // Why the jobs of a class wait ("" before the first placement pass saw it);
  // SetReason returns true when it changed.
  const std::string& Reason(const std::string& cls) const;
  bool SetReason(const std::string& cls, const std::string& reason);
  const std::set<std::string>& placed() const { return placed_; }
  const std::set<std::string>& pending() const { return pending_; }
  Usage UsageOf(const std::string& owner_key) const;
  std::map<std::string, int> CountsByState() const;

 private:
  std::map<std::string, std::map<std::string, Job*>> waiting_;
  std::map<std::string, std::string> reasons_;
  std::set<std::string> placed_, pending_;
  std::map<std::string, Usage> usage_;
  std::array<int, kJobStates.size()> by_state_{};
};

}  // namespace longhaul::orchestrator
