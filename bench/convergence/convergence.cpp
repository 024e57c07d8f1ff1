// bench_convergence: DiLoCo and its variants against true synchronous data
// parallelism, each tuned fairly, end to end.
//
// Every run is a real job on a LocalCluster (orchestrator, one agent per
// region, workers, CURVE): the built-in trainer on the synthetic Markov source
// (known loss floor) or on a text file. Loss runs use plain loopback links
// (the loss does not depend on the link); each row's best point then runs a
// few rounds behind emulated WAN links (longhaul-linkem) for the wall-time
// column. Plan, grids and seeds: convergence_plan.h; the aggregation:
// convergence_report.h. --out DIR writes convergence.md (the table),
// convergence_sweep.tsv (every run) and convergence.tsv (the best points'
// curves, for plot.sh). --quick is the CI's end-to-end check of all of it.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "convergence_plan.h"
#include "convergence_report.h"
#include "e2e_run.h"
#include "longhaul/orchestrator/demo.h"

using namespace longhaul;
using namespace longhaul::bench;
namespace orch = longhaul::orchestrator;
namespace fs = std::filesystem;

namespace {

// Debian's license texts (base-files, on every Debian machine), concatenated
// in name order: about 200 KB of English prose.
Result<std::string> DefaultTextFile(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/share/common-licenses", ec))
    if (e.is_regular_file()) files.push_back(e.path());
  if (ec || files.empty()) return NotFound("no text file: /usr/share/common-licenses is empty; pass --text-file");
  std::sort(files.begin(), files.end());
  const fs::path out = dir / "licenses.txt";
  std::ofstream o(out, std::ios::binary);
  for (const auto& f : files) o << std::ifstream(f, std::ios::binary).rdbuf();
  if (!o) return Internal("cannot write " + out.string());
  return out.string();
}

std::string LinkSummary() {
  std::string s;
  for (const auto& r : BenchRegions(4)) {
    char b[128];
    std::snprintf(b, sizeof(b), "%s %.0f Mbit/s %.0f ms", r.name.c_str(), r.rate_mbit, r.delay_ms);
    s += (s.empty() ? "" : "; ") + std::string(b);
  }
  return s;
}

uint32_t MaxRegions(const std::vector<Row>& plan) {
  uint32_t n = 0;
  for (const auto& r : plan) n = std::max(n, r.setting.regions);
  return n;
}

std::vector<std::string> Names(const orch::LocalClusterOptions& co) {
  std::vector<std::string> names;
  for (const auto& r : co.regions) names.push_back(r.name);
  return names;
}

// A folder of the bench's own for the text file: it must outlive both
// clusters (loss runs on loopback, then the wall runs behind emulated links).
class ScratchDir {
 public:
  ScratchDir() {
    std::string templ = "/tmp/longhaul-bench-convergence-text-XXXXXX";
    if (::mkdtemp(templ.data()) != nullptr) path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "bench_convergence: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only, out_dir, text_file;
  int job_timeout_s = 900, wall_rounds = 3;
  uint32_t seeds = 0, total_steps = 0;
  CLI::App app{"bench_convergence: DiLoCo and its variants vs tuned synchronous data parallelism, real processes"};
  app.add_flag("--quick", quick, "the CI plan: 200 steps, 2 seeds, 3 rows, a grid of 1-2 points (under 3 minutes)");
  app.add_option("--only", only,
                 "run one group (and the sync rows it needs): H | outer | codec | streaming | method | regions | data")
      ->check(CLI::IsMember({"H", "outer", "codec", "streaming", "method", "regions", "data"}));
  app.add_option("--seeds", seeds, "seeds per point (default 3; --quick 2)")->check(CLI::Range(1, 100));
  app.add_option("--total-steps", total_steps, "inner steps per worker in every run (default 5000; --quick 200)")
      ->check(CLI::Range(10, 1000000));
  app.add_option("--wall-rounds", wall_rounds, "rounds per row run behind emulated links for the wall column (0 = none)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--text-file", text_file, "text for the 'text' rows (default: /usr/share/common-licenses/*)");
  app.add_option("--out", out_dir, "write convergence.md, convergence_sweep.tsv and convergence.tsv here");
  app.add_option("--job-timeout-s", job_timeout_s, "give up on a job after this long");
  std::vector<double> sync_lrs, diloco_lrs;
  std::vector<std::string> outer_points;
  app.add_option("--sync-lrs", sync_lrs, "the sync rows' inner lr grid (default 0.0025 0.005 0.01 0.02)");
  app.add_option("--diloco-lrs", diloco_lrs, "the DiLoCo rows' inner lr grid (default 0.005 0.01 0.02)");
  app.add_option("--outer", outer_points, "the DiLoCo rows' outer LR:MOMENTUM grid (default 0.7:0.5 0.5:0)");
  CLI11_PARSE(app, argc, argv);

  const std::vector<Row> plan = quick ? QuickPlan() : FullPlan(only);
  PlanOptions o = quick ? QuickOptions() : FullOptions();
  if (seeds > 0) o.seeds = seeds;
  if (total_steps > 0) o.total_steps = total_steps;
  if (!sync_lrs.empty()) o.sync_grid.inner_lrs = sync_lrs;
  if (!diloco_lrs.empty()) o.diloco_grid.inner_lrs = diloco_lrs;
  if (!outer_points.empty()) {
    o.diloco_grid.outer.clear();
    for (const auto& p : outer_points) {
      const auto colon = p.find(':');
      try {
        if (colon == std::string::npos) throw std::invalid_argument(p);
        o.diloco_grid.outer.emplace_back(std::stod(p.substr(0, colon)), std::stod(p.substr(colon + 1)));
      } catch (const std::exception&) {
        return Fail("--outer '" + p + "' must be LR:MOMENTUM, e.g. 0.7:0.9");
      }
    }
  }
  if (quick && wall_rounds > 1) wall_rounds = 1;

  orch::LocalClusterOptions co = BenchClusterOptions(MaxRegions(plan), "convergence", orch::DefaultBinDir(argv[0]));
  co.wan_emulation = false;
  co.validation_batches = 32;  // the default 4 differs by ~4% between parameter vectors: too coarse here
  co.say = nullptr;
  auto cluster = orch::LocalCluster::Start(co);
  if (!cluster.ok()) return Fail(cluster.status().message());
  o.text_file = text_file;
  ScratchDir scratch;
  if (o.text_file.empty()) {
    if (scratch.path().empty()) return Fail("cannot create a folder under /tmp for the text file");
    auto text = DefaultTextFile(scratch.path());
    if (!text.ok()) return Fail(text.status().message());
    o.text_file = *text;
  }

  size_t total = 0;
  for (const auto& row : plan) total += RowPoints(row, o).size() * o.seeds;
  std::vector<RunRecord> runs;
  runs.reserve(total);
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& row : plan) {
    const bool sync = row.policy.is_sync();
    for (const Point& point : RowPoints(row, o)) {
      for (uint32_t seed = 1; seed <= o.seeds; ++seed) {
        const v1::JobSpec spec = SpecFor(row, point, seed, o, Names(co));
        std::fprintf(stderr, "run %zu/%zu (%.0f s): %s / %s\n", runs.size() + 1, total,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), spec.name().c_str(),
                     point.Name(sync).c_str());
        auto run = RunJob(**cluster, spec, std::chrono::seconds(job_timeout_s), std::chrono::milliseconds(50));
        if (!run.ok()) return Fail(run.status().message() + " (logs: " + (*cluster)->log_dir().string() + ")");
        RunRecord rec{row, point, seed, run->status.val_loss(), run->status.loss_floor(), run->status.wan_bytes(),
                      run->status.total_rounds(), {}};
        uint64_t bytes = 0;
        for (const auto& c : run->rounds) rec.curve.emplace_back(bytes += c.wan_bytes, c.val_loss);
        runs.push_back(std::move(rec));
      }
    }
  }
  cluster->reset();
  std::vector<RowSummary> rows = Summarize(runs);
  if (!out_dir.empty()) {
    // The sweep first: a failure in the wall phase must not lose the runs.
    fs::create_directories(out_dir);
    std::ofstream(fs::path(out_dir) / "convergence_sweep.tsv") << SweepTsv(runs);
  }

  if (wall_rounds > 0) {
    // Wall time behind emulated WAN links: each row's best point, a few rounds,
    // scaled to the run's rounds by the mean committed round's wall time.
    orch::LocalClusterOptions wo = co;
    wo.wan_emulation = true;
    auto emulated = orch::LocalCluster::Start(wo);
    if (!emulated.ok()) return Fail(emulated.status().message());
    for (auto& row : rows) {
      v1::JobSpec spec = SpecFor(row.row, row.Best().point, 1, o, Names(co));
      const uint32_t rounds = spec.rounds();
      spec.set_rounds(std::min<uint32_t>(rounds, static_cast<uint32_t>(wall_rounds)));
      spec.set_name(spec.name() + " / wall");
      std::fprintf(stderr, "wall: %s\n", spec.name().c_str());
      auto run = RunJob(**emulated, spec, std::chrono::seconds(job_timeout_s), std::chrono::milliseconds(50));
      if (!run.ok()) {  // the row keeps "-" in the wall column; the loss figures stand
        std::fprintf(stderr, "bench_convergence: wall run failed: %s\n", run.status().message().c_str());
        continue;
      }
      double per_round = 0;
      for (const auto& c : run->rounds) per_round += c.wall_seconds / static_cast<double>(run->rounds.size());
      row.wall_seconds = per_round * rounds;
    }
  }

  const std::string table = Table(rows, o);
  std::printf("%s", table.c_str());
  std::fprintf(stderr, "%zu runs in %.0f s\n", runs.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!out_dir.empty()) {
    std::ofstream(fs::path(out_dir) / "convergence.md")
        << "# bench_convergence\n\nPrinted by `bench_convergence" << (quick ? " --quick" : "")
        << "` (regenerate this file, convergence_sweep.tsv, convergence.tsv and convergence.png with "
           "`bench/convergence/regenerate.sh`). Every run is a real job: orchestrator, one agent per region, "
           "workers, CURVE links; loss runs on loopback, the wall column from "
        << wall_rounds << " round(s) of the best point behind emulated WAN links (" << LinkSummary()
        << "), scaled to the run's rounds.\n\n"
        << table << "\n![validation loss vs WAN bytes](convergence.png)\n";
    std::ofstream(fs::path(out_dir) / "convergence.tsv") << CurvesTsv(rows);
    std::fprintf(stderr, "wrote %s/convergence.md, convergence_sweep.tsv and convergence.tsv\n", out_dir.c_str());
  }
  return 0;
}
