#include "longhaul/orchestrator/state_store.h"

#include <sqlite3.h>

#include <cstdio>

#include <spdlog/spdlog.h>

#include "sqlite_stmt.h"

namespace longhaul::orchestrator {
namespace {

constexpr int kBusyTimeoutMs = 5000;

constexpr int kSchemaVersion = 10;

// Migration i brings the schema from version i to i+1.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE jobs (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, spec BLOB NOT NULL, state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '', epoch INTEGER NOT NULL DEFAULT 0,
  last_committed_round INTEGER NOT NULL DEFAULT 0, wan_bytes INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL, started_at REAL NOT NULL DEFAULT 0, finished_at REAL NOT NULL DEFAULT 0);
CREATE TABLE job_regions (
  job_id TEXT NOT NULL, region TEXT NOT NULL, idx INTEGER NOT NULL, ready INTEGER NOT NULL,
  holds_state INTEGER NOT NULL, endpoint BLOB NOT NULL, PRIMARY KEY (job_id, region));
CREATE TABLE rounds (
  job_id TEXT NOT NULL, round INTEGER NOT NULL, epoch INTEGER NOT NULL, param_hash TEXT NOT NULL,
  participants TEXT NOT NULL, loss REAL, val_loss REAL, tokens INTEGER, wan_bytes INTEGER,
  comm_seconds REAL, predicted_comm_seconds REAL, wall_seconds REAL, committed_at REAL,
  PRIMARY KEY (job_id, round));
CREATE TABLE checkpoints (
  job_id TEXT NOT NULL, round INTEGER NOT NULL, region TEXT NOT NULL, path TEXT NOT NULL,
  PRIMARY KEY (job_id, round, region));
CREATE TABLE regions (
  name TEXT PRIMARY KEY, capacity BLOB NOT NULL, data_host TEXT NOT NULL, last_seen REAL NOT NULL);
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, job_id TEXT NOT NULL,
  kind TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX events_by_job ON events (job_id, id);
)sql",
    // 2: the time the trainer computed during a round (utilisation = compute / wall).
    "ALTER TABLE rounds ADD COLUMN compute_seconds REAL NOT NULL DEFAULT 0;",
    // 3: the agent key a region's name is bound to (`longhaul regions remove` releases it).
    "ALTER TABLE regions ADD COLUMN agent_key TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE regions ADD COLUMN agent_key_name TEXT NOT NULL DEFAULT '';",
    // 4: the submitter's idempotency key (a retried submit finds its job).
    "ALTER TABLE jobs ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';"
    "CREATE UNIQUE INDEX jobs_by_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key != '';",
    // 5: the key that submitted a job (only it or an admin key may cancel the job).
    "ALTER TABLE jobs ADD COLUMN owner_key TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE jobs ADD COLUMN owner_name TEXT NOT NULL DEFAULT '';",
    // 6: the last output of the job's most recent failed worker (its owner's to see).
    "ALTER TABLE jobs ADD COLUMN worker_output TEXT NOT NULL DEFAULT '';",
    // 7: round plans (sync.adaptive): the job's current plan, its inner steps so
    // far and re-plans; each committed round's inner steps and codec.
    "ALTER TABLE jobs ADD COLUMN plan BLOB NOT NULL DEFAULT x'';"
    "ALTER TABLE jobs ADD COLUMN inner_steps_done INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN replans INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE rounds ADD COLUMN inner_steps INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE rounds ADD COLUMN codec INTEGER NOT NULL DEFAULT 0;",
    // 8: each participant's figures in a committed round (time-budgeted rounds
    // run a different number of steps in each region), and each round's overlap.
    R"sql(
ALTER TABLE rounds ADD COLUMN overlap_steps INTEGER NOT NULL DEFAULT 0;
CREATE TABLE round_regions (
  job_id TEXT NOT NULL, round INTEGER NOT NULL, region TEXT NOT NULL, inner_steps INTEGER NOT NULL,
  tokens INTEGER NOT NULL, compute_seconds REAL NOT NULL, comm_seconds REAL NOT NULL, wall_seconds REAL NOT NULL,
  PRIMARY KEY (job_id, round, region));
)sql",
    // 9: the collectives each region's workers run among themselves (intra_region) and why.
    "ALTER TABLE job_regions ADD COLUMN intra_region INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE job_regions ADD COLUMN intra_region_reason TEXT NOT NULL DEFAULT '';",
    // 10: the hash of the parameters each region's workers started from (JobReady.param_hash).
    "ALTER TABLE job_regions ADD COLUMN start_param_hash TEXT NOT NULL DEFAULT '';",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion);

std::string JoinNames(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}
std::vector<std::string> SplitNames(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<StateStore>> StateStore::Open(const std::filesystem::path& file, bool create) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(file.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Unavailable("cannot open state file '" + file.string() + "': " + msg);
  }
  std::unique_ptr<StateStore> store(new StateStore(db));
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  // WAL: a commit is durable once its frames are in the log; synchronous=FULL
  // fsyncs the log on every commit so a power cut keeps committed rounds too.
  // Every committed write is then checkpointed into this file and the WAL
  // emptied before it is acknowledged (StateStore::Commit), so nothing
  // acknowledged lives only in the WAL.
  LONGHAUL_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
                               .WithContext("state file '" + file.string() + "'"));
  if (!create) {
    std::string verdict;
    {
      Stmt q(db, "PRAGMA quick_check");
      Status err;
      if (q.Step(&err)) verdict = q.Blob(0);
      if (!err.ok()) return DataLoss("state file '" + file.string() + "' is damaged: " + err.message());
    }
    if (verdict != "ok") return DataLoss("state file '" + file.string() + "' is damaged: quick_check says " + verdict.substr(0, 200));
    Stmt q(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'");
    Status err;
    if (!q.Step(&err) || q.Int(0) == 0) {
      return DataLoss("state file '" + file.string() + "' holds no longhaul schema (not a longhaul state file?); " +
                      "refusing to start without --init");
    }
  }
  Status migrated = store->Migrate();
  if (!migrated.ok()) return migrated.WithContext("state file '" + file.string() + "'");
  store->CheckpointWal();  // the schema (or its migration) too
  return store;
}

StateStore::~StateStore() { sqlite3_close(db_); }

Status StateStore::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return Internal("sqlite: " + msg);
  }
  return Status::Ok();
}

Status StateStore::Rollback(Status why) {
  (void)Exec("ROLLBACK");  // the transaction's own error is the one worth reporting
  return why;
}

Status StateStore::Commit(std::string_view kind, std::string_view subject) {
  const StateWrite w{++writes_, kind, subject};
  if (write_hook_)
    if (Status s = write_hook_(w, false); !s.ok()) return Rollback(s);
  Status s = Exec("COMMIT");
  if (!s.ok()) return Rollback(s);
  if (write_hook_) (void)write_hook_(w, true);  // documented: after COMMIT the hook cannot fail the write
  CheckpointWal();
  return Status::Ok();
}

void StateStore::CheckpointWal() {
  if (!checkpoint_on_commit_) return;
  int log_frames = 0, copied = 0;
  // The orchestrator is the file's only writer (StateFileLock), but a reader
  // (the sqlite3 shell, a backup tool) may hold the WAL: then the checkpoint
  // does not wait (no busy handler) and the write stays committed in the WAL
  // (durable: synchronous=FULL) until a later write's checkpoint gets through.
  // The caller is not told it failed (it would retry a write that happened).
  sqlite3_busy_timeout(db_, 0);
  const int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, &log_frames, &copied);
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  if (rc != SQLITE_OK && !checkpoint_failing_)
    spdlog::warn("state store: checkpoint after a committed write did not complete ({}); acknowledged writes stay "
                 "in the WAL until one does",
                 sqlite3_errmsg(db_));
  if (rc == SQLITE_OK && checkpoint_failing_) spdlog::info("state store: checkpoints complete again");
  checkpoint_failing_ = rc != SQLITE_OK;
}

Status StateStore::Migrate() {
  LONGHAUL_RETURN_IF_ERROR(Exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)"));
  int version = 0;
  {
    Stmt q(db_, "SELECT value FROM meta WHERE key='schema_version'");
    Status err;
    if (q.Step(&err)) version = static_cast<int>(q.Int(0));
    LONGHAUL_RETURN_IF_ERROR(err);
  }
  if (version > kSchemaVersion)
    return VersionMismatch("schema version " + std::to_string(version) + " is newer than this binary's " +
                           std::to_string(kSchemaVersion));
  for (int v = version; v < kSchemaVersion; ++v) {
    LONGHAUL_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Status s = Exec(kMigrations[v]);
    if (s.ok())
      s = Exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', " + std::to_string(v + 1) + ")");
    if (!s.ok()) {
      (void)Exec("ROLLBACK");
      return s.WithContext("migrating schema to version " + std::to_string(v + 1));
    }
    LONGHAUL_RETURN_IF_ERROR(Exec("COMMIT"));
  }
  schema_version_ = kSchemaVersion;
  return Status::Ok();
}

Result<std::string> StateStore::CreateJob(const v1::JobSpec& spec, double now, const std::string& idempotency_key,
                                          const std::string& owner_key, const std::string& owner_name) {
  LONGHAUL_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  // Jobs created so far, kept in meta (counting the jobs table on every submit
  // cost O(N): a third of the submit rate at 30,000 jobs); a file from before
  // the counter counts once. Jobs are never deleted, so the two agree.
  int64_t n = 0;
  for (const char* sql : {"SELECT value FROM meta WHERE key='jobs_created'", "SELECT COUNT(*) FROM jobs"}) {
    Stmt q(db_, sql);
    Status err;
    const bool found = q.Step(&err);
    if (!err.ok()) return Rollback(err);
    if (found) {
      n = q.Int(0);
      break;
    }
  }
  char id[32];
  std::snprintf(id, sizeof(id), "job-%06lld", static_cast<long long>(n + 1));
  Stmt ins(db_,
           "INSERT INTO jobs (id, name, spec, state, created_at, idempotency_key, owner_key, owner_name) "
           "VALUES (?, ?, ?, 'submitted', ?, ?, ?, ?)");
  Status s = ins.Text(1, id)
                 .Text(2, spec.name())
                 .Bind(3, spec.SerializeAsString())
                 .Bind(4, now)
                 .Text(5, idempotency_key)
                 .Text(6, owner_key)
                 .Text(7, owner_name)
                 .Run();
  if (s.ok()) {
    Stmt counter(db_, "INSERT OR REPLACE INTO meta (key, value) VALUES ('jobs_created', ?)");
    s = counter.Bind(1, static_cast<int64_t>(n + 1)).Run();
  }
  if (s.ok()) {
    Stmt ev(db_, "INSERT INTO events (time, job_id, kind, message) VALUES (?, ?, 'submitted', ?)");
    s = ev.Bind(1, now).Text(2, id).Text(3, "job '" + spec.name() + "' submitted").Run();
  }
  if (!s.ok()) return Rollback(s);
  LONGHAUL_RETURN_IF_ERROR(Commit("create_job", id));
  return std::string(id);
}

Status StateStore::SaveJobTx(const JobRecord& j) {
  Stmt up(db_,
          "UPDATE jobs SET state=?, reason=?, epoch=?, last_committed_round=?, wan_bytes=?, started_at=?, "
          "finished_at=?, worker_output=?, plan=?, inner_steps_done=?, replans=? WHERE id=?");
  LONGHAUL_RETURN_IF_ERROR(up.Text(1, std::string(JobStateName(j.state)))
                               .Text(2, j.reason)
                               .Bind(3, static_cast<int64_t>(j.epoch))
                               .Bind(4, static_cast<int64_t>(j.last_committed_round))
                               .Bind(5, static_cast<int64_t>(j.wan_bytes))
                               .Bind(6, j.started_at)
                               .Bind(7, j.finished_at)
                               .Text(8, j.worker_output)
                               .Bind(9, j.plan.SerializeAsString())
                               .Bind(10, static_cast<int64_t>(j.inner_steps_done))
                               .Bind(11, static_cast<int64_t>(j.replans))
                               .Text(12, j.id)
                               .Run());
  if (sqlite3_changes(db_) != 1) return NotFound("unknown job '" + j.id + "'");
  Stmt del(db_, "DELETE FROM job_regions WHERE job_id=?");
  LONGHAUL_RETURN_IF_ERROR(del.Text(1, j.id).Run());
  for (const auto& r : j.regions) {
    Stmt ins(db_,
             "INSERT INTO job_regions (job_id, region, idx, ready, holds_state, endpoint, intra_region, "
             "intra_region_reason, start_param_hash) VALUES (?,?,?,?,?,?,?,?,?)");
    LONGHAUL_RETURN_IF_ERROR(ins.Text(1, j.id)
                                 .Text(2, r.region)
                                 .Bind(3, static_cast<int64_t>(r.index))
                                 .Bind(4, static_cast<int64_t>(r.ready))
                                 .Bind(5, static_cast<int64_t>(r.holds_state))
                                 .Bind(6, r.endpoint.SerializeAsString())
                                 .Bind(7, static_cast<int64_t>(r.intra_region))
                                 .Text(8, r.intra_region_reason)
                                 .Text(9, r.start_param_hash)
                                 .Run());
  }
  return Status::Ok();
}

Status StateStore::SaveJob(const JobRecord& job) {
  LONGHAUL_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  if (Status s = SaveJobTx(job); !s.ok()) return Rollback(s);
  return Commit("save_job", job.id);
}

Status StateStore::CommitRound(const CommittedRound& r, const JobRecord& job_after) {
  LONGHAUL_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto fail = [&](Status s) { return Rollback(std::move(s)); };
  Stmt ins(db_,
           "INSERT INTO rounds (job_id, round, epoch, param_hash, participants, loss, val_loss, tokens, wan_bytes, "
           "comm_seconds, predicted_comm_seconds, wall_seconds, committed_at, compute_seconds, inner_steps, codec, "
           "overlap_steps) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  Status s = ins.Text(1, r.job_id)
                 .Bind(2, static_cast<int64_t>(r.round))
                 .Bind(3, static_cast<int64_t>(r.epoch))
                 .Text(4, r.param_hash)
                 .Text(5, JoinNames(r.participants))
                 .Bind(6, r.loss)
                 .Bind(7, r.val_loss)
                 .Bind(8, static_cast<int64_t>(r.tokens))
                 .Bind(9, static_cast<int64_t>(r.wan_bytes))
                 .Bind(10, r.comm_seconds)
                 .Bind(11, r.predicted_comm_seconds)
                 .Bind(12, r.wall_seconds)
                 .Bind(13, r.committed_at)
                 .Bind(14, r.compute_seconds)
                 .Bind(15, static_cast<int64_t>(r.inner_steps))
                 .Bind(16, static_cast<int64_t>(r.codec))
                 .Bind(17, static_cast<int64_t>(r.overlap_steps))
                 .Run();
  if (!s.ok()) return fail(s.code() == StatusCode::kAlreadyExists
                               ? Status(StatusCode::kAlreadyExists, "round " + std::to_string(r.round) + " of " +
                                                                        r.job_id + " is already committed")
                               : s);
  for (const auto& g : r.regions) {
    Stmt q(db_,
           "INSERT INTO round_regions (job_id, round, region, inner_steps, tokens, compute_seconds, comm_seconds, "
           "wall_seconds) VALUES (?,?,?,?,?,?,?,?)");
    s = q.Text(1, r.job_id)
            .Bind(2, static_cast<int64_t>(r.round))
            .Text(3, g.region)
            .Bind(4, static_cast<int64_t>(g.inner_steps))
            .Bind(5, static_cast<int64_t>(g.tokens))
            .Bind(6, g.compute_seconds)
            .Bind(7, g.comm_seconds)
            .Bind(8, g.wall_seconds)
            .Run();
    if (!s.ok()) return fail(s);
  }
  for (const auto& [region, path] : r.checkpoints) {
    Stmt c(db_, "INSERT OR REPLACE INTO checkpoints (job_id, round, region, path) VALUES (?,?,?,?)");
    s = c.Text(1, r.job_id).Bind(2, static_cast<int64_t>(r.round)).Text(3, region).Text(4, path).Run();
    if (!s.ok()) return fail(s);
  }
  s = SaveJobTx(job_after);
  if (!s.ok()) return fail(s);
  Stmt ev(db_, "INSERT INTO events (time, job_id, kind, message) VALUES (?, ?, 'round_committed', ?)");
  s = ev.Bind(1, r.committed_at)
          .Text(2, r.job_id)
          .Text(3, "round " + std::to_string(r.round) + " epoch " + std::to_string(r.epoch) + " committed by " +
                       JoinNames(r.participants) + " hash " + r.param_hash)
          .Run();
  if (!s.ok()) return fail(s);
  return Commit("commit_round", r.job_id);
}

Result<std::vector<JobRecord>> StateStore::LoadJobs() {
  std::vector<JobRecord> jobs;
  Stmt q(db_,
         "SELECT id, spec, state, reason, epoch, last_committed_round, wan_bytes, created_at, started_at, finished_at, "
         "idempotency_key, owner_key, owner_name, worker_output, plan, inner_steps_done, replans FROM jobs ORDER BY id");
  Status err;
  while (q.Step(&err)) {
    JobRecord j;
    j.id = q.Blob(0);
    if (!j.spec.ParseFromString(q.Blob(1))) return DataLoss("job " + j.id + ": stored spec does not parse");
    auto state = ParseJobState(q.Blob(2));
    if (!state) return DataLoss("job " + j.id + ": unknown state '" + q.Blob(2).substr(0, 32) + "' in the state file");
    j.state = *state;
    j.reason = q.Blob(3);
    j.epoch = static_cast<uint64_t>(q.Int(4));
    j.last_committed_round = static_cast<uint32_t>(q.Int(5));
    j.wan_bytes = static_cast<uint64_t>(q.Int(6));
    j.created_at = q.Real(7);
    j.started_at = q.Real(8);
    j.finished_at = q.Real(9);
    j.idempotency_key = q.Blob(10);
    j.owner_key = q.Blob(11);
    j.owner_name = q.Blob(12);
    j.worker_output = q.Blob(13);
    if (!j.plan.ParseFromString(q.Blob(14))) return DataLoss("job " + j.id + ": stored round plan does not parse");
    j.inner_steps_done = static_cast<uint64_t>(q.Int(15));
    j.replans = static_cast<uint32_t>(q.Int(16));
    // A job from before plans were kept ran every round with the spec's H.
    if (j.plan.inner_steps() == 0 && j.inner_steps_done == 0)
      j.inner_steps_done = uint64_t{j.last_committed_round} * j.spec.sync().inner_steps();
    jobs.push_back(std::move(j));
  }
  LONGHAUL_RETURN_IF_ERROR(err);
  for (auto& j : jobs) {
    Stmt r(db_,
           "SELECT region, idx, ready, holds_state, endpoint, intra_region, intra_region_reason, start_param_hash "
           "FROM job_regions "
           "WHERE job_id=? ORDER BY idx");
    r.Text(1, j.id);
    while (r.Step(&err)) {
      JobRegionRecord jr;
      jr.region = r.Blob(0);
      jr.index = static_cast<uint32_t>(r.Int(1));
      jr.ready = r.Int(2) != 0;
      jr.holds_state = r.Int(3) != 0;
      if (!jr.endpoint.ParseFromString(r.Blob(4))) return DataLoss("job " + j.id + ": stored endpoint does not parse");
      const int64_t intra_region = r.Int(5);
      if (!v1::IntraRegion_IsValid(static_cast<int>(intra_region)))
        return DataLoss("job " + j.id + ": region " + jr.region + " has unknown intra_region " +
                        std::to_string(intra_region));
      jr.intra_region = static_cast<v1::IntraRegion>(intra_region);
      jr.intra_region_reason = r.Blob(6);
      jr.start_param_hash = r.Blob(7);
      j.regions.push_back(std::move(jr));
    }
    LONGHAUL_RETURN_IF_ERROR(err);
  }
  return jobs;
}

Result<std::optional<JobRecord>> StateStore::LoadJob(const std::string& id) {
  LONGHAUL_ASSIGN_OR_RETURN(auto jobs, LoadJobs());
  for (auto& j : jobs)
    if (j.id == id) return std::optional<JobRecord>(std::move(j));
  return std::optional<JobRecord>();
}

Result<std::vector<CommittedRound>> StateStore::LoadRounds(const std::string& job_id) {
  std::vector<CommittedRound> rounds;
  Stmt q(db_,
         "SELECT round, epoch, param_hash, participants, loss, val_loss, tokens, wan_bytes, comm_seconds, "
         "predicted_comm_seconds, wall_seconds, committed_at, compute_seconds, inner_steps, codec, overlap_steps "
         "FROM rounds "
         "WHERE job_id=? ORDER BY round");
  q.Text(1, job_id);
  Status err;
  while (q.Step(&err)) {
    CommittedRound r;
    r.job_id = job_id;
    r.round = static_cast<uint32_t>(q.Int(0));
    r.epoch = static_cast<uint64_t>(q.Int(1));
    r.param_hash = q.Blob(2);
    r.participants = SplitNames(q.Blob(3));
    r.loss = q.Real(4);
    r.val_loss = q.Real(5);
    r.tokens = static_cast<uint64_t>(q.Int(6));
    r.wan_bytes = static_cast<uint64_t>(q.Int(7));
    r.comm_seconds = q.Real(8);
    r.predicted_comm_seconds = q.Real(9);
    r.wall_seconds = q.Real(10);
    r.committed_at = q.Real(11);
    r.compute_seconds = q.Real(12);
    r.inner_steps = static_cast<uint32_t>(q.Int(13));
    r.codec = static_cast<v1::Codec>(q.Int(14));
    r.overlap_steps = static_cast<uint32_t>(q.Int(15));
    rounds.push_back(std::move(r));
  }
  LONGHAUL_RETURN_IF_ERROR(err);
  for (auto& r : rounds) {
    Stmt c(db_, "SELECT region, path FROM checkpoints WHERE job_id=? AND round=? ORDER BY region");
    c.Text(1, job_id).Bind(2, static_cast<int64_t>(r.round));
    while (c.Step(&err)) r.checkpoints.emplace_back(c.Blob(0), c.Blob(1));
    LONGHAUL_RETURN_IF_ERROR(err);
    Stmt g(db_,
           "SELECT region, inner_steps, tokens, compute_seconds, comm_seconds, wall_seconds FROM round_regions "
           "WHERE job_id=? AND round=? ORDER BY region");
    g.Text(1, job_id).Bind(2, static_cast<int64_t>(r.round));
    while (g.Step(&err)) {
      r.regions.push_back({.region = g.Blob(0),
                           .inner_steps = static_cast<uint32_t>(g.Int(1)),
                           .tokens = static_cast<uint64_t>(g.Int(2)),
                           .compute_seconds = g.Real(3),
                           .comm_seconds = g.Real(4),
                           .wall_seconds = g.Real(5)});
    }
    LONGHAUL_RETURN_IF_ERROR(err);
  }
  return rounds;
}

Status StateStore::SaveRegion(const RegionRecord& region) {
  LONGHAUL_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Stmt q(db_,
         "INSERT OR REPLACE INTO regions (name, capacity, data_host, last_seen, agent_key, agent_key_name) "
         "VALUES (?,?,?,?,?,?)");
  Status s = q.Text(1, region.name)
                 .Bind(2, region.capacity.SerializeAsString())
                 .Text(3, region.data_host)
                 .Bind(4, region.last_seen)
                 .Text(5, region.agent_key)
                 .Text(6, region.agent_key_name)
                 .Run();
  if (!s.ok()) return Rollback(s);
  return Commit("save_region", region.name);
}

Status StateStore::DeleteRegion(const std::string& name) {
  LONGHAUL_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Stmt q(db_, "DELETE FROM regions WHERE name=?");
  if (Status s = q.Text(1, name).Run(); !s.ok()) return Rollback(s);
  return Commit("delete_region", name);
}

Result<std::vector<RegionRecord>> StateStore::LoadRegions() {
  std::vector<RegionRecord> out;
  Stmt q(db_, "SELECT name, capacity, data_host, last_seen, agent_key, agent_key_name FROM regions ORDER BY name");
  Status err;
  while (q.Step(&err)) {
    RegionRecord r;
    r.name = q.Blob(0);
    (void)r.capacity.ParseFromString(q.Blob(1));
    r.data_host = q.Blob(2);
    r.last_seen = q.Real(3);
    r.agent_key = q.Blob(4);
    r.agent_key_name = q.Blob(5);
    out.push_back(std::move(r));
  }
  LONGHAUL_RETURN_IF_ERROR(err);
  return out;
}

Status StateStore::AppendEvent(const std::string& job_id, const std::string& kind, const std::string& message,
                               double now) {
  LONGHAUL_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Stmt q(db_, "INSERT INTO events (time, job_id, kind, message) VALUES (?,?,?,?)");
  if (Status s = q.Bind(1, now).Text(2, job_id).Text(3, kind).Text(4, message).Run(); !s.ok()) return Rollback(s);
  return Commit("event", job_id);
}

Result<std::vector<EventRecord>> StateStore::LoadEvents(const std::string& job_id, int limit) {
  std::vector<EventRecord> out;
  Stmt q(db_, "SELECT time, job_id, kind, message FROM events WHERE job_id=? ORDER BY id DESC LIMIT ?");
  q.Text(1, job_id).Bind(2, static_cast<int64_t>(limit));
  Status err;
  while (q.Step(&err)) out.push_back({q.Real(0), q.Blob(1), q.Blob(2), q.Blob(3)});
  LONGHAUL_RETURN_IF_ERROR(err);
  return std::vector<EventRecord>(out.rbegin(), out.rend());
}

Result<std::string> StateStore::JournalMode() {
  Stmt q(db_, "PRAGMA journal_mode");
  Status err;
  if (q.Step(&err)) return q.Blob(0);
  LONGHAUL_RETURN_IF_ERROR(err);
  return Internal("PRAGMA journal_mode returned nothing");
}

}  // namespace longhaul::orchestrator
