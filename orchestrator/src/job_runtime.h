// Per-job runtime state of the Orchestrator (not part of the public API).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "longhaul/common/printable_text.h"
#include "longhaul/orchestrator/orchestrator.h"

namespace longhaul::orchestrator {

struct JobMember {
  std::string region;
  uint32_t index = 0;
  bool ready = false;          // JobReady received, endpoint known
  bool holds_state = false;    // holds theta of the last committed round
  bool assignment_sent = false;
  bool confirmed = false;      // seen alive and running this job since the orchestrator started
  int heartbeats_without_job = 0;
  Clock::TimePoint assigned_at{};
  v1::PeerEndpoint endpoint;
  // What its workers' intra-region group runs and why (from JobReady).
  v1::IntraRegion intra_region = v1::INTRA_REGION_UNSPECIFIED;
  std::string intra_region_reason;
  std::string start_param_hash;  // of the parameters its workers started from (from JobReady)
  std::string detail;
  std::optional<v1::RoundReport> last_report;
  std::string restore_from;    // the checkpoint its next assignment restores ("" = none; not stored)

  // Its launch is gone or no longer trusted (lost, down, restarted, excluded
  // from a round): not ready, holding nothing, to be assigned afresh.
  void ForgetLaunch(std::string why) {
    ready = holds_state = assignment_sent = confirmed = false;
    heartbeats_without_job = 0;
    intra_region = v1::INTRA_REGION_UNSPECIFIED;
    intra_region_reason.clear();
    start_param_hash.clear();
    detail = std::move(why);
  }
};

struct Orchestrator::Job {
  JobRecord rec;
  std::vector<JobMember> members;
  std::optional<RoundAttempt> attempt;
  int failed_attempts = 0;           // of the current round
  // Before the first commit (StartAttempt): the last start_parameters_differ
  // said, and whether round 1 already failed on disagreeing hashes.
  std::string start_parameters_said;
  bool start_hashes_disagreed = false;
  // The last aborted attempt and its participants that had not reported: a
  // failure report of theirs that arrives after the abort (it lost the race
  // with the round's deadline) is still recorded, once (RecordLateFailure).
  struct AbortedAttempt {
    uint32_t round = 0;
    uint64_t epoch = 0;
    std::set<std::string> unreported;
  };
  std::optional<AbortedAttempt> last_aborted;

  // A region's failure brought its workers' output: kept (printable, its tail)
  // for the job's owner, saved with the job's next change.
  void KeepWorkerOutput(const std::string& region, const v1::Error& error) {
    if (!error.worker_output().empty())
      rec.worker_output = region + " " + PrintableTail(error.worker_output(), kMaxWorkerOutputBytes);
  }
  Clock::TimePoint phase_since{};    // entered scheduled / last commit / paused
  Clock::TimePoint restored_at{};
  bool restored = false;             // loaded from the store, regions not all confirmed yet
  std::string waiting_reason;
  uint64_t payload_bytes = 0;        // one region's compressed exchange of the whole vector
  double step_seconds = 0;           // compute per inner step in the last committed round (0 = none yet)
  std::map<std::string, double> region_step_seconds;  // the same, per region that took part
  std::map<std::string, double> region_rates;  // WAN bytes / comm seconds of each region's last report
  // Re-plans in a row that found a more synchronous plan well above the target
  // (sync.adaptive goes back to it after a few; not kept over a restart).
  uint32_t replan_return_streak = 0;
  double loss_floor = 0;
  double last_predicted = 0, last_actual = 0, last_val_loss = 0, last_round_wall = 0;
  v1::RoundPlan last_plan;           // the plan of the last committed round (since the orchestrator started)
  std::string last_hash;
  // Each region's checkpoint of the last committed round (region -> path; a
  // region can read only its own), and the regions whose checkpoint of it was
  // refused (ChooseCheckpointSource skips them).
  std::map<std::string, std::string> checkpoints;
  std::set<std::string> checkpoints_refused;
  std::string write_error;           // the last failed state write, until one succeeds
  struct PendingFinish {
    JobState state;
    std::string reason;
  };
  std::optional<PendingFinish> pending_finish;  // decided, but not yet in the state file
  std::string placement_class;       // PlacementClass(rec.spec): set once, the spec never changes
  // Where JobIndex filed the job last (so it can take it out again).
  struct Filing {
    bool filed = false, waiting = false, placed = false, pending = false, counted = false;
    JobState state = JobState::kSubmitted;
    size_t spec_bytes = 0;
  };
  Filing filing;

  JobMember* Member(const std::string& region) {
    for (auto& m : members)
      if (m.region == region) return &m;
    return nullptr;
  }
  bool active() const { return !IsTerminal(rec.state); }
};

}  // namespace longhaul::orchestrator
