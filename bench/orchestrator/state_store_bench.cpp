// bench_state_store: the cost of checkpointing every acknowledged write.
//
// The state store checkpoints each committed write into the main file and
// truncates the WAL before the write returns (so a WAL deleted, truncated or
// damaged after a crash loses nothing acknowledged). This prints writes/s of
// the orchestrator's commonest writes (create a job, save it, append an event)
// with that checkpoint and without it (SQLite's WAL alone, synchronous=FULL),
// on the same disk in the same run, alternating the two over several repeats,
// and the ratio of the medians.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "longhaul/orchestrator/state_store.h"
#include "support/temp_dir.h"

using namespace longhaul;
using Clock = std::chrono::steady_clock;

namespace {

// Writes per second over `jobs` jobs: each created, saved once and given an event.
double WritesPerSecond(const std::filesystem::path& dir, bool checkpoint, int jobs, int repeat) {
  const auto file = dir / ("state-" + std::to_string(repeat) + (checkpoint ? "-ckpt" : "-wal") + ".sqlite");
  auto opened = orchestrator::StateStore::Open(file);
  if (!opened.ok()) {
    std::fprintf(stderr, "bench_state_store: %s\n", opened.status().ToString().c_str());
    std::exit(1);
  }
  auto& store = **opened;
  store.SetCheckpointOnCommit(checkpoint);
  v1::JobSpec spec;
  spec.set_name("bench");
  spec.add_regions("eu-west");
  const auto t0 = Clock::now();
  for (int i = 0; i < jobs; ++i) {
    auto id = store.CreateJob(spec, 1.0 + i);
    orchestrator::JobRecord rec;
    rec.id = id.ok() ? *id : "";
    rec.spec = spec;
    rec.state = orchestrator::JobState::kScheduled;
    if (!id.ok() || !store.SaveJob(rec).ok() || !store.AppendEvent(rec.id, "scheduled", "bench", 1.0 + i).ok()) {
      std::fprintf(stderr, "bench_state_store: a write failed\n");
      std::exit(1);
    }
  }
  return 3.0 * jobs / std::chrono::duration<double>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_state_store: writes/s with and without a checkpoint on every acknowledged write"};
  int jobs = 300, repeats = 5;
  app.add_option("--jobs", jobs, "jobs per run (3 writes each)")->check(CLI::Range(1, 100000));
  app.add_option("--repeats", repeats, "runs of each mode, alternating")->check(CLI::Range(1, 50));
  CLI11_PARSE(app, argc, argv);
  const testing::TempDir tmp("bench-state");
  std::vector<double> with, without;
  for (int r = 0; r < repeats; ++r) {
    without.push_back(WritesPerSecond(tmp.path(), false, jobs, r));
    with.push_back(WritesPerSecond(tmp.path(), true, jobs, r));
    std::printf("repeat %d: WAL only %.0f writes/s, checkpoint on every write %.0f writes/s\n", r + 1, without.back(),
                with.back());
  }
  const double a = Median(with), b = Median(without);
  std::printf("median: checkpoint on every write %.0f writes/s, WAL only %.0f writes/s, ratio %.2fx\n", a, b, a / b);
  return 0;
}
