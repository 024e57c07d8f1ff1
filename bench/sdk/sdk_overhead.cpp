// bench_sdk: what the Python SDK (longhaul.torch over the worker library's
// Session) costs next to the built-in worker (longhaul-worker, the same
// Session driven from C++), end to end on a LocalCluster.
//
// 1. Outer-step overhead at equal parameter count (~2 M and ~50 M): a built-in
//    DiLoCo job with ByteLM dims giving ~N parameters, and a command job whose
//    worker (sdk_bench_worker.py) hands longhaul.torch.DiLoCo a model with
//    exactly the same tensors and makes near-free inner steps. Per committed
//    round, non-compute = wall_seconds - compute_seconds: everything the round
//    does besides the inner steps (snapshot, pseudo-gradient, guard, codec,
//    ring all-reduce, outer step, gather, hash, validation). The built-in
//    worker also validates (4 held-out batches on rank 0) inside that time and
//    the SDK worker's eval_fn returns a constant, so the built-in's validation
//    is timed in this process on the same model and subtracted: the "outer
//    step" column compares like with like. Target: SDK <= 1.10x built-in.
// 2. The no-op step(): the Python worker times every step() call that is not
//    a sync point next to an empty Python function call with the same
//    arguments, in the same loop. Target: median < 5 us.
//
// --out DIR writes sdk_overhead.md there.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "command_job.h"
#include "e2e_run.h"
#include "longhaul/common/format_number.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/demo.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/trainer/data.h"
#include "longhaul/trainer/trainer.h"

using namespace longhaul;
namespace orch = longhaul::orchestrator;
namespace fs = std::filesystem;

namespace {

constexpr int kAgentValidationBatches = 4;  // longhaul-agent --validation-batches default (LocalCluster keeps it)

struct Options {
  std::vector<double> sizes_m = {2, 50};
  uint32_t regions = 2;
  uint32_t rounds = 8;
  uint32_t h = 2;
  uint32_t repeats = 3;
  uint32_t batch = 1;
  uint32_t step_h = 2000;
  uint32_t step_rounds = 2;
  bool skip_outer = false, skip_steps = false;
  std::string python = LONGHAUL_PYTHON;
  std::string worker_script = LONGHAUL_SDK_BENCH_WORKER;
  std::string out_dir;
  int job_timeout_s = 600;
  bool keep_work_dir = false;
};

// ByteLM dims: context 16, embed 48, 3 hidden layers, hidden width chosen for
// the target count (a multiple of 64; 768 is the `small` preset).
trainer::ModelConfig DimsFor(double target_params) {
  trainer::ModelConfig m;
  m.preset = "small";
  m.context = 16;
  m.embed_dim = 48;
  m.hidden_layers = 3;
  // params = 256E + CE*H + H + (L-1)(H^2 + H) + 256H + 256 = 2H^2 + (CE + 259)H + 256E + 256 for L = 3
  const double a = 2, b = m.context * m.embed_dim + 259.0, c = 256.0 * m.embed_dim + 256 - target_params;
  const double h = (-b + std::sqrt(b * b - 4 * a * c)) / (2 * a);
  m.hidden_dim = std::max(64, static_cast<int>(std::lround(h / 64)) * 64);
  return m;
}

uint64_t ParamCount(const trainer::ModelConfig& m) {
  const uint64_t E = m.embed_dim, C = m.context, H = m.hidden_dim, L = m.hidden_layers;
  return 256 * E + C * E * H + H + (L - 1) * (H * H + H) + H * 256 + 256;
}

v1::JobSpec BaseSpec(const std::string& name, const Options& o, const std::vector<orch::LocalRegion>& regions,
                     uint32_t rounds, uint32_t h) {
  v1::JobSpec s = orch::DefaultJobSpec();
  s.set_name(name);
  bench::SetRegions(s, regions);
  s.set_rounds(rounds);
  s.set_checkpoint_interval(0);
  s.mutable_inner()->set_batch_size(o.batch);
  // Small enough that the built-in trainer at batch 1 does not diverge (the
  // pseudo-gradient guard would then abort rounds); the figures do not depend on it.
  s.mutable_inner()->set_lr(1e-3);
  s.mutable_sync()->set_kind("diloco");
  s.mutable_sync()->set_inner_steps(h);
  s.mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
  return s;
}

v1::JobSpec BuiltinSpec(const trainer::ModelConfig& m, const Options& o,
                        const std::vector<orch::LocalRegion>& regions) {
  v1::JobSpec s = BaseSpec("sdk-bench built-in " + std::to_string(ParamCount(m)), o, regions, o.rounds, o.h);
  s.set_model_preset(m.preset);
  auto* b = s.mutable_worker()->mutable_builtin();
  b->set_preset(m.preset);
  b->set_context(static_cast<uint32_t>(m.context));
  b->set_embed(static_cast<uint32_t>(m.embed_dim));
  b->set_hidden(static_cast<uint32_t>(m.hidden_dim));
  b->set_layers(static_cast<uint32_t>(m.hidden_layers));
  return s;
}

v1::JobSpec SdkSpec(const std::string& name, const trainer::ModelConfig& m, const Options& o,
                    const std::vector<orch::LocalRegion>& regions, uint32_t rounds, uint32_t h, bool time_steps,
                    const fs::path& result_dir) {
  v1::JobSpec s = BaseSpec(name, o, regions, rounds, h);
  bench::CommandWorkerOptions w;
  w.argv = {o.python,       o.worker_script,
            "--context",    std::to_string(m.context),
            "--embed",      std::to_string(m.embed_dim),
            "--hidden",     std::to_string(m.hidden_dim),
            "--layers",     std::to_string(m.hidden_layers),
            "--touch",      time_steps ? "none" : "all",
            "--result-dir", result_dir.string()};
  if (time_steps) w.argv.push_back("--time-steps");
  bench::SetCommandWorker(s, w);
  return s;
}

// Medians over the committed rounds after the first (page faults, first
// connections and buffer allocation land in round 1).
struct RoundFigures {
  double compute = 0, comm = 0, non_compute = 0, wall = 0;
  size_t rounds = 0;
  double non_compute_p25 = 0, non_compute_p75 = 0;  // the spread over rounds
};

RoundFigures Measure(const std::vector<bench::E2eRun>& runs) {
  std::vector<double> compute, comm, non_compute, wall;
  for (const auto& run : runs) {
    for (const auto& r : run.rounds) {
      std::fprintf(stderr, "    %s round %u: wall %.1f ms, compute %.1f ms, comm %.1f ms, non-compute %.1f ms\n",
                   run.status.job_id().c_str(), r.round, 1000 * r.wall_seconds, 1000 * r.compute_seconds,
                   1000 * r.comm_seconds, 1000 * (r.wall_seconds - r.compute_seconds));
      if (r.round <= 1) continue;
      compute.push_back(r.compute_seconds);
      comm.push_back(r.comm_seconds);
      non_compute.push_back(r.wall_seconds - r.compute_seconds);
      wall.push_back(r.wall_seconds);
    }
  }
  RoundFigures f{bench::Median(compute), bench::Median(comm), bench::Median(non_compute), bench::Median(wall),
                 compute.size()};
  std::sort(non_compute.begin(), non_compute.end());
  if (!non_compute.empty()) {
    f.non_compute_p25 = non_compute[non_compute.size() / 4];
    f.non_compute_p75 = non_compute[(3 * non_compute.size()) / 4];
  }
  return f;
}

// The built-in worker's validation as the agent runs it (kAgentValidationBatches
// held-out batches of the job's batch size, forward only), timed here on the
// same model and data while the cluster is idle. Median of 5 after a warm-up.
Result<double> BuiltinValidationSeconds(const trainer::ModelConfig& m, const v1::JobSpec& spec, uint32_t regions) {
  trainer::DataOptions d;
  d.kind = "synthetic";
  d.seed = spec.data().synthetic().seed();
  d.branching = spec.data().synthetic().branching();
  d.order = spec.data().synthetic().order();
  d.non_iid = spec.data().synthetic().non_iid();
  LONGHAUL_ASSIGN_OR_RETURN(auto data, trainer::MakeDataSource(d, 0, regions, 0, 1));
  auto group = trainer::MakeSingleRankGroup();
  trainer::TrainerOptions t;
  t.model = m;
  t.batch_size = static_cast<int>(spec.inner().batch_size());
  t.seed = spec.seed();
  LONGHAUL_RETURN_IF_ERROR(t.Validate());
  trainer::InnerTrainer trainer(t, *data, *group);
  std::vector<double> seconds;
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile float loss = trainer.ValidationLoss(trainer.model().params(), kAgentValidationBatches);
    (void)loss;
    if (i > 0) seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return bench::Median(seconds);
}

std::string Ms(double seconds) { return FormatNumber("%.1f ms", 1000 * seconds); }
std::string Us(double ns) { return FormatNumber("%.2f us", ns / 1000); }

struct OuterRow {
  trainer::ModelConfig model;
  RoundFigures builtin, sdk;
  double validation = 0;
  double builtin_outer() const { return builtin.non_compute - validation; }
  double ratio() const { return builtin_outer() > 0 ? sdk.non_compute / builtin_outer() : 0; }
};

std::string OuterTable(const std::vector<OuterRow>& rows, const Options& o, bool* met) {
  std::ostringstream t;
  t << "| params | worker | rounds | compute / round | comm | non-compute (p25-p75) | of which validation | outer step "
       "| "
       "SDK / built-in |\n"
    << "|---|---|---|---|---|---|---|---|---|\n";
  auto spread = [](const RoundFigures& f) {
    return Ms(f.non_compute) + " (" + FormatNumber("%.0f", 1000 * f.non_compute_p25) + "-" +
           FormatNumber("%.0f", 1000 * f.non_compute_p75) + ")";
  };
  *met = !rows.empty();
  for (const auto& r : rows) {
    const std::string n = std::to_string(ParamCount(r.model));
    t << "| " << n << " | built-in (longhaul-worker) | " << r.builtin.rounds << " | " << Ms(r.builtin.compute) << " | "
      << Ms(r.builtin.comm) << " | " << spread(r.builtin) << " | " << Ms(r.validation) << " | " << Ms(r.builtin_outer())
      << " | 1x |\n";
    t << "| " << n << " | SDK (longhaul.torch) | " << r.sdk.rounds << " | " << Ms(r.sdk.compute) << " | "
      << Ms(r.sdk.comm) << " | " << spread(r.sdk) << " | 0 (eval_fn returns a constant) | " << Ms(r.sdk.non_compute)
      << " | " << FormatNumber("%.2fx", r.ratio()) << " |\n";
    *met = *met && r.ratio() <= 1.10;
  }
  t << "\nModel: ByteLM tensors, context 16, embed 48, 3 hidden layers of width";
  for (const auto& r : rows) t << " " << r.model.hidden_dim;
  t << "; " << o.regions << " regions on plain loopback (no linkem), DiLoCo H=" << o.h << ", int8 blocks of 256, "
    << "batch " << o.batch << ", " << o.repeats << " jobs of each kind per size (alternating) of " << o.rounds
    << " rounds; medians over rounds 2.." << o.rounds << " of every job.\n"
    << "non-compute = wall_seconds - compute_seconds of each committed round (wall: the slowest region's round, "
       "from the round's start to the end of its outer step and validation; compute: the time between step() "
       "calls, mean over regions). comm = time waiting on the cross-region all-reduce (codec and ring). outer step "
       "= non-compute less the built-in worker's validation (timed in the bench process on the same model; the "
       "SDK worker's eval_fn does no work). The built-in worker also saves its AdamW moments at every round's "
       "start (so an abort can roll them back); the SDK does not roll back the inner optimizer. Any compute skew "
       "between regions also lands in non-compute, for both. rounds: how many rounds the medians are over.\n"
    << "Target: SDK outer step <= 1.10x the built-in's at the same parameter count: " << (*met ? "met" : "not met")
    << ".\n";
  return t.str();
}

struct WorkerFigures {
  nlohmann::json result;  // what sdk_bench_worker.py wrote (first region's rank 0)
  std::string region;
};

std::string StepTable(const WorkerFigures& f, const Options& o, bool* met) {
  const auto& j = f.result;
  auto row = [&](const char* what, const char* key) {
    const auto& s = j[key];
    return std::string("| ") + what + " | " + std::to_string(s["count"].get<long>()) + " | " +
           Us(s["median_ns"].get<double>()) + " | " + Us(s["p99_ns"].get<double>()) + " |\n";
  };
  std::ostringstream t;
  t << "| call (timed with time.perf_counter_ns in the worker's loop) | calls | median | p99 |\n|---|---|---|---|\n"
    << row("two back-to-back perf_counter_ns() (the timer itself)", "timer_pair")
    << row("empty Python function f(loss=0.5, tokens=16) (baseline)", "empty_call")
    << row("diloco.step(loss=0.5, tokens=16), no-op", "step_float")
    << row("diloco.step(loss=<0-dim tensor with a grad_fn>, tokens=16), no-op", "step_tensor");
  const double step = j["step_float"]["median_ns"].get<double>(), empty = j["empty_call"]["median_ns"].get<double>();
  const double tensor = j["step_tensor"]["median_ns"].get<double>();
  *met = step > 0 && step < 5000;
  t << "\nWorker of region " << f.region << ", rank 0, " << j["params"].get<long>() << " parameters, " << o.step_rounds
    << " round(s) of H=" << o.step_h << " with empty inner steps; every step() call but the round's "
    << "last (the sync point) is timed, alternating a float and a tensor loss. Each figure includes one "
       "perf_counter_ns() call. step() costs "
    << Us(step - empty)
    << " more than the empty call (median): the wrapper, pybind11, releasing and retaking the "
       "GIL, and Session::Step's bookkeeping. A tensor loss adds "
    << Us(tensor - step) << ": DiLoCo.step converts it with float(loss.detach()).\n"
    << "Target: no-op step() median < 5 us: " << Us(step) << " -> " << (*met ? "met" : "not met") << ".\n";
  return t.str();
}

Result<WorkerFigures> ReadWorkerFigures(const fs::path& dir, const std::string& job_id, const std::string& region) {
  // The worker writes it just before its last step() (the agent stops the
  // workers once the last round commits); the job may end a moment earlier.
  const fs::path file = dir / (job_id + "-" + region + "-rank0.json");
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!fs::exists(file) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::ifstream in(file);
  if (!in) return NotFound("no figures from the SDK worker at " + file.string());
  WorkerFigures f;
  f.region = region;
  try {
    in >> f.result;
  } catch (const std::exception& e) {
    return DataLoss(file.string() + ": " + e.what());
  }
  return f;
}

int Fail(const Status& s, const orch::LocalCluster& c) {
  std::fprintf(stderr, "bench_sdk: %s (logs: %s)\n", s.message().c_str(), c.log_dir().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_sdk: longhaul.torch overhead against the built-in worker, end to end"};
  app.add_option("--sizes-m", o.sizes_m, "parameter counts to compare, in millions")->delimiter(',');
  app.add_option("--regions", o.regions, "regions")->check(CLI::Range(2, 4));
  app.add_option("--rounds", o.rounds, "outer rounds per job (round 1 is left out)")->check(CLI::Range(2, 1000));
  app.add_option("--inner-steps", o.h, "H of the overhead jobs")->check(CLI::Range(1, 1000));
  app.add_option("--repeats", o.repeats, "jobs of each kind per size (alternating)")->check(CLI::Range(1, 100));
  app.add_option("--batch", o.batch, "built-in trainer batch (its inner-step cost)")->check(CLI::Range(1, 4096));
  app.add_option("--step-inner-steps", o.step_h, "H of the step-timing job")->check(CLI::Range(10, 1000000));
  app.add_option("--step-rounds", o.step_rounds, "rounds of the step-timing job")->check(CLI::Range(1, 100));
  app.add_flag("--skip-outer", o.skip_outer, "skip part 1 (outer-step overhead)");
  app.add_flag("--skip-steps", o.skip_steps, "skip part 2 (no-op step timing)");
  app.add_option("--python", o.python, "Python interpreter with torch for the SDK worker");
  app.add_option("--worker-script", o.worker_script, "the SDK worker (sdk_bench_worker.py)");
  app.add_option("--out", o.out_dir, "write sdk_overhead.md here");
  app.add_option("--job-timeout-s", o.job_timeout_s, "give up on a job after this long");
  app.add_flag("--keep-work-dir", o.keep_work_dir, "keep the cluster's folder (logs, the worker's figures)");
  CLI11_PARSE(app, argc, argv);

  orch::LocalClusterOptions co = bench::BenchClusterOptions(o.regions, "sdk", orch::DefaultBinDir(argv[0]));
  co.wan_emulation = false;
  co.allow_commands = {o.python};
  co.keep_work_dir = o.keep_work_dir;
  auto cluster = orch::LocalCluster::Start(co);
  if (!cluster.ok()) {
    std::fprintf(stderr, "bench_sdk: %s\n", cluster.status().message().c_str());
    return 1;
  }
  orch::LocalCluster& c = **cluster;
  const fs::path result_dir = c.work_dir() / "sdk-results";
  fs::create_directories(result_dir);
  const auto timeout = std::chrono::seconds(o.job_timeout_s);
  const auto t_start = std::chrono::steady_clock::now();

  std::string outer_table, step_table;
  bool outer_met = false, step_met = false;
  if (!o.skip_outer) {
    std::vector<OuterRow> rows;
    for (double m : o.sizes_m) {
      OuterRow row;
      row.model = DimsFor(m * 1e6);
      const uint64_t n = ParamCount(row.model);
      std::fprintf(stderr, "part 1: %llu parameters (hidden %d)\n", static_cast<unsigned long long>(n),
                   row.model.hidden_dim);
      const v1::JobSpec builtin = BuiltinSpec(row.model, o, co.regions);
      // Built-in and SDK jobs alternate, so that whatever else the machine runs
      // meanwhile weighs on both alike.
      std::vector<bench::E2eRun> builtin_runs, sdk_runs;
      std::vector<double> validation;
      for (uint32_t rep = 0; rep < o.repeats; ++rep) {
        auto b = bench::RunJob(c, builtin, timeout);
        if (!b.ok()) return Fail(b.status(), c);
        builtin_runs.push_back(std::move(*b));
        auto s = bench::RunJob(
            c,
            SdkSpec("sdk-bench SDK " + std::to_string(n), row.model, o, co.regions, o.rounds, o.h, false, result_dir),
            timeout);
        if (!s.ok()) return Fail(s.status(), c);
        // The SDK worker reports the parameters longhaul.torch carried: the same count, or the comparison is off.
        auto carried = ReadWorkerFigures(result_dir, s->status.job_id(), co.regions[0].name);
        if (!carried.ok()) return Fail(carried.status(), c);
        if (carried->result["params"].get<uint64_t>() != n)
          return Fail(Internal("the SDK worker carried " + carried->result["params"].dump() + " parameters, not " +
                               std::to_string(n)),
                      c);
        sdk_runs.push_back(std::move(*s));
        auto v = BuiltinValidationSeconds(row.model, builtin, o.regions);
        if (!v.ok()) return Fail(v.status(), c);
        validation.push_back(*v);
      }
      row.builtin = Measure(builtin_runs);
      row.sdk = Measure(sdk_runs);
      row.validation = bench::Median(validation);
      rows.push_back(row);
    }
    outer_table = OuterTable(rows, o, &outer_met);
    std::printf("Part 1: outer-step overhead, SDK vs built-in worker at the same parameter count\n\n%s\n",
                outer_table.c_str());
    std::fflush(stdout);
  }
  if (!o.skip_steps) {
    const trainer::ModelConfig m = DimsFor(2e6);
    std::fprintf(stderr, "part 2: no-op step() timing, H=%u\n", o.step_h);
    auto run = bench::RunJob(
        c, SdkSpec("sdk-bench step timing", m, o, co.regions, o.step_rounds, o.step_h, true, result_dir), timeout);
    if (!run.ok()) return Fail(run.status(), c);
    auto f = ReadWorkerFigures(result_dir, run->status.job_id(), co.regions[0].name);
    if (!f.ok()) return Fail(f.status(), c);
    step_table = StepTable(*f, o, &step_met);
    std::printf("Part 2: cost of a no-op diloco.step() against an empty Python call\n\n%s\n", step_table.c_str());
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("bench_sdk: %s in all\n", orch::HumanSeconds(total).c_str());
  if (!o.out_dir.empty()) {
    fs::create_directories(o.out_dir);
    std::ofstream(fs::path(o.out_dir) / "sdk_overhead.md")
        << "# bench_sdk: the Python SDK's overhead\n\n"
        << "Printed by `build/bin/bench_sdk --out docs/results` (one run on the 2-core development machine, "
           "Release build, "
        << orch::HumanSeconds(total)
        << "). Every job is real: orchestrator, agents and workers on a LocalCluster, the SDK's worker "
           "`bench/sdk/sdk_bench_worker.py` under Debian's Python and torch.\n\n"
        << (outer_table.empty() ? "" : "## Outer-step overhead at equal parameter count\n\n" + outer_table + "\n")
        << (step_table.empty() ? "" : "## A no-op `diloco.step()`\n\n" + step_table);
    std::fprintf(stderr, "wrote %s/sdk_overhead.md\n", o.out_dir.c_str());
  }
  return 0;
}
