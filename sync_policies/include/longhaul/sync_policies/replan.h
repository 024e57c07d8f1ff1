// Re-planning a running job between rounds (sync.adaptive): given the links
// and step times measured so far, which inner-step count and codec the next
// round runs with. A pure decision function with its reason.
//
// The plans within the bounds, most synchronous first: H from the spec's,
// doubling up to max_inner_steps (and max_inner_steps itself); at each H,
// Streaming DiLoCo's overlap tau from the spec's, doubling up to
// max_overlap_steps (and the largest below H / P), and at each the allowed
// codecs in the spec's order (H grows the WAN's share of a round down by 1/H;
// tau hides a fragment's exchange behind compute and delays its mixing;
// docs/results/convergence.md: int4 and fp4 cost less validation loss than
// doubling H). Each is predicted with the CU model (cu_model.h).
//
//  - The current plan predicted at or above the target stays, unless a more
//    synchronous plan is predicted at least `hysteresis` above the target in
//    `rounds_to_return` re-plans in a row (step times and links measured on a
//    busy machine vary from round to round: a plan that went back on one good
//    prediction flipped every round in bench_link_drop). Dropping below the
//    target is acted on at once.
//  - Below the target: the most synchronous plan predicted to meet it; when
//    none does, the one predicted highest.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/codec.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/cu_model.h"

namespace longhaul::sync_policies {

struct AdaptiveBounds {
  double target_cu = 0;            // in (0, 1]
  uint32_t max_inner_steps = 0;    // 0: the base schedule's H only
  uint32_t max_overlap_steps = 0;  // Streaming DiLoCo: 0: the base schedule's tau only
  std::vector<Codec> codecs;       // preference order; empty: the base codec only
  double hysteresis = 0.05;        // CU points above the target to return to a more synchronous plan
  uint32_t rounds_to_return = 3;   // re-plans in a row that must say so
};

struct RoundPlanChoice {
  uint32_t inner_steps = 0;
  Codec codec = Codec::kInt8Block;
  uint32_t overlap_steps = 0;  // tau (Streaming DiLoCo)
  bool operator==(const RoundPlanChoice&) const = default;
};

std::string PlanChoiceName(const RoundPlanChoice& plan);  // "H=200 int4", "H=96 tau=11 int8"

struct ReplanDecision {
  RoundPlanChoice plan;
  CuEstimate estimate;      // of `plan`
  double current_cu = 0;    // the current plan's prediction
  bool changed = false;     // plan != current
  bool meets_target = false;
  // Re-plans in a row so far that found a more synchronous plan above the
  // target by the hysteresis (the next call's `return_streak`).
  uint32_t return_streak = 0;
  std::string reason;
};

// The plans in order of preference. `base` is the spec's schedule (its
// inner_steps the smallest H); `compression` the spec's codec options (block
// size, top-k fraction), its codec the one used when bounds.codecs is empty.
std::vector<RoundPlanChoice> AdaptivePlans(const PlanSchedule& base, const CompressionOptions& compression,
                                           const AdaptiveBounds& bounds);

// A plan's predicted round. CuModelPredictor: the CU model's steady-state round
// of `base` with the plan's H and codec; a caller may add what the model does
// not know (the orchestrator: uneven regions waiting for the slowest).
using PlanPredictor = std::function<Result<CuEstimate>(const RoundPlanChoice&)>;
PlanPredictor CuModelPredictor(const ComputeProfile& compute, const WanProfile& wan, const PlanSchedule& base,
                               const CompressionOptions& compression);

// `plans` in order of preference (AdaptivePlans); `current` need not be one of
// them (it is predicted all the same).
Result<ReplanDecision> Replan(const std::vector<RoundPlanChoice>& plans, const AdaptiveBounds& bounds,
                              const RoundPlanChoice& current, const PlanPredictor& predict,
                              uint32_t return_streak = 0);

}  // namespace longhaul::sync_policies
