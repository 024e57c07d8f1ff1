// Table 4 of Streaming DiLoCo (arXiv 2501.18512): the inter-region bandwidth
// (Gbit/s) each method needs for a compute utilisation of 50/80/90/95/99%, for
// models of 1B, 10B and 100B parameters, and the same cells predicted by
// sync_policies' CU model under the table's stated assumptions (H = 100,
// 3-layer strided fragments, bf16 or FP4 values, step time from the Kaplan rule
// at 60% MFU, two replicas, no latency, exchanges overlapped layer by layer
// with the backward pass). docs/planning.md compares them.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/cu_model.h"

namespace longhaul::bench {

inline constexpr std::array<double, 5> kTable4Cu = {0.50, 0.80, 0.90, 0.95, 0.99};

struct PaperRow {
  std::string model;   // "1B", "10B", "100B"
  std::string method;  // as the paper names it
  sync_policies::ComputeProfile compute;
  sync_policies::PlanSchedule schedule;
  std::array<double, 5> paper_gbit;  // printed cells, by kTable4Cu
};

// The 15 rows (3 models x 5 methods), in the paper's order.
std::vector<PaperRow> StreamingDiLoCoTable4();

// The model's bandwidth (Gbit/s) for each of the row's CU targets.
Result<std::array<double, 5>> Predict(const PaperRow& row);

// The paper's cells are the smallest of 50 log-spaced bandwidths from 0.1 to
// 1000 Gbit/s that reach the target: `gbit` rounded up onto that grid.
double OnPaperGrid(double gbit);

// Markdown: each row's predicted cells beside the paper's, with the deviation.
Result<std::string> Table4Markdown();

}  // namespace longhaul::bench
