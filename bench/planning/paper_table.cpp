#include "paper_table.h"

#include <cmath>
#include <sstream>

#include "longhaul/common/format_number.h"

namespace longhaul::bench {
namespace {

using sync_policies::PlanKind;
using sync_policies::PlanSchedule;

}  // namespace

std::vector<PaperRow> StreamingDiLoCoTable4() {
  struct Model {
    const char* name;
    double params;
    uint32_t layers;
    double step_seconds;
    std::array<std::array<double, 5>, 5> cells;  // DP, DiLoCo, Streaming, + overlap, + overlap FP4
  };
  const Model models[] = {
      {"1B", 1e9, 24, 0.1,
       {{{86.8, 152.6, 184.2, 222.3, 569.0},
         {1.4, 6.2, 13.3, 23.3, 86.8},
         {1.4, 5.2, 9.1, 16.0, 28.1},
         {1.4, 4.3, 6.2, 9.1, 11.0},
         {0.4, 0.9, 1.7, 2.0, 3.0}}}},
      {"10B", 10e9, 48, 0.8,
       {{{104.8, 222.3, 222.3, 268.3, 471.5},
         {1.7, 7.5, 16.0, 33.9, 104.8},
         {1.7, 5.2, 9.1, 13.3, 19.3},
         {1.7, 3.6, 5.2, 6.2, 7.5},
         {0.4, 0.9, 1.4, 1.4, 1.7}}}},
      {"100B", 100e9, 108, 4.9,
       {{{184.2, 323.8, 390.7, 390.7, 471.5},
         {3.0, 11.0, 23.3, 49.4, 184.2},
         {2.4, 6.2, 9.1, 11.0, 19.3},
         {1.7, 3.6, 4.3, 5.2, 5.2},
         {0.5, 0.9, 1.1, 1.1, 1.4}}}},
  };
  std::vector<PaperRow> rows;
  for (const Model& m : models) {
    const sync_policies::ComputeProfile compute{m.params, m.layers, m.step_seconds};
    const uint32_t fragments = m.layers / 3;
    const PlanSchedule schedules[] = {
        {.kind = PlanKind::kDataParallel, .inner_steps = 1},
        {.kind = PlanKind::kDiLoCo, .inner_steps = 100},
        {.kind = PlanKind::kStreamingDiLoCo, .inner_steps = 100, .fragments = fragments},
        {.kind = PlanKind::kStreamingDiLoCo, .inner_steps = 100, .fragments = fragments, .overlap_steps = 1},
        {.kind = PlanKind::kStreamingDiLoCo, .inner_steps = 100, .fragments = fragments, .overlap_steps = 1,
         .bits_per_value = 4},
    };
    const char* names[] = {"Data-parallel", "Vanilla DiLoCo", "Streaming DiLoCo", "Streaming DiLoCo, overlapped",
                           "Streaming DiLoCo, overlapped, FP4"};
    for (int i = 0; i < 5; ++i) rows.push_back({m.name, names[i], compute, schedules[i], m.cells[i]});
  }
  return rows;
}

Result<std::array<double, 5>> Predict(const PaperRow& row) {
  std::array<double, 5> out{};
  const sync_policies::WanProfile wan{.regions = 2, .bandwidth_bps = 1e9, .rtt_seconds = 0};
  for (size_t i = 0; i < kTable4Cu.size(); ++i) {
    LONGHAUL_ASSIGN_OR_RETURN(double bps, sync_policies::BandwidthForCu(row.compute, wan, row.schedule, kTable4Cu[i]));
    out[i] = bps / 1e9;
  }
  return out;
}

double OnPaperGrid(double gbit) {
  for (int k = 0; k < 50; ++k) {
    const double b = std::pow(10.0, -1.0 + 4.0 * k / 49.0);
    if (b >= gbit * (1 - 1e-9)) return b;
  }
  return INFINITY;
}

Result<std::string> Table4Markdown() {
  std::ostringstream t;
  t << "| model | method | CU 50% | CU 80% | CU 90% | CU 95% | CU 99% |\n|---|---|---|---|---|---|---|\n";
  for (const PaperRow& row : StreamingDiLoCoTable4()) {
    LONGHAUL_ASSIGN_OR_RETURN(auto ours, Predict(row));
    t << "| " << row.model << " | " << row.method;
    for (size_t i = 0; i < ours.size(); ++i) {
      t << " | " << FormatNumber("%.1f", ours[i]) << " (" << FormatNumber("%.1f", row.paper_gbit[i]) << ", "
        << FormatNumber("%+.0f%%", 100 * (ours[i] / row.paper_gbit[i] - 1)) << ")";
    }
    t << " |\n";
  }
  return t.str();
}

}  // namespace longhaul::bench
