// The plan a round runs with (RoundCommand.plan): the job spec's inner steps
// and codec, or, with sync.adaptive, what re-planning (sync_policies/replan.h)
// chooses from the links and step times measured so far. A pure decision
// function: the orchestrator persists and announces what it returns.
#pragma once

#include <cstdint>
#include <optional>

#include "longhaul/common/status.h"
#include "longhaul/orchestrator/scheduler.h"
#include "longhaul/sync_policies/cu_model.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator {

struct RoundPlanInputs {
  const v1::JobSpec* spec = nullptr;
  v1::RoundPlan current;        // the last round's plan (inner_steps 0: none yet, the spec's)
  uint64_t first_step = 0;      // job-wide inner steps of the committed rounds
  // What re-planning predicts from: the round in the spec's schedule (payload
  // in the spec's codec, the participants' step times; 0 = not measured yet)
  // and the round's ring with every link measured (unset: not yet).
  RoundShape shape;
  std::optional<sync_policies::WanProfile> wan;
  // The last committed round's longest wait and plan (0 / unset = none since
  // the orchestrator started). When it waited more than kUnderpredicted x what
  // the links measured now predict for its plan, the links changed faster than
  // their estimates follow (an estimate moves on two busy periods far off it,
  // reported with the round after): every plan's wait is scaled by that ratio.
  double last_comm_seconds = 0;
  v1::RoundPlan last_plan;
  uint32_t return_streak = 0;  // sync_policies::ReplanDecision's, from the last re-plan
  // Plans predicted to take more than half of this are left out (0 = none):
  // a round past the orchestrator's round timeout is aborted, whatever its CU.
  double round_timeout_seconds = 0;
};

inline constexpr double kUnderpredicted = 1.5;

// A plan's round as the orchestrator predicts it (PredictRoundCommSeconds):
// the fastest participant computes H steps and waits the longest, so its
// utilisation is the round's lowest; that is the one re-planning holds to the target.
// `wait_scale` multiplies the predicted wait (RoundPlanInputs::last_comm_seconds).
Result<sync_policies::CuEstimate> PredictPlannedRound(const RoundShape& shape, const v1::JobSpec& spec,
                                                      const sync_policies::WanProfile& wan, const v1::RoundPlan& plan,
                                                      double wait_scale = 1);

struct ChosenRoundPlan {
  v1::RoundPlan plan;
  bool changed = false;        // differs from inputs.current (a re-plan)
  uint32_t return_streak = 0;  // for the next round's inputs
};

ChosenRoundPlan ChooseRoundPlan(const RoundPlanInputs& in);

// The size of an exchange of `bytes` in codec `from` in codec `to` (the spec's
// block size and top-k fraction); `bytes` itself when either is unknown.
uint64_t ConvertPayloadBytes(const v1::JobSpec& spec, uint64_t bytes, v1::Codec from, v1::Codec to);

// sync.time_budgeted: a round's compute is H steps of the fastest participant
// for every region (a slower one runs fewer steps), so the fastest sets the pace
// and nobody waits for another's steps. Other jobs: the shape as measured.
RoundShape PacedShape(RoundShape measured, const v1::JobSpec& spec);

// The shape of a round run with `plan` (its H; the payload in its codec).
RoundShape ShapeWithPlan(RoundShape shape, const v1::JobSpec& spec, const v1::RoundPlan& plan);

}  // namespace longhaul::orchestrator
