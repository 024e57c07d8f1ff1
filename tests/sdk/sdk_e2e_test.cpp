// The worker SDK end to end: the user's own programs as the workers of real
// agents (and linkem links) under a real orchestrator.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fstream>
#include <cstring>
#include <regex>
#include <set>
#include <sstream>

#include "real_cluster.h"

using namespace longhaul;
using namespace longhaul::testing;
using namespace std::chrono_literals;

namespace {

const std::string kBin = LONGHAUL_BIN_DIR;
const std::string kSource = LONGHAUL_SOURCE_DIR;
const std::string kPython = LONGHAUL_PYTHON;

// GCC 12 at -O3 reports a spurious -Wrestrict inside protobuf's map insert here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
// Two regions' worth of the cluster's spec, with the user's program as the worker.
v1::JobSpec CommandSpec(const RealCluster& c, std::vector<std::string> argv, uint32_t rounds, uint32_t h,
                        uint32_t regions = 2) {
  v1::JobSpec s = c.Spec(rounds, h);
  s.clear_model_preset();
  s.clear_regions();
  for (uint32_t i = 0; i < regions; ++i) s.add_regions(kClusterRegions[i]);
  s.set_region_count(regions);
  s.set_min_regions(std::min<uint32_t>(2, regions));
  auto* cmd = s.mutable_worker()->mutable_command();
  for (const auto& a : argv) *cmd->add_argv() = a;
  (*cmd->mutable_env())["OMP_NUM_THREADS"] = "1";
  return s;
}
#pragma GCC diagnostic pop

std::vector<std::string> Hashes(const RealCluster& c, const std::string& job) {
  std::vector<std::string> out;
  for (const auto& r : c.Rounds(job)) out.push_back(r.param_hash);
  return out;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The hashes the workers of the first two regions logged per round ("round R epoch E: hash H").
std::vector<std::string> LoggedHashes(const RealCluster& c, const std::string& job) {
  std::vector<std::string> out;
  for (int i = 0; i < 2; ++i) {
    std::istringstream log(ReadFile(c.dir / kClusterRegions[i] / job / "worker-0.log"));
    for (std::string line; std::getline(log, line);) {
      const auto at = line.find(": hash ");
      if (line.rfind("round ", 0) == 0 && at != std::string::npos) out.push_back(line.substr(at + 7, 16));
    }
  }
  return out;
}

// The example's job: the character-level transformer on a text file, small.
v1::JobSpec ExampleSpec(const RealCluster& c, uint32_t rounds, uint32_t h) {
  v1::JobSpec s = CommandSpec(c, {kPython, kSource + "/examples/pytorch/train.py", "--context", "32", "--d-model", "48",
                                  "--layers", "1", "--heads", "2"},
                              rounds, h, 3);
  s.mutable_worker()->mutable_command()->set_working_dir(kSource + "/examples/pytorch");
  s.mutable_data()->mutable_text_file()->set_path("/usr/share/common-licenses/GPL-3");
  s.mutable_data()->mutable_text_file()->set_validation_fraction(0.05);
  s.mutable_inner()->set_lr(3e-3);
  s.mutable_inner()->set_batch_size(8);
  return s;
}

}  // namespace

TEST_CASE("sdk: the built-in trainer through the C ABI commits the same hashes as longhaul-worker", "[sdk]") {
  RealCluster c("sdk-twin");
  c.StartOrchestrator();
  for (int i = 0; i < 2; ++i) c.StartAgent(kClusterRegions[i]);
  v1::JobSpec builtin = CommandSpec(c, {"unused"}, 3, 5);
  builtin.clear_worker();
  builtin.set_model_preset("tiny");
  const std::string a = c.Submit(builtin);
  auto st = c.WaitFor(a, JobDone, 120s);
  INFO("built-in: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  const std::string b = c.Submit(CommandSpec(c, {kBin + "/builtin_twin_worker"}, 3, 5));
  st = c.WaitFor(b, JobDone, 120s);
  INFO("twin: " << st.reason());
  REQUIRE(st.state() == "succeeded");
  const auto ha = Hashes(c, a), hb = Hashes(c, b);
  REQUIRE(ha.size() == 3);
  CHECK(ha == hb);  // every round, bit for bit
}

TEST_CASE("sdk: the C ABI has the Python features: checkpoint tensor names, eval, outer state save and load",
          "[sdk][c_api]") {
  RealCluster c("sdk-c-features");
  c.StartOrchestrator();
  for (int i = 0; i < 2; ++i) c.StartAgent(kClusterRegions[i]);
  v1::JobSpec s = CommandSpec(c, {kBin + "/c_features_worker", "1000"}, 3, 4);
  s.set_checkpoint_interval(1);
  const std::string job = c.Submit(s);
  auto st = c.WaitFor(job, JobDone, 120s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  const auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 3);
  for (int i = 0; i < 2; ++i) REQUIRE(c.agents[kClusterRegions[i]].WaitForLine("job " + job + ": all processes stopped", 60000ms));
  const std::string log = ReadFile(c.dir / "eu-west" / job / "worker-0.log");
  CHECK_THAT(log, Catch::Contains("resynced_at_start 0"));
  // The eval callback's value is the round's validation loss.
  const auto at = log.find("eval ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(log.substr(at + 5)) == Approx(rounds[0].val_loss).epsilon(1e-12));
  CHECK(rounds[0].val_loss > 0);
  // The outer state after round 1 is the Nesterov momentum: there, and moved.
  std::smatch saved, loaded;
  REQUIRE(std::regex_search(log, saved, std::regex("saved round 1: outer floats (\\d+) nonzero (\\d+) hash (\\w+)")));
  CHECK(std::stoul(saved[1]) > 0);
  CHECK(std::stoul(saved[2]) > 0);
  CHECK(saved[3] == rounds[0].param_hash);
  // Loaded back after round 2 in every region: theta is round 1's again, and
  // round 3 (trained from it) still commits with both regions agreeing.
  REQUIRE(std::regex_search(log, loaded, std::regex("loaded round 1 state: hash (\\w+)")));
  CHECK(loaded[1] == rounds[0].param_hash);
  CHECK(rounds[2].participants.size() == 2);
  // The buffer (each region's own running mean until the round's end) is, after
  // every commit, the same in both regions and the plain mean of what each
  // trained it to (as a parameter it would have taken the Nesterov step instead).
  const std::string other = ReadFile(c.dir / "us-east" / job / "worker-0.log");
  const std::regex buffer("round (\\d+) buffer ([0-9.e+-]+) expected ([0-9.e+-]+)");
  std::vector<std::string> mine, theirs;
  for (std::sregex_iterator it(log.begin(), log.end(), buffer), end; it != end; ++it) {
    mine.push_back((*it)[0]);
    CHECK(std::stod((*it)[2]) == Approx(std::stod((*it)[3])).epsilon(1e-5));
  }
  for (std::sregex_iterator it(other.begin(), other.end(), buffer), end; it != end; ++it) theirs.push_back((*it)[0]);
  REQUIRE(mine.size() == 2);  // rounds 1 and 2 (round 3 ends with "finished")
  CHECK(mine == theirs);
  // The checkpoint names the tensors the worker declared (safetensors header).
  REQUIRE_FALSE(rounds[2].checkpoints.empty());
  const std::string ckpt = ReadFile(rounds[2].checkpoints[0].second);
  REQUIRE(ckpt.size() > 8);
  uint64_t header = 0;
  std::memcpy(&header, ckpt.data(), 8);
  const std::string json = ckpt.substr(8, header);
  CHECK_THAT(json, Catch::Contains("\"params.w\"") && Catch::Contains("[996]") && Catch::Contains("\"params.b\"") &&
                       Catch::Contains("[2,2]"));
}

TEST_CASE("sdk: a PyTorch worker and a C worker making the same updates commit the same hashes", "[sdk]") {
  RealCluster c("sdk-replay");
  c.StartOrchestrator();
  for (int i = 0; i < 2; ++i) c.StartAgent(kClusterRegions[i]);
  // Every kind runs through the same SDK: a comparison is one field apart.
  for (const std::string kind : {"diloco", "streaming_diloco", "sync", "local"}) {
    auto spec = [&](std::vector<std::string> argv) {
      v1::JobSpec s = CommandSpec(c, std::move(argv), 3, 4);
      s.mutable_sync()->set_kind(kind);
      if (kind == "streaming_diloco") {
        s.mutable_sync()->set_fragments(2);
        s.mutable_sync()->set_overlap_steps(1);
        s.mutable_sync()->set_mixing_alpha(0.5);
      }
      return s;
    };
    // Region 0's Python worker goes through a host copy of its parameters, as
    // for a model on a GPU: nothing may change.
    const std::string py = c.Submit(spec({kPython, kSource + "/tests/sdk/workers/replay_worker.py", "3000", "0"}));
    auto st = c.WaitFor(py, JobDone, 120s);
    INFO(kind << " python: " << st.reason() << " (logs in " << c.dir << ")");
    REQUIRE(st.state() == "succeeded");
    const std::string cw = c.Submit(spec({kBin + "/c_replay_worker", "3000"}));
    st = c.WaitFor(cw, JobDone, 120s);
    INFO(kind << " c: " << st.reason());
    REQUIRE(st.state() == "succeeded");
    // "local" regions diverge (nothing to agree on): compare what each region's
    // worker reported instead of the committed hash.
    const auto hp = kind == "local" ? LoggedHashes(c, py) : Hashes(c, py);
    const auto hc = kind == "local" ? LoggedHashes(c, cw) : Hashes(c, cw);
    REQUIRE(hp.size() == (kind == "local" ? 6u : 3u));
    CHECK(hp == hc);
    CHECK(hp[0] != hp[1]);  // the rounds did move the parameters
  }
}

TEST_CASE("sdk: a region that builds other initial parameters starts from the first region's and commits the hashes "
          "of regions seeded alike",
          "[sdk]") {
  RealCluster c("sdk-start");
  c.StartOrchestrator();
  for (int i = 0; i < 2; ++i) c.StartAgent(kClusterRegions[i]);
  const std::string receives = std::string(kClusterRegions[1]) + " receives " + kClusterRegions[0] + "'s at round 1";
  auto told = [&](const std::string& job) {
    std::vector<std::string> out;
    for (const auto& e : c.Events(job))
      if (e.kind == "start_parameters_differ") out.push_back(e.message);
    return out;
  };
  for (const std::string kind : {"diloco", "sync"}) {
    auto spec = [&](std::vector<std::string> argv) {
      v1::JobSpec s = CommandSpec(c, std::move(argv), 3, 4);
      s.mutable_sync()->set_kind(kind);
      return s;
    };
    const std::string alike = c.Submit(spec({kBin + "/c_replay_worker", "3000"}));
    auto st = c.WaitFor(alike, JobDone, 120s);
    INFO(kind << " alike: " << st.reason() << " (logs in " << c.dir << ")");
    REQUIRE(st.state() == "succeeded");
    CHECK(told(alike).empty());
    // Region 1 builds other parameters: it receives region 0's before its first step.
    const std::string differ = c.Submit(spec({kBin + "/c_replay_worker", "3000", "1"}));
    st = c.WaitFor(differ, JobDone, 120s);
    INFO(kind << " differ: " << st.reason());
    REQUIRE(st.state() == "succeeded");
    const auto hashes = Hashes(c, differ);
    REQUIRE(hashes.size() == 3);
    CHECK(hashes == Hashes(c, alike));
    const auto said = told(differ);
    REQUIRE_FALSE(said.empty());
    CHECK_THAT(said[0], Catch::Contains(receives));
    // Region 1's worker held region 0's parameters when its session started.
    const std::string resynced = "resynced at start";
    CHECK_THAT(ReadFile(c.dir / kClusterRegions[1] / differ / "worker-0.log"), Catch::Contains(resynced));
    CHECK_THAT(ReadFile(c.dir / kClusterRegions[0] / differ / "worker-0.log"), !Catch::Contains(resynced));
    CHECK_THAT(ReadFile(c.dir / kClusterRegions[1] / alike / "worker-0.log"), !Catch::Contains(resynced));
    if (kind != "diloco") continue;
    // The same through PyTorch, region 1 behind a host copy (as a model on a
    // GPU): lh.DiLoCo returns with its model holding region 0's parameters.
    const std::string py =
        c.Submit(spec({kPython, kSource + "/tests/sdk/workers/replay_worker.py", "3000", "1", "1"}));
    st = c.WaitFor(py, JobDone, 120s);
    INFO("python: " << st.reason());
    REQUIRE(st.state() == "succeeded");
    CHECK(Hashes(c, py) == Hashes(c, alike));
    CHECK_FALSE(told(py).empty());
    CHECK_THAT(ReadFile(c.dir / kClusterRegions[1] / py / "worker-0.log"),
               Catch::Contains("resynced at start, holding the first region's parameters"));
  }
}

TEST_CASE("sdk: a region whose workers build different parameters starts from its worker 0's", "[sdk]") {
  RealCluster c("sdk-start-workers", {.workers = 2});
  c.StartOrchestrator();
  for (int i = 0; i < 2; ++i) c.StartAgent(kClusterRegions[i]);
  auto spec = [&](std::vector<std::string> argv) {
    v1::JobSpec s = CommandSpec(c, std::move(argv), 3, 4);
    s.set_workers_per_region(2);
    return s;
  };
  const std::string alike = c.Submit(spec({kBin + "/c_replay_worker", "3000"}));
  auto st = c.WaitFor(alike, JobDone, 120s);
  INFO("alike: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  // Worker 1 of region 0 builds other parameters (and carries the second shard
  // over the WAN): it takes worker 0's before the job starts.
  const std::string differ = c.Submit(spec({kBin + "/c_replay_worker", "3000", "0", "1"}));
  st = c.WaitFor(differ, JobDone, 120s);
  INFO("differ: " << st.reason());
  REQUIRE(st.state() == "succeeded");
  const auto hashes = Hashes(c, differ);
  REQUIRE(hashes.size() == 3);
  CHECK(hashes == Hashes(c, alike));
  for (const auto& e : c.Events(differ)) CHECK(e.kind != "start_parameters_differ");  // the regions agree
  // The same through PyTorch, region 0's workers behind host copies of their
  // parameters (as for a model on a GPU).
  const std::string py =
      c.Submit(spec({kPython, kSource + "/tests/sdk/workers/replay_worker.py", "3000", "0", "0", "1"}));
  st = c.WaitFor(py, JobDone, 240s);
  INFO("python: " << st.reason());
  REQUIRE(st.state() == "succeeded");
  CHECK(Hashes(c, py) == Hashes(c, alike));
}

namespace {

const std::string kSyncDpWorker = kSource + "/tests/sdk/workers/sync_dp_worker.py";

// A sync_dp_worker.py job of three regions (see its usage): the model in
// `dtype`, `optimizer` given to DiLoCo, and with fail_at >= 0 the last region
// failing that job step once, after its optimizer step (that region works
// through a host copy of its parameters and optimizer state, as for a model on
// a GPU). The workers save their parameters in `dir` at job step `steps`, the
// start of a round, before its exchange: the job has one round more and
// cannot end first.
struct SyncDpJob {
  std::string kind = "sync";
  uint32_t h = 1;
  v1::Codec codec = v1::CODEC_FP32;
  int fail_at = -1;
  std::string optimizer = "adamw";
  std::string dtype = "float32";
};

// Runs the job; checks that it succeeds with every round committed by all
// three regions (replicas bitwise identical every round) and that a round was
// rolled back exactly when a region failed. Returns the job's id.
std::string RunSyncDpJob(RealCluster& c, const fs::path& dir, uint32_t steps, const SyncDpJob& j) {
  fs::create_directories(dir);
  v1::JobSpec s = CommandSpec(
      c, {kPython, kSyncDpWorker, dir.string(), std::to_string(steps), std::to_string(j.fail_at), j.optimizer, j.dtype},
      steps / j.h + 1, j.h, 3);
  s.mutable_sync()->set_kind(j.kind);
  s.mutable_compression()->set_codec(j.codec);
  s.mutable_inner()->set_lr(1e-2);
  s.mutable_inner()->set_batch_size(8);
  const std::string job = c.Submit(s);
  auto st = c.WaitFor(job, JobDone, 240s);
  INFO(j.kind << " " << j.dtype << " " << j.optimizer << " failing at " << j.fail_at << ": " << st.reason()
              << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  const auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == steps / j.h + 1);
  for (const auto& r : rounds) CHECK(r.participants.size() == 3);
  int aborted = 0;
  for (const auto& e : c.Events(job)) aborted += e.kind == "round_aborted" ? 1 : 0;
  CHECK((aborted >= 1) == (j.fail_at >= 0));
  return job;
}

// Kind sync through PyTorch with `optimizer`: three regions step like one
// process with three times the batch, though one region fails step 20 after
// its optimizer step and the round rolls back, the optimizer's state with it.
void CheckSyncDataParallel(const std::string& optimizer) {
  const TempDir out("sync-dp");  // declared first: removed after the workers writing into it are gone
  RealCluster c("sdk-sync-dp");
  c.StartOrchestrator();
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  constexpr uint32_t kSteps = 50;
  RunSyncDpJob(c, out.path(), kSteps, {.fail_at = 20, .optimizer = optimizer});
  std::string output;
  const int code = RunCommand(
      kPython + " " + kSyncDpWorker + " --reference " + out.path().string() + " " + std::to_string(kSteps) + " 3",
      &output);
  INFO(output);
  CHECK(code == 0);
  CHECK_THAT(output, Catch::Contains("max |difference|"));
  CHECK_THAT(output, Catch::Contains("'optimizer': '" + optimizer + "'"));
}

}  // namespace

TEST_CASE("sdk: kind sync through PyTorch is data parallelism: 3 regions step like one process with 3x the batch, "
          "a rolled-back step included",
          "[sdk][sync]") {
  CheckSyncDataParallel("adamw");
}

TEST_CASE("sdk: kind sync through PyTorch with SGD and Nesterov momentum: the momentum buffers roll back with the round",
          "[sdk][sync]") {
  CheckSyncDataParallel("sgd");
}

TEST_CASE("sdk: a bfloat16 model and one mixing bfloat16 and float32 train through a float32 copy: DiLoCo and kind "
          "sync replicas hold the global parameters rounded, and a rolled-back round is retried exactly",
          "[sdk][dtype]") {
  const TempDir out("bf16");  // declared first: removed after the workers writing into it are gone
  RealCluster c("sdk-bf16");
  c.StartOrchestrator();
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  constexpr uint32_t kSteps = 40;
  auto identical = [&](const fs::path& dir, const std::string& dtypes) {
    std::string output;
    const int code = RunCommand(kPython + " " + kSyncDpWorker + " --identical " + dir.string() + " 3", &output);
    INFO(output);
    CHECK(code == 0);
    CHECK_THAT(output, Catch::Contains("parameters in " + dtypes + "; the model holds the global parameters rounded: True"));
  };
  // DiLoCo: the outer step runs in float32, so replicas agree whether or not a
  // region restored its state after the failure; the job without the failure
  // shows that it did (deterministic training: the same hashes, round by round).
  const SyncDpJob diloco{.kind = "diloco", .h = 5, .codec = v1::CODEC_INT8_BLOCK, .dtype = "bfloat16"};
  SyncDpJob failing = diloco;
  failing.fail_at = 12;
  const std::string failed = RunSyncDpJob(c, out.path() / "diloco-failed", kSteps, failing);
  identical(out.path() / "diloco-failed", "torch.bfloat16");
  const std::string clean = RunSyncDpJob(c, out.path() / "diloco", kSteps, diloco);
  CHECK(Hashes(c, failed) == Hashes(c, clean));
  // Kind sync: every step is a round, and a region that did not restore its
  // bfloat16 parameters and AdamW state would disagree at the next one.
  RunSyncDpJob(c, out.path() / "sync-failed", kSteps,
               {.codec = v1::CODEC_INT8_BLOCK, .fail_at = 12, .dtype = "bfloat16"});
  identical(out.path() / "sync-failed", "torch.bfloat16");
  // A model mixing bfloat16 and float32 layers (one flat tensor each, one
  // float32 copy): the same hashes as without the failure, so both parts'
  // parameters and AdamW state were restored (every region rolls back, so
  // regions that all skipped a part would still agree with each other).
  const SyncDpJob mixed{.codec = v1::CODEC_INT8_BLOCK, .dtype = "mixed"};
  SyncDpJob mixed_failing = mixed;
  mixed_failing.fail_at = 12;
  const std::string mixed_failed = RunSyncDpJob(c, out.path() / "mixed-failed", kSteps, mixed_failing);
  identical(out.path() / "mixed-failed", "torch.bfloat16 and torch.float32");
  CHECK(Hashes(c, mixed_failed) == Hashes(c, RunSyncDpJob(c, out.path() / "mixed", kSteps, mixed)));
}

// The worker log lines starting with `prefix` and containing `needle`, region by region.
std::vector<std::vector<std::string>> WorkerLines(const RealCluster& c, const std::string& job, int regions,
                                                  const std::string& prefix, const std::string& needle) {
  std::vector<std::vector<std::string>> lines(regions);
  for (int i = 0; i < regions; ++i) {
    std::istringstream log(ReadFile(c.dir / kClusterRegions[i] / job / "worker-0.log"));
    for (std::string line; std::getline(log, line);)
      if (line.rfind(prefix, 0) == 0 && line.find(needle) != std::string::npos) lines[i].push_back(line);
  }
  return lines;
}

TEST_CASE("sdk: BatchNorm statistics are averaged across regions, and code after the loop runs when the job ends",
          "[sdk][buffers]") {
  const TempDir out("batchnorm");  // declared first: removed after the workers writing into it are gone
  RealCluster c("sdk-batchnorm");
  c.StartOrchestrator();
  for (int i = 0; i < 2; ++i) c.StartAgent(kClusterRegions[i]);
  for (const std::string kind : {"diloco", "sync"}) {
    const fs::path dir = out.path() / kind;
    fs::create_directories(dir);
    v1::JobSpec s =
        CommandSpec(c, {kPython, kSource + "/tests/sdk/workers/batchnorm_worker.py", dir.string()}, 3, 5);
    s.mutable_sync()->set_kind(kind);
    s.mutable_inner()->set_lr(1e-2);
    s.mutable_inner()->set_batch_size(16);
    const std::string job = c.Submit(s);
    auto st = c.WaitFor(job, JobDone, 120s);
    INFO(kind << ": " << st.reason() << " (logs in " << c.dir << ")");
    // A round commits only when the regions' hashes, which cover the buffers, agree.
    REQUIRE(st.state() == "succeeded");
    REQUIRE(c.Rounds(job).size() == 3);
    // The job succeeded at its last commit; the workers then finish their own code.
    for (int i = 0; i < 2; ++i)
      REQUIRE(c.agents[kClusterRegions[i]].WaitForLine("job " + job + ": all processes stopped", 60000ms));
    const auto lines = WorkerLines(c, job, 2, "round ", " running_mean ");
    INFO("region 0: " << (lines[0].empty() ? "" : lines[0].back()));
    REQUIRE(lines[0].size() == 3);
    CHECK(lines[0] == lines[1]);  // the same validation loss and statistics, bit for bit
    CHECK(lines[0][0] != lines[0][2]);  // and training moved them
    CHECK_THAT(lines[0][0], !Catch::Contains("running_mean 0.0 "));
    // After the loop: step() said "finished" after the last commit, and the
    // final evaluation and save ran to the end in every region.
    const std::string final0 = ReadFile(dir / "0.txt"), final1 = ReadFile(dir / "1.txt");
    CHECK_THAT(final0, Catch::StartsWith("finished round 3 held-out "));
    CHECK(final0 == final1);
  }
  // Cancelled: SIGTERM first, so a handler's cleanup runs before the grace ends.
  const fs::path dir = out.path() / "cancelled";
  fs::create_directories(dir);
  v1::JobSpec s = CommandSpec(c, {kPython, kSource + "/tests/sdk/workers/batchnorm_worker.py", dir.string()}, 100000, 5);
  const std::string job = c.Submit(s);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 2 || JobDone(s); }, 120s);
  REQUIRE(st.state() == "running");
  CHECK(c.Cancel(job).state() == "cancelled");
  for (int i = 0; i < 2; ++i)
    REQUIRE(c.agents[kClusterRegions[i]].WaitForLine("job " + job + ": all processes stopped", 60000ms));
  for (int i = 0; i < 2; ++i)
    CHECK_THAT(ReadFile(dir / (std::to_string(i) + ".terminated")), Catch::StartsWith("terminated at committed round"));
}

TEST_CASE("sdk: the PyTorch example runs across 3 regions behind emulated WAN links", "[sdk]") {
  RealCluster c("sdk-example", {.agent_flags = {"--wan-rate-mbit", "100", "--wan-delay-ms", "10"}});
  c.StartOrchestrator();
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  const std::string job = c.Submit(ExampleSpec(c, 4, 10));
  auto st = c.WaitFor(job, JobDone, 240s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  const auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 4);
  for (const auto& r : rounds) {
    CHECK(r.participants.size() == 3);  // a commit means all three hashes agreed
    CHECK(r.wan_bytes > 0);
  }
  CHECK(st.val_loss() > 0);
  CHECK(st.val_loss() < 5.55);  // below the uniform-byte loss ln(256)
}

TEST_CASE("sdk: two PyTorch workers per region, torch.distributed inside and one WAN shard each", "[sdk]") {
  RealCluster c("sdk-multi", {.workers = 2});
  c.StartOrchestrator();
  for (int i = 0; i < 2; ++i) c.StartAgent(kClusterRegions[i]);
  v1::JobSpec s = ExampleSpec(c, 3, 5);
  s.clear_regions();
  for (int i = 0; i < 2; ++i) s.add_regions(kClusterRegions[i]);
  s.set_region_count(2);
  s.set_workers_per_region(2);
  const std::string job = c.Submit(s);
  auto st = c.WaitFor(job, JobDone, 240s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  const auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 3);
  // A region reports ok only when both of its workers hold the same parameters,
  // and a round commits only when both regions agree.
  for (const auto& r : rounds) CHECK(r.participants.size() == 2);
  // Each worker carried its own shard: both logged a committed hash every round.
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = ReadFile(c.dir / "eu-west" / job / ("worker-" + std::to_string(rank) + ".log"));
    CHECK_THAT(log, Catch::Contains("round 3 epoch"));
  }
}

TEST_CASE("sdk: a killed PyTorch worker is relaunched and its region rejoins", "[sdk]") {
  RealCluster c("sdk-kill");
  c.StartOrchestrator();
  for (const auto& r : kClusterRegions) c.StartAgent(r);
  // Far longer than the test: it waits for the rejoin, checks, then cancels
  // (a relaunched Python worker needs seconds before it can rejoin).
  v1::JobSpec spec = ExampleSpec(c, 100000, 20);
  spec.mutable_worker()->mutable_command()->add_argv("--trace-data");  // each step's window starts in the log
  const std::string job = c.Submit(spec);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 3 || JobDone(s); }, 180s);
  INFO("job " << job << " " << st.state() << ": " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "running");
  REQUIRE(st.round() >= 3);
  // The agent runs the program its policy checked, symlinks resolved (python3.11).
  const auto victims = ChildrenNamed(c.agents["us-east"].pid(), fs::canonical(kPython).filename().string().substr(0, 15));
  REQUIRE(victims.size() == 1);
  REQUIRE(::kill(victims[0], SIGKILL) == 0);
  // us-east is gone from a committed round and back in a later one.
  const auto rounds = WaitForRejoin(c, job, "us-east", st.round(), 300s);
  const Rejoin rejoin = FindRejoin(rounds, "us-east", st.round());
  INFO(rounds.size() << " rounds committed; last with " << (rounds.empty() ? 0 : rounds.back().participants.size())
                     << " regions");
  REQUIRE(rejoin);
  CHECK(rejoin.without->participants.size() == 2);
  CHECK(rejoin.back->participants.size() == 3);
  for (size_t i = 0; i < rounds.size(); ++i) CHECK(rounds[i].round == i + 1);  // each round once, in order
  // The relaunched script was told it had been re-synchronised (it says so
  // when it joins, before its first round).
  const std::string log = ReadFile(c.dir / "us-east" / job / "worker-0.log");
  CHECK_THAT(log, Catch::Contains("resynced"));
  // The relaunched worker resumes the data where the job is: it draws none of
  // the batches the killed one trained on (each step's windows are a function of
  // the job step, not of how long the process has run).
  std::set<std::string> killed, relaunched;
  uint64_t first_step = 0;
  bool second = false;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" resynced from a live region") != std::string::npos) second = true;
    if (line.rfind("data step ", 0) != 0) continue;
    const auto at = line.find(" windows ");
    if (second && relaunched.empty()) first_step = std::stoull(line.substr(10, at - 10));
    (second ? relaunched : killed).insert(line.substr(at + 9));
  }
  REQUIRE_FALSE(killed.empty());
  REQUIRE_FALSE(relaunched.empty());
  CHECK(first_step >= 20);  // a later round's first step, not step 0
  for (const auto& w : relaunched) CHECK(killed.count(w) == 0);
  CHECK(c.Cancel(job).state() == "cancelled");
}

TEST_CASE("sdk: a script that raises is reported with its traceback, to the job's owner only", "[sdk]") {
  RealCluster c("sdk-raise");
  c.StartOrchestrator();
  for (int i = 0; i < 2; ++i) c.StartAgent(kClusterRegions[i]);
  v1::JobSpec s = CommandSpec(c, {kPython, kSource + "/tests/sdk/workers/raise_worker.py"}, 3, 5);
  s.set_min_regions(2);
  const std::string job = c.Submit(s, "user-a");
  // The region's report carries the exit status (for everyone) and the
  // traceback's tail (for the owner and admins).
  auto any = [](const v1::JobStatus&) { return true; };
  bool seen = false;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  std::string text;
  v1::JobStatus owner;
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    text.clear();
    for (const auto& e : c.Events(job)) text.append(e.kind).append(": ").append(e.message).append("\n");
    owner = c.WaitFor(job, any, 1s, "user-a");
    text += owner.reason();
    seen = text.find("exited with status 1") != std::string::npos &&
           owner.worker_output().find("tokenizer exploded") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(200ms);
  }
  INFO(text << "\n-- owner's worker output --\n" << owner.worker_output());
  REQUIRE(seen);
  CHECK_THAT(owner.worker_output(), Catch::Contains("Traceback") || Catch::Contains("RuntimeError"));
  CHECK_THAT(owner.worker_output(), Catch::Contains(" worker 0:\n"));  // "<region> worker 0:"
  // Reasons and events, which every user sees, hold no output.
  CHECK(text.find("tokenizer exploded") == std::string::npos);
  const v1::JobStatus other = c.WaitFor(job, any, 1s, "user-b");
  CHECK(other.job_id() == job);
  CHECK(other.worker_output().empty());
  CHECK(other.reason().find("tokenizer exploded") == std::string::npos);
  CHECK_THAT(c.WaitFor(job, any, 1s, "cli").worker_output(), Catch::Contains("tokenizer exploded"));  // an admin
  v1::ControlMessage regions;
  regions.mutable_list_regions();
  auto listed = c.Client("user-b")->Call(regions);
  REQUIRE(listed.ok());
  CHECK(listed->DebugString().find("tokenizer exploded") == std::string::npos);
}

TEST_CASE("sdk: a script that never connects, or hangs in a round, is reported with its output", "[sdk]") {
  // Round timeout above the cluster's 15 s collective timeout (the hierarchy).
  RealCluster c("sdk-hang", {.agent_flags = {"--worker-start-timeout-s", "5"}, .round_timeout_s = 18});
  c.StartOrchestrator();
  for (int i = 0; i < 2; ++i) c.StartAgent(kClusterRegions[i]);
  const std::string never = c.Submit(CommandSpec(c, {kPython, kSource + "/tests/sdk/workers/hang_worker.py", "start"}, 3, 5));
  std::string text = c.WaitForText(never, "never connected");
  INFO(text);
  CHECK_THAT(text, Catch::Contains("did not report ready within 5 s") && Catch::Contains("never arrives"));
  REQUIRE(c.Client() != nullptr);
  v1::ControlMessage cancel;
  cancel.mutable_cancel_job()->set_job_id(never);
  (void)c.Client()->Call(cancel);
  c.WaitFor(never, JobDone, 30s);

  const std::string hung = c.Submit(CommandSpec(c, {kPython, kSource + "/tests/sdk/workers/hang_worker.py", "round"}, 3, 5));
  text = c.WaitForText(hung, "hung?");
  INFO(text);
  CHECK_THAT(text, Catch::Contains("sent no round report within 18 s") && Catch::Contains("nobody releases"));
}
