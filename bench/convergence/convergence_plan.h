// What bench_convergence runs: settings (regions, data), policies (sync, DiLoCo
// variants, the methods that close the gap), and per policy a grid of
// hyperparameter points, every point at several seeds. Every run of a
// comparison has the same compute and tokens (total_steps inner steps per
// worker at one batch size), so a DiLoCo run with H inner steps has
// total_steps / H rounds (outer steps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "longhaul/sync_policies/sync_kind.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::bench {

struct Setting {
  uint32_t regions = 3;
  std::string data = "non-iid";  // iid | non-iid | text
  std::string Name() const { return std::to_string(regions) + " regions, " + data; }
};

// A method that closes the gap (job spec fields): an outer-optimizer schedule,
// or the inner moments averaged across regions (DES-LOC).
enum class Method { kNone, kWarmupCosine, kMomentumWarmup, kMomentumRestarts, kMomentSync };

struct Policy {
  std::string group;  // the question it answers: sync | H | codec | streaming | method | regions | data
  sync_policies::SyncKind kind = sync_policies::SyncKind::kDiLoCo;
  uint32_t h = 50;
  v1::Codec codec = v1::CODEC_INT8_BLOCK;
  double topk_fraction = 0;  // compression.topk_fraction of a sparse codec; 0 = the job default (1%)
  uint32_t fragments = 1, overlap_steps = 0;  // streaming
  double mixing_alpha = 0.5;
  Method method = Method::kNone;
  std::pair<uint32_t, uint32_t> moment_sync_rounds;  // kMomentSync: m's and v's periods in rounds
  bool published_outer = false;  // DiLoCo's published outer lr 0.7, momentum 0.9 only (inner lr still swept)
  std::string Name() const;
  bool is_sync() const { return kind == sync_policies::SyncKind::kSync; }
};

// One hyperparameter point of a policy's sweep (outer fields unused by sync).
struct Point {
  double inner_lr = 0.02;
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  std::string Name(bool sync) const;
};

struct Grid {
  std::vector<double> inner_lrs;
  std::vector<std::pair<double, double>> outer;  // (lr, momentum)
  std::vector<Point> Points(bool sync) const;
};
inline constexpr std::pair<double, double> kPublishedOuter = {0.7, 0.9};  // DiLoCo's Nesterov lr and momentum

struct PlanOptions {
  uint32_t total_steps = 5000;
  uint32_t batch = 16;
  uint32_t seeds = 3;
  std::string preset = "tiny";
  std::string text_file;
  Grid sync_grid, diloco_grid;
  uint32_t sync_round_steps = 50;  // the baseline's steps per (reporting) round
};

struct Row {
  Setting setting;
  Policy policy;
};
// The points a row's sweep runs.
std::vector<Point> RowPoints(const Row& row, const PlanOptions& o);

// The full plan: the central setting (3 regions, non-IID) with every policy,
// and sync against DiLoCo H=50 int8 in each other setting. `only` keeps one
// group (and the sync rows its settings need).
std::vector<Row> FullPlan(const std::string& only = "");
// The CI plan: the central setting, sync, DiLoCo H=50 int8 and one method.
std::vector<Row> QuickPlan();
PlanOptions FullOptions();
PlanOptions QuickOptions();

// The job spec of one run.
v1::JobSpec SpecFor(const Row& row, const Point& point, uint32_t seed, const PlanOptions& o,
                    const std::vector<std::string>& region_names);

}  // namespace longhaul::bench
