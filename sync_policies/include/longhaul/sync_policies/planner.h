// Planning a job before it runs: the candidate schedules, each with the CU
// model's prediction (cu_model.h) on the given compute and WAN, and the one to
// run with the reason. A pure decision function.
//
// Candidates are ordered from the most synchronous (data parallelism, then
// DiLoCo with small H) to the least (large H, fewer bits per value, Streaming
// DiLoCo's fragments); the sweep in docs/results/convergence.md shows the
// validation loss growing, slowly, in that direction, and the codecs from fp32
// to int8 costing nothing measurable. The plan is the first candidate whose
// predicted CU meets the target; when none does, the one with the highest CU.
#pragma once

#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/codec.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/cu_model.h"

namespace longhaul::sync_policies {

struct PlanCandidate {
  std::string name;  // e.g. "DiLoCo H=50 int8"
  PlanSchedule schedule;
  Codec codec = Codec::kInt8Block;
  CuEstimate estimate;  // filled by ChoosePlan
};

struct PlanDecision {
  std::vector<PlanCandidate> candidates;  // in order of preference, each with its estimate
  int chosen = -1;                        // index into candidates
  bool meets_target = false;
  std::string reason;
};

// The candidate table, in order of preference (layerwise: see cu_model.h).
std::vector<PlanCandidate> CandidateSchedules(bool layerwise);

// Bits per value on the wire with these options: the codec's own encoded size
// (scales, top-k indices included) over a large vector.
Result<double> WireBitsPerValue(const CompressionOptions& compression);

Result<PlanDecision> ChoosePlan(const ComputeProfile& compute, const WanProfile& wan, double target_cu,
                                bool layerwise = false);

}  // namespace longhaul::sync_policies
