// bench_convergence's results: every run of the sweep, each point's mean and
// spread over seeds, each policy at its best point (lowest mean validation
// loss), compared with the best-tuned synchronous baseline of its setting.
// Pure functions of the runs: unit-tested without running anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convergence_plan.h"

namespace longhaul::bench {

struct RunRecord {
  Row row;
  Point point;
  uint32_t seed = 0;
  double val_loss = 0;
  double loss_floor = 0;   // 0: unknown (text)
  uint64_t wan_bytes = 0;
  uint32_t rounds = 0;
  std::vector<std::pair<uint64_t, double>> curve;  // per committed round: cumulative WAN bytes, val loss
};

struct PointSummary {
  Point point;
  std::vector<const RunRecord*> runs;  // one per seed
  double mean = 0, stdev = 0;          // of val_loss over seeds (sample stdev)
  double floor = 0;                    // mean loss floor over seeds (0: unknown)
  double wan_bytes = 0;                // mean over seeds
};

struct RowSummary {
  Row row;
  std::vector<PointSummary> points;  // the grid, in plan order
  size_t best = 0;                   // index into points: lowest mean
  bool best_on_edge = false;         // best inner lr is the grid's smallest or largest
  std::optional<double> wall_seconds;  // estimated from emulated links (best point), if measured
  const PointSummary& Best() const { return points.at(best); }
};

// Groups runs by (row, point) in the order rows and points first appear.
std::vector<RowSummary> Summarize(const std::vector<RunRecord>& runs);

// The best sync row of a setting, or null.
const RowSummary* BaselineOf(const std::vector<RowSummary>& rows, const std::string& setting);

struct TargetCheck {
  std::string setting;
  std::string policy;  // the row checked
  bool present = false;
  double gap = 0;        // DiLoCo H=50 int8 mean / best sync mean - 1
  double reduction = 0;  // sync WAN bytes / DiLoCo WAN bytes
  bool met = false;      // gap <= 2% and reduction >= 100
};
TargetCheck CheckTarget(const std::vector<RowSummary>& rows, const std::string& setting);
// Among DiLoCo H=50 int8 rows with a method (job spec fields) that keep >= 100x
// fewer WAN bytes, the one closest to the baseline; present = false if none.
TargetCheck ClosestWithMethod(const std::vector<RowSummary>& rows, const std::string& setting);

// Markdown: one line per row at its best point (mean +- stdev, gap to floor,
// vs the setting's best sync, WAN bytes, reduction, wall), then the targets.
std::string Table(const std::vector<RowSummary>& rows, const PlanOptions& o);
// TSV of every run: setting, policy, point, seed, val loss, floor, WAN bytes, rounds.
std::string SweepTsv(const std::vector<RunRecord>& runs);
// TSV of the curves of each row's best point, first seed (bench/convergence/plot.sh).
std::string CurvesTsv(const std::vector<RowSummary>& rows);

}  // namespace longhaul::bench
