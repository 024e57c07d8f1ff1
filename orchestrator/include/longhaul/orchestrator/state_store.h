// StateStore: the orchestrator's durable state in one SQLite file (WAL mode).
//
// Tables: jobs, job_regions, rounds (committed only) with round_regions (each
// participant's figures), checkpoints, regions, events, and meta (schema version; migrations run on open). Every state change
// is one transaction, so a SIGKILL leaves either the old or the new state. A
// committed round is a row keyed by (job, round): committing it twice fails
// instead of applying it twice. Single-threaded: owned by the control loop.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/orchestrator/job_state.h"
#include "longhaul/v1/control.pb.h"

struct sqlite3;

namespace longhaul::orchestrator {

// A region's place in a job. `holds_state` = its workers hold theta of the last
// committed round (or the initial theta before round 1).
struct JobRegionRecord {
  std::string region;
  uint32_t index = 0;
  bool ready = false;
  bool holds_state = false;
  v1::PeerEndpoint endpoint;
  // What its workers' intra-region group runs (NCCL or GLOO; unset before they are up) and why.
  v1::IntraRegion intra_region = v1::INTRA_REGION_UNSPECIFIED;
  std::string intra_region_reason;
  // The hash of the parameters its workers started from (JobReady.param_hash; "" before they are up).
  std::string start_param_hash;
};

struct JobRecord {
  std::string id;
  v1::JobSpec spec;
  JobState state = JobState::kSubmitted;
  std::string reason;
  uint64_t epoch = 0;
  uint32_t last_committed_round = 0;
  double created_at = 0, started_at = 0, finished_at = 0;
  uint64_t wan_bytes = 0;  // over committed rounds
  std::vector<JobRegionRecord> regions;
  std::string idempotency_key;  // the submitter's, "" = none (a retried submit finds this job)
  // The key that submitted the job ("" = a job from before owners were kept, or
  // a server without keys): only it or an admin key may cancel the job.
  std::string owner_key, owner_name;
  // The last output of the job's most recent failed worker, "<region> worker
  // N:\n<lines>": shown to the owner and admins only (JobStatus.worker_output).
  std::string worker_output;
  // The plan of the job's current (or next) round: the spec's, or what
  // re-planning chose (sync.adaptive); inner_steps 0 = none yet.
  v1::RoundPlan plan;
  uint64_t inner_steps_done = 0;  // job-wide inner steps of the committed rounds
  uint32_t replans = 0;           // times re-planning changed the plan
};

// One participant's figures in a committed round (its RoundReport).
struct RegionRoundStats {
  std::string region;
  uint32_t inner_steps = 0;  // 0 = not reported (an agent from before time-budgeted rounds)
  uint64_t tokens = 0;
  double compute_seconds = 0, comm_seconds = 0, wall_seconds = 0;
};

struct CommittedRound {
  std::string job_id;
  uint32_t round = 0;
  uint64_t epoch = 0;
  std::string param_hash;
  std::vector<std::string> participants;
  double loss = 0, val_loss = 0;
  uint64_t tokens = 0, wan_bytes = 0;
  double comm_seconds = 0, predicted_comm_seconds = 0, wall_seconds = 0;
  double compute_seconds = 0;  // mean over participants of the trainer's compute time
  uint32_t inner_steps = 0;    // the round's plan: H (0 = a round from before plans were kept)
  v1::Codec codec = v1::CODEC_UNSPECIFIED;  // its codec
  uint32_t overlap_steps = 0;               // and overlap (Streaming DiLoCo's tau)
  std::vector<RegionRoundStats> regions;    // by region name (empty for rounds from before schema 8)
  double committed_at = 0;
  std::vector<std::pair<std::string, std::string>> checkpoints;  // (region, path)
};

struct RegionRecord {
  std::string name;
  v1::Capacity capacity;
  std::string data_host;
  double last_seen = 0;
  std::string agent_key;       // Z85 public key the name is bound to; "" = unbound
  std::string agent_key_name;  // that key's name in the roles file
};

struct EventRecord {
  double time = 0;
  std::string job_id, kind, message;
};

// One write transaction of the store, as a write hook sees it.
struct StateWrite {
  uint64_t seq = 0;           // 1, 2, ... since the store was opened
  std::string_view kind;      // create_job, save_job, commit_round, save_region, delete_region, event
  std::string_view subject;   // the job id or region name
};

// Called before a write's COMMIT (committed = false; a non-OK status fails the
// write: it is rolled back and the status returned to the caller) and right
// after it (committed = true; the status is ignored). Fault injection for tests.
using StateWriteHook = std::function<Status(const StateWrite&, bool committed)>;

class StateStore {
 public:
  // create = false: the file must already be a longhaul state file that passes
  // SQLite's quick_check (the orchestrator without --init); kDataLoss otherwise.
  static Result<std::unique_ptr<StateStore>> Open(const std::filesystem::path& file, bool create = true);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Assigns the next id ("job-000001") and stores the job as submitted. A
  // non-empty idempotency key is unique among jobs (kAlreadyExists if taken).
  Result<std::string> CreateJob(const v1::JobSpec& spec, double now, const std::string& idempotency_key = "",
                                const std::string& owner_key = "", const std::string& owner_name = "");
  // Saves state, reason, epoch, timestamps and the region list of `job`.
  Status SaveJob(const JobRecord& job);
  // Round row, checkpoints, job progress (round, epoch, wan bytes, regions) and an
  // event in one transaction. kAlreadyExists if the round was committed before.
  Status CommitRound(const CommittedRound& round, const JobRecord& job_after);
  Result<std::vector<JobRecord>> LoadJobs();
  Result<std::optional<JobRecord>> LoadJob(const std::string& id);
  Result<std::vector<CommittedRound>> LoadRounds(const std::string& job_id);

  Status SaveRegion(const RegionRecord& region);
  Result<std::vector<RegionRecord>> LoadRegions();
  Status DeleteRegion(const std::string& name);

  Status AppendEvent(const std::string& job_id, const std::string& kind, const std::string& message, double now);
  Result<std::vector<EventRecord>> LoadEvents(const std::string& job_id, int limit);

  Result<std::string> JournalMode();
  void SetWriteHook(StateWriteHook hook) { write_hook_ = std::move(hook); }
  // On (the default): every committed write is checkpointed into the main file
  // and the WAL truncated before the write returns, so a WAL deleted, truncated
  // or with a damaged header after a crash loses nothing acknowledged. Off only
  // to measure its cost (bench_state_store).
  void SetCheckpointOnCommit(bool on) { checkpoint_on_commit_ = on; }
  int schema_version() const { return schema_version_; }

 private:
  explicit StateStore(sqlite3* db) : db_(db) {}
  Status Exec(const std::string& sql);
  Status Migrate();
  Status SaveJobTx(const JobRecord& job);
  // Ends a write transaction begun with BEGIN IMMEDIATE: the hook, COMMIT, the hook.
  Status Commit(std::string_view kind, std::string_view subject);
  Status Rollback(Status why);
  void CheckpointWal();

  sqlite3* db_;
  int schema_version_ = 0;
  uint64_t writes_ = 0;
  bool checkpoint_on_commit_ = true;
  bool checkpoint_failing_ = false;  // logged once until a checkpoint completes again
  StateWriteHook write_hook_;
};

}  // namespace longhaul::orchestrator
