#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/state_file_guard.h"
#include "longhaul/orchestrator/state_store.h"
#include "support/temp_dir.h"

using namespace longhaul;
using namespace longhaul::orchestrator;

namespace {
std::filesystem::path TempFile(const char* name) {
  static const longhaul::testing::TempDir dir("store");  // removed when the test process exits
  auto p = dir / name;
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + "-wal");
  std::filesystem::remove(p.string() + "-shm");
  return p;
}
}  // namespace

TEST_CASE("the store uses WAL and survives close and reopen", "[state_store]") {
  const auto file = TempFile("reopen.sqlite");
  std::string id;
  {
    auto store = StateStore::Open(file);
    REQUIRE(store.ok());
    CHECK((*store)->JournalMode().value() == "wal");
    auto created = (*store)->CreateJob(DefaultJobSpec(), 100.0);
    REQUIRE(created.ok());
    id = *created;
    CHECK(id == "job-000001");
    JobRecord job = *(*store)->LoadJob(id).value();
    job.state = JobState::kRunning;
    job.epoch = 3;
    job.regions = {{"eu-west", 0, true, true, {}}, {"us-east", 1, true, false, {}}};
    job.regions[0].endpoint.add_shard_endpoints("tcp://127.0.0.1:5000");
    job.regions[0].intra_region = v1::INTRA_REGION_GLOO;
    job.regions[0].intra_region_reason = "auto: not nccl, worker rank 0 sees no CUDA device";
    job.regions[0].start_param_hash = "0123456789abcdef";
    job.worker_output = "eu-west worker 0:\nTraceback: boom";
    REQUIRE((*store)->SaveJob(job).ok());
    CommittedRound r;
    r.job_id = id;
    r.round = 1;
    r.epoch = 3;
    r.param_hash = "00ff";
    r.participants = {"eu-west", "us-east"};
    r.checkpoints = {{"eu-west", "/tmp/ckpt-1.safetensors"}};
    r.compute_seconds = 1.5;
    r.inner_steps = 100;
    r.codec = v1::CODEC_INT4_BLOCK;
    r.overlap_steps = 5;
    r.regions = {{.region = "eu-west", .inner_steps = 100, .tokens = 1600, .compute_seconds = 1.5, .comm_seconds = 0.25,
                  .wall_seconds = 2},
                 {.region = "us-east", .inner_steps = 50, .tokens = 800, .compute_seconds = 1.5, .comm_seconds = 0.5,
                  .wall_seconds = 2}};
    job.last_committed_round = 1;
    job.plan.set_inner_steps(100);
    job.plan.set_codec(v1::CODEC_INT4_BLOCK);
    job.plan.set_reason("re-planned");
    job.inner_steps_done = 100;
    job.replans = 1;
    REQUIRE((*store)->CommitRound(r, job).ok());
  }
  auto store = StateStore::Open(file);
  REQUIRE(store.ok());
  CHECK((*store)->schema_version() == 10);
  auto job = (*store)->LoadJob(id).value();
  REQUIRE(job.has_value());
  CHECK(job->state == JobState::kRunning);
  CHECK(job->worker_output == "eu-west worker 0:\nTraceback: boom");
  CHECK(job->epoch == 3);
  CHECK(job->last_committed_round == 1);
  REQUIRE(job->regions.size() == 2);
  CHECK(job->regions[0].endpoint.shard_endpoints(0) == "tcp://127.0.0.1:5000");
  CHECK(job->regions[0].intra_region == v1::INTRA_REGION_GLOO);
  CHECK(job->regions[0].intra_region_reason == "auto: not nccl, worker rank 0 sees no CUDA device");
  CHECK(job->regions[1].intra_region == v1::INTRA_REGION_UNSPECIFIED);  // its workers never said
  CHECK(job->regions[0].start_param_hash == "0123456789abcdef");
  CHECK(job->regions[1].start_param_hash.empty());
  CHECK_FALSE(job->regions[1].holds_state);
  auto rounds = (*store)->LoadRounds(id).value();
  REQUIRE(rounds.size() == 1);
  CHECK(rounds[0].participants == std::vector<std::string>{"eu-west", "us-east"});
  CHECK(rounds[0].checkpoints.size() == 1);
  CHECK(rounds[0].compute_seconds == 1.5);
  CHECK(rounds[0].inner_steps == 100);
  CHECK(rounds[0].codec == v1::CODEC_INT4_BLOCK);
  CHECK(rounds[0].overlap_steps == 5);
  REQUIRE(rounds[0].regions.size() == 2);
  CHECK(rounds[0].regions[1].region == "us-east");
  CHECK(rounds[0].regions[1].inner_steps == 50);
  CHECK(rounds[0].regions[1].tokens == 800);
  CHECK(rounds[0].regions[1].comm_seconds == 0.5);
  CHECK(job->plan.inner_steps() == 100);
  CHECK(job->plan.codec() == v1::CODEC_INT4_BLOCK);
  CHECK(job->plan.reason() == "re-planned");
  CHECK(job->inner_steps_done == 100);
  CHECK(job->replans == 1);
  CHECK((*store)->CreateJob(DefaultJobSpec(), 101.0).value() == "job-000002");
}

TEST_CASE("a version-1 state file is migrated and keeps its rounds", "[state_store]") {
  const auto file = TempFile("v1.sqlite");
  std::string id;
  {
    auto store = StateStore::Open(file);
    REQUIRE(store.ok());
    id = (*store)->CreateJob(DefaultJobSpec(), 100.0).value();
    JobRecord job = *(*store)->LoadJob(id).value();
    CommittedRound r;
    r.job_id = id;
    r.round = 1;
    r.param_hash = "00ff";
    r.participants = {"eu-west"};
    job.last_committed_round = 1;
    job.regions = {{"eu-west", 0, true, true, {}}};
    REQUIRE((*store)->CommitRound(r, job).ok());
  }
  {  // turn the file back into what a version-1 binary wrote
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(file.c_str(), &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "ALTER TABLE rounds DROP COLUMN compute_seconds; ALTER TABLE regions DROP COLUMN agent_key; "
                       "ALTER TABLE regions DROP COLUMN agent_key_name; DROP INDEX jobs_by_idempotency_key; "
                       "ALTER TABLE jobs DROP COLUMN idempotency_key; ALTER TABLE jobs DROP COLUMN owner_key; "
                       "ALTER TABLE jobs DROP COLUMN owner_name; ALTER TABLE jobs DROP COLUMN worker_output; "
                       "ALTER TABLE jobs DROP COLUMN plan; ALTER TABLE jobs DROP COLUMN inner_steps_done; "
                       "ALTER TABLE jobs DROP COLUMN replans; ALTER TABLE rounds DROP COLUMN inner_steps; "
                       "ALTER TABLE rounds DROP COLUMN codec; ALTER TABLE rounds DROP COLUMN overlap_steps; "
                       "DROP TABLE round_regions; ALTER TABLE job_regions DROP COLUMN intra_region; "
                       "ALTER TABLE job_regions DROP COLUMN intra_region_reason; "
                       "ALTER TABLE job_regions DROP COLUMN start_param_hash; UPDATE meta SET value=1",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = StateStore::Open(file);
  REQUIRE(store.ok());
  CHECK((*store)->schema_version() == 10);
  const JobRecord old = *(*store)->LoadJob(id).value();
  CHECK(old.worker_output.empty());
  // Its committed round ran with the spec's H.
  CHECK(old.plan.inner_steps() == 0);
  CHECK(old.inner_steps_done == DefaultJobSpec().sync().inner_steps());
  auto rounds = (*store)->LoadRounds(id).value();
  REQUIRE(rounds.size() == 1);
  CHECK(rounds[0].param_hash == "00ff");
  CHECK(rounds[0].compute_seconds == 0);
  CHECK(rounds[0].regions.empty());  // no per-region figures before schema 8
  REQUIRE(old.regions.size() == 1);
  CHECK(old.regions[0].start_param_hash.empty());  // not known before schema 10: nothing is compared
}

TEST_CASE("a round is never committed twice", "[state_store]") {
  auto store = StateStore::Open(TempFile("twice.sqlite"));
  REQUIRE(store.ok());
  const std::string id = (*store)->CreateJob(DefaultJobSpec(), 1.0).value();
  JobRecord job = *(*store)->LoadJob(id).value();
  CommittedRound r;
  r.job_id = id;
  r.round = 1;
  r.param_hash = "aa";
  job.last_committed_round = 1;
  job.wan_bytes = 10;
  REQUIRE((*store)->CommitRound(r, job).ok());
  job.wan_bytes = 20;  // a second commit must not apply its job update either
  Status again = (*store)->CommitRound(r, job);
  CHECK(again.code() == StatusCode::kAlreadyExists);
  CHECK((*store)->LoadJob(id).value()->wan_bytes == 10);
  CHECK((*store)->LoadRounds(id).value().size() == 1);
}

TEST_CASE("events and regions persist", "[state_store]") {
  auto store = StateStore::Open(TempFile("events.sqlite"));
  REQUIRE(store.ok());
  REQUIRE((*store)->AppendEvent("job-000009", "round_aborted", "eu-west is down", 5.0).ok());
  auto events = (*store)->LoadEvents("job-000009", 10).value();
  REQUIRE(events.size() == 1);
  CHECK(events[0].message == "eu-west is down");
  v1::Capacity cap;
  cap.set_workers(4);
  REQUIRE((*store)->SaveRegion({"eu-west", cap, "127.0.0.1", 9.0}).ok());
  auto regions = (*store)->LoadRegions().value();
  REQUIRE(regions.size() == 1);
  CHECK(regions[0].capacity.workers() == 4);
}

TEST_CASE("an idempotency key names at most one job and survives reopening", "[state_store]") {
  const auto file = TempFile("idempotency.sqlite");
  {
    auto store = StateStore::Open(file);
    REQUIRE(store.ok());
    REQUIRE((*store)->CreateJob(DefaultJobSpec(), 1.0, "cli-abc").value() == "job-000001");
    auto again = (*store)->CreateJob(DefaultJobSpec(), 2.0, "cli-abc");
    CHECK_FALSE(again.ok());
    REQUIRE((*store)->CreateJob(DefaultJobSpec(), 3.0, "").ok());  // no key: never a conflict
    REQUIRE((*store)->CreateJob(DefaultJobSpec(), 4.0, "").ok());
  }
  auto store = StateStore::Open(file);
  REQUIRE(store.ok());
  auto jobs = (*store)->LoadJobs().value();
  REQUIRE(jobs.size() == 3);
  CHECK(jobs[0].idempotency_key == "cli-abc");
  CHECK(jobs[1].idempotency_key.empty());
}

TEST_CASE("the write hook sees every write before and after COMMIT and can fail it", "[state_store]") {
  auto store = StateStore::Open(TempFile("hook.sqlite"));
  REQUIRE(store.ok());
  std::vector<std::string> seen;
  bool fail_next_save = false;
  (*store)->SetWriteHook([&](const StateWrite& w, bool committed) {
    seen.push_back(std::to_string(w.seq) + " " + std::string(w.kind) + " " + std::string(w.subject) +
                   (committed ? " committed" : " before"));
    if (!committed && w.kind == "save_job" && fail_next_save) return Internal("injected: disk full");
    return Status::Ok();
  });
  const std::string id = (*store)->CreateJob(DefaultJobSpec(), 1.0).value();
  JobRecord job = *(*store)->LoadJob(id).value();
  job.state = JobState::kRunning;
  job.epoch = 7;
  fail_next_save = true;
  Status failed = (*store)->SaveJob(job);
  CHECK(failed.message() == "injected: disk full");
  CHECK((*store)->LoadJob(id).value()->epoch == 0);  // rolled back
  CHECK((*store)->LoadJob(id).value()->state == JobState::kSubmitted);
  fail_next_save = false;
  REQUIRE((*store)->SaveJob(job).ok());
  CHECK((*store)->LoadJob(id).value()->epoch == 7);
  REQUIRE((*store)->AppendEvent(id, "note", "x", 2.0).ok());
  v1::Capacity cap;
  REQUIRE((*store)->SaveRegion({"eu-west", cap, "h", 3.0}).ok());
  REQUIRE((*store)->DeleteRegion("eu-west").ok());
  CHECK(seen == std::vector<std::string>{"1 create_job job-000001 before", "1 create_job job-000001 committed",
                                         "2 save_job job-000001 before", "3 save_job job-000001 before",
                                         "3 save_job job-000001 committed", "4 event job-000001 before",
                                         "4 event job-000001 committed", "5 save_region eu-west before",
                                         "5 save_region eu-west committed", "6 delete_region eu-west before",
                                         "6 delete_region eu-west committed"});
}

TEST_CASE("an unusable state file is an error, not a crash", "[state_store]") {
  auto store = StateStore::Open("/nonexistent-dir/x/state.sqlite");
  REQUIRE_FALSE(store.ok());
  CHECK_THAT(store.status().message(), Catch::Contains("/nonexistent-dir/x/state.sqlite"));
}

namespace {

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("state file guard: a missing or empty state file needs --init", "[state]") {
  const longhaul::testing::TempDir tmp("guard");
  const auto& dir = tmp.path();
  const auto file = dir / "state.sqlite";
  auto missing = CheckStateFileBeforeOpen(file, false);
  CHECK(missing.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(missing.message(), Catch::Contains("does not exist") && Catch::Contains("--init"));
  CHECK(CheckStateFileBeforeOpen(file, true).ok());
  std::ofstream(file).close();  // truncated to 0 bytes
  auto empty = CheckStateFileBeforeOpen(file, false);
  CHECK_THAT(empty.message(), Catch::Contains("is empty (0 bytes)"));
  // A file that is not a longhaul state file is refused without --init (create = false).
  std::filesystem::remove(file);
  {
    auto other = StateStore::Open(file);  // a fresh store: has the schema
    REQUIRE(other.ok());
  }
  CHECK(StateStore::Open(file, /*create=*/false).ok());
  const auto foreign = dir / "foreign.sqlite";
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(foreign.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "CREATE TABLE t (x INTEGER)", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto refused = StateStore::Open(foreign, false);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("no longhaul schema"));
}

TEST_CASE("state file guard: one orchestrator per state file", "[state]") {
  const longhaul::testing::TempDir tmp("lock");
  const auto& dir = tmp.path();
  const auto file = dir / "state.sqlite";
  // Without --init a missing file is not created.
  auto missing = StateFileLock::Acquire(file, /*create=*/false);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("does not exist") && Catch::Contains("--init"));
  CHECK_FALSE(std::filesystem::exists(file));
  auto first = StateFileLock::Acquire(file, /*create=*/true);
  REQUIRE(first.ok());
  CHECK(std::filesystem::exists(file));
  auto second = StateFileLock::Acquire(file, false);
  REQUIRE_FALSE(second.ok());
  CHECK_THAT(second.status().message(), Catch::Contains("in use by another orchestrator (pid " + std::to_string(::getpid())));
  first->reset();
  CHECK(StateFileLock::Acquire(file, false).ok());
}

TEST_CASE("state file guard: the lock is the file's own, however it is named and whatever happens to the pid file",
          "[state]") {
  const longhaul::testing::TempDir tmp("lock-names");
  const auto& dir = tmp.path();
  const auto file = dir / "state.sqlite";
  auto held = StateFileLock::Acquire(file, /*create=*/true);
  REQUIRE(held.ok());
  // A symlink to it, a hard link to it, a path with a detour through "..".
  std::filesystem::create_symlink(file, dir / "symlinked.sqlite");
  std::filesystem::create_hard_link(file, dir / "hardlinked.sqlite");
  std::filesystem::create_directory(dir / "sub");
  for (const auto& other : {dir / "symlinked.sqlite", dir / "hardlinked.sqlite", dir / "sub" / ".." / "state.sqlite"}) {
    INFO(other);
    auto second = StateFileLock::Acquire(other, false);
    REQUIRE_FALSE(second.ok());
    CHECK_THAT(second.status().message(), Catch::Contains("in use by another orchestrator"));
  }
  // The pid file is only for the message: deleted, the lock still holds.
  REQUIRE(std::filesystem::remove(dir / "state.sqlite.lock"));
  auto after_delete = StateFileLock::Acquire(file, false);
  REQUIRE_FALSE(after_delete.ok());
  CHECK_THAT(after_delete.status().message(), Catch::Contains("pid unknown"));
}

TEST_CASE("state file guard: a WAL damaged in the middle is refused, a torn tail is not", "[state]") {
  const longhaul::testing::TempDir tmp("wal");
  const auto& dir = tmp.path();
  const auto file = dir / "state.sqlite";
  std::string wal;
  {
    auto store = StateStore::Open(file);
    REQUIRE(store.ok());
    (*store)->SetCheckpointOnCommit(false);  // a WAL of 20 writes, as SQLite alone leaves it
    v1::JobSpec spec;
    spec.set_name("j");
    for (int i = 0; i < 20; ++i) REQUIRE((*store)->CreateJob(spec, 1.0 + i).ok());
    wal = Slurp(file.string() + "-wal");  // copied while the store is open: not checkpointed yet
  }
  REQUIRE(wal.size() > 32 + 3 * (24 + 4096));
  CHECK(CheckWalFrames(wal, "wal").ok());
  const size_t frame = 24 + 4096;  // SQLite's default page size
  std::string tail = wal;
  tail[tail.size() - 100] ^= 0x5a;  // the last frame torn: what a crash mid-write leaves
  CHECK(CheckWalFrames(tail, "wal").ok());
  std::string middle = wal;
  middle[32 + frame + 24 + 10] ^= 0x5a;  // frame 2's page
  auto damaged = CheckWalFrames(middle, "wal");
  CHECK(damaged.code() == StatusCode::kDataLoss);
  CHECK_THAT(damaged.message(), Catch::Contains("frame 2 fails its checksum"));
}
