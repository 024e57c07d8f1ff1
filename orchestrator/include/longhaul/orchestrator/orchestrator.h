// Orchestrator: the control plane's state machine, without sockets.
//
// It consumes control messages (Handle) and the passage of time (Tick) and
// emits control messages through a Send callback; ControlServer wires it to a
// ZeroMQ ROUTER, tests wire it to fakes. Job life: submitted -> scheduled ->
// running -> succeeded | failed | cancelled. Rounds: START to the participants
// (epoch e), collect reports, commit when every parameter hash agrees, else
// abort, bump the epoch, retry with the survivors; returning regions join at a
// round boundary. Every state change is written to the StateStore before the
// messages that announce it are sent, so a restart never un-commits a round.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "longhaul/common/clock.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/orchestrator/metrics.h"
#include "longhaul/orchestrator/region_registry.h"
#include "longhaul/orchestrator/round_coordinator.h"
#include "longhaul/orchestrator/scheduler.h"
#include "longhaul/orchestrator/state_store.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator {

class JobIndex;

struct OrchestratorOptions {
  Timeouts timeouts;                    // heartbeat_interval, heartbeat_misses, round, job_idle
  std::filesystem::path checkpoint_dir; // RoundCommand.checkpoint_dir = <dir>/<job id>
  int max_round_attempts = 5;           // failed attempts of one round before the job fails
  // Per submitting key (a server without keys has no users to tell apart): its
  // jobs not yet ended, and the bytes of their specs.
  int max_active_jobs_per_key = 100;
  size_t max_active_spec_bytes_per_key = size_t{16} << 20;
  ScheduleOptions schedule;
};

// Sends one message to the peer with this ZeroMQ routing identity.
using SendFn = std::function<void(const std::string& identity, const v1::ControlMessage& msg)>;

class Orchestrator {
 public:
  // Restores jobs and regions from the store; running jobs resume at the last
  // committed round once their regions are back.
  static Result<std::unique_ptr<Orchestrator>> Create(StateStore* store, const Clock& clock,
                                                      OrchestratorOptions options, OrchestratorMetrics* metrics,
                                                      SendFn send);
  ~Orchestrator();

  // One message from `identity`, which came with CURVE key `key` (empty when
  // --insecure). Never throws; bad messages are answered with an Error or
  // dropped, with the reason logged and counted.
  void Handle(const std::string& identity, const v1::ControlMessage& msg, const PeerKey& key = {});
  // Heartbeat sweep, placement, round deadlines. Call at least every heartbeat interval.
  void Tick();

  // For tests and status: a job's status as the CLI sees it.
  // What every user sees of a job.
  Result<v1::JobStatus> JobStatusOf(const std::string& job_id) const;
  // And the job's workers' output when `caller` manages the job (ManagesJob).
  Result<v1::JobStatus> JobStatusOf(const std::string& job_id, const PeerKey& caller) const;
  const RegionRegistry& registry() const { return registry_; }

  struct Job;  // per-job runtime state (src/job_runtime.h)

 private:
  Orchestrator(StateStore* store, const Clock& clock, OrchestratorOptions options, OrchestratorMetrics* metrics,
               SendFn send);
  Status Restore();

  // Dispatch (orchestrator.cpp).
  void HandleRegister(const std::string& identity, const v1::ControlMessage& msg, const PeerKey& key);
  void HandleRemoveRegion(const std::string& identity, const v1::ControlMessage& msg);
  void HandleHeartbeat(const std::string& identity, const v1::ControlMessage& msg);
  void HandleSubmit(const std::string& identity, const v1::ControlMessage& msg, const PeerKey& key);
  // The submitting key's limits (OrchestratorOptions), with the new spec.
  Status CheckQuota(const PeerKey& owner, const v1::JobSpec& spec) const;
  void HandleCancel(const std::string& identity, const v1::ControlMessage& msg, const PeerKey& key);
  void HandleListJobs(const std::string& identity, const v1::ControlMessage& msg);
  void HandleLinkReport(const std::string& identity, const v1::ControlMessage& msg);
  void HandleJobFacts(const std::string& identity, const v1::ControlMessage& msg);
  bool FromRegistered(const std::string& identity, const std::string& region, const char* what);
  void Reply(const std::string& identity, const v1::ControlMessage& request, v1::ControlMessage reply);
  void ReplyError(const std::string& identity, const v1::ControlMessage& request, const longhaul::Status& status);
  void SendToRegion(const std::string& region, v1::ControlMessage msg);
  void Reject(const std::string& why, const std::string& detail);
  void UpdateGauges();

  // Job lifecycle (job_lifecycle.cpp).
  void PlaceWaitingJobs();
  void SendAssignments(Job& job);
  void HandleJobReady(const std::string& identity, const v1::ControlMessage& msg);
  void HandleJobRejected(const std::string& identity, const v1::ControlMessage& msg);
  void ObserveHeartbeat(const std::string& region, const v1::Heartbeat& hb);
  void RegionWentDown(const std::string& region);
  // The region's agent registered from a new process: every launch the old one
  // had is gone, so each job assigned to it is assigned again at once (not
  // after the heartbeats without the job, nor, while a job starts, the round
  // timeout: the restart falls inside the heartbeat-miss window).
  void RegionRestarted(const std::string& region);
  // The same agent on a new connection: an assignment it has not answered is
  // sent again (the last may have gone to the connection it dropped; the agent
  // answers a repeated one without launching anything).
  void RegionReconnected(const std::string& region);
  // Durable before announced; if the write fails the job keeps its state and
  // the outcome is pending (Job::pending_finish) until Tick can write it.
  void FinishJob(Job& job, JobState state, const std::string& reason);
  void CheckScheduledJob(Job& job);
  void ReleaseScheduledJob(Job& job, const std::string& why);
  std::map<std::string, std::string> RegionAssignments() const;
  // Scheduled and running jobs (the only ones with regions), in id order.
  std::vector<Job*> PlacedJobs();
  std::vector<Job*> JobsNamed(const std::set<std::string>& ids);
  // The one durable-mutation path: applies `change` to the job, writes the
  // result (the job record by default; `write` for a write that stores more in
  // the same transaction, e.g. a round's commit) and keeps it only if the write
  // succeeded. A failed write puts the job back as it was, so nothing is
  // announced from a state the file does not hold and the transition is tried
  // again from the same place (Tick, a re-sent message, the user); the failure
  // is logged, counted and shown by `status`.
  //
  // Announcements follow the write, with one exception: an aborted round's
  // verdict and ABORT go out whatever the write of who is out did, because they
  // make nothing durable (the round is applied nowhere either way). Two
  // in-memory decisions also stand when their write
  // fails, because acting on the old state would be wrong whatever the file
  // says: a region excluded from an aborted round stays out of the next
  // attempt, and a region whose agent restarted is assigned the job again (a
  // member the file still lists as ready is confirmed by heartbeats after an
  // orchestrator restart, or assigned again).
  longhaul::Status Transition(Job& job, std::string_view what, const std::function<void(Job&)>& change,
                              const std::function<longhaul::Status(const JobRecord&)>& write = {});
  // job.rec.regions from job.members (what the store keeps of them).
  void RecordMembers(Job& job);
  void NoteWriteFailure(Job& job, std::string_view what, const longhaul::Status& s);
  void Event(const Job& job, const std::string& kind, const std::string& message);

  // Rounds (job_rounds.cpp).
  void DriveRunningJob(Job& job);
  void StartAttempt(Job& job);
  // No region holds the last committed parameters: one restores them from its
  // own checkpoint of that round (ChooseCheckpointSource). True while such a
  // restore is under way or was just begun.
  bool RestoreFromCheckpoint(Job& job, const std::vector<JobMemberView>& views);
  void HandleRoundReport(const std::string& identity, const v1::ControlMessage& msg);
  // True when `r` is a failure of the job's last aborted attempt from a region
  // that had not reported: its reason and worker output are recorded.
  bool RecordLateFailure(Job& job, const v1::RoundReport& r);
  void DecideAttempt(Job& job);
  void CommitAttempt(Job& job, const RoundDecision& decision);
  void AbortAttempt(Job& job, const RoundDecision& decision);
  std::set<std::string> UnavailableMembers(const Job& job) const;

  // Status (job_status.cpp).
  v1::JobStatus BuildStatus(const Job& job) const;

  StateStore* store_;
  const Clock& clock_;
  OrchestratorOptions options_;
  OrchestratorMetrics* metrics_;
  SendFn send_;
  RegionRegistry registry_;
  LinkTable links_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::unique_ptr<JobIndex> index_;  // jobs_ filed by state, placement class and owner (src/job_index.h)
  std::map<std::string, std::string> by_idempotency_key_;  // submitter's key -> job id
  Clock::TimePoint started_at_;
};

}  // namespace longhaul::orchestrator
