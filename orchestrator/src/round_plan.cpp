#include "longhaul/orchestrator/round_plan.h"

#include <cmath>
#include <cstdio>

#include "longhaul/proto/wire_enums.h"
#include "longhaul/sync_policies/planner.h"
#include "longhaul/sync_policies/replan.h"

namespace longhaul::orchestrator {
namespace {

namespace sp = longhaul::sync_policies;

// Bits per value on the wire of the spec's compression with `codec` (0 if invalid).
double BitsPerValue(const v1::JobSpec& spec, v1::Codec codec) {
  auto options = proto::CompressionFromWire(spec.compression());
  auto c = proto::CodecFromWire(codec);
  if (!options.ok() || !c.ok()) return 0;
  options->codec = *c;
  auto bits = sp::WireBitsPerValue(*options);
  return bits.ok() ? *bits : 0;
}

v1::RoundPlan SpecPlan(const v1::JobSpec& spec) {
  v1::RoundPlan p;
  p.set_inner_steps(spec.sync().inner_steps());
  p.set_codec(spec.compression().codec());
  p.set_overlap_steps(spec.sync().overlap_steps());
  return p;
}

}  // namespace

uint64_t ConvertPayloadBytes(const v1::JobSpec& spec, uint64_t bytes, v1::Codec from, v1::Codec to) {
  const double from_bits = BitsPerValue(spec, from), to_bits = BitsPerValue(spec, to);
  if (from_bits <= 0 || to_bits <= 0 || from == to) return bytes;
  return static_cast<uint64_t>(std::llround(static_cast<double>(bytes) * to_bits / from_bits));
}

RoundShape PacedShape(RoundShape measured, const v1::JobSpec& spec) {
  if (!spec.sync().time_budgeted() || measured.fastest_step_seconds <= 0) return measured;
  measured.step_seconds = measured.fastest_step_seconds;
  measured.fastest_step_seconds = 0;
  return measured;
}

RoundShape ShapeWithPlan(RoundShape shape, const v1::JobSpec& spec, const v1::RoundPlan& plan) {
  if (plan.inner_steps() == 0) return shape;
  shape.inner_steps = plan.inner_steps();
  shape.overlap_steps = plan.overlap_steps();
  shape.payload_bytes = ConvertPayloadBytes(spec, shape.payload_bytes, spec.compression().codec(), plan.codec());
  return shape;
}

Result<sp::CuEstimate> PredictPlannedRound(const RoundShape& shape, const v1::JobSpec& spec, const sp::WanProfile& wan,
                                          const v1::RoundPlan& plan, double wait_scale) {
  const RoundShape planned = ShapeWithPlan(shape, spec, plan);
  if (planned.step_seconds <= 0 || planned.payload_bytes == 0) return FailedPrecondition("nothing measured yet");
  sp::CuEstimate e;
  const double step = planned.fastest_step_seconds > 0 ? planned.fastest_step_seconds : planned.step_seconds;
  e.compute_seconds = planned.inner_steps * step;
  e.stall_seconds = PredictRoundCommSeconds(planned, wan) * wait_scale;
  e.round_seconds = e.compute_seconds + e.stall_seconds;
  e.cu = e.round_seconds > 0 ? e.compute_seconds / e.round_seconds : 0;
  return e;
}

namespace {

// H and codec: the spec's, or re-planned within sync.adaptive's bounds.
ChosenRoundPlan ChooseStepsAndCodec(const RoundPlanInputs& in) {
  const v1::JobSpec& spec = *in.spec;
  ChosenRoundPlan out;
  const v1::RoundPlan current = in.current.inner_steps() != 0 ? in.current : SpecPlan(spec);
  out.plan = current;
  out.plan.set_first_step(in.first_step);
  out.plan.set_predicted_cu(0);
  // Set afresh for each round by ChooseRoundPlan (a restarted orchestrator has
  // no step times to set a budget from).
  out.plan.clear_compute_budget_seconds();
  out.plan.clear_max_inner_steps();
  if (!spec.sync().has_adaptive()) {
    out.plan.set_reason("the job spec's schedule");
    return out;
  }
  const auto& adaptive = spec.sync().adaptive();
  auto compression = proto::CompressionFromWire(spec.compression());
  auto current_codec = proto::CodecFromWire(current.codec());
  if (!compression.ok() || !current_codec.ok()) {
    out.plan.set_reason("keeps its plan: the spec's codec does not translate");
    return out;
  }
  if (!in.wan || in.shape.step_seconds <= 0 || in.shape.payload_bytes == 0) {
    out.plan.set_reason("keeps " + sp::PlanChoiceName({current.inner_steps(), *current_codec, current.overlap_steps()}) +
                        ": no measured links and step times to re-plan from yet");
    return out;
  }
  sp::AdaptiveBounds bounds{.target_cu = adaptive.target_utilisation(),
                            .max_inner_steps = adaptive.max_inner_steps(),
                            .max_overlap_steps = adaptive.max_overlap_steps()};
  for (int i = 0; i < adaptive.codecs_size(); ++i) {
    auto c = proto::CodecFromWire(adaptive.codecs(i));
    if (c.ok()) bounds.codecs.push_back(*c);
  }
  // The model against the last committed round: how far its wait was above
  // what the links measured now predict for its plan.
  double scale = 1;
  std::string calibration;
  if (in.last_plan.inner_steps() != 0) {
    if (auto last = PredictPlannedRound(in.shape, spec, *in.wan, in.last_plan);
        last.ok() && last->stall_seconds > 0 && in.last_comm_seconds > kUnderpredicted * last->stall_seconds) {
      scale = in.last_comm_seconds / last->stall_seconds;
      char text[160];
      std::snprintf(text, sizeof text,
                    "; the last round waited %.2f s where the measured links predict %.2f s: waits x%.1f",
                    in.last_comm_seconds, last->stall_seconds, scale);
      calibration = text;
    }
  }
  auto to_plan = [](const sp::RoundPlanChoice& p) {
    v1::RoundPlan plan;
    plan.set_inner_steps(p.inner_steps);
    plan.set_codec(proto::CodecToWire(p.codec));
    plan.set_overlap_steps(p.overlap_steps);
    return plan;
  };
  auto predict = [&](const sp::RoundPlanChoice& p) {
    return PredictPlannedRound(in.shape, spec, *in.wan, to_plan(p), scale);
  };
  // Plans whose rounds would come near the round timeout are left out.
  std::vector<sp::RoundPlanChoice> plans;
  for (const auto& p : sp::AdaptivePlans(PlanScheduleOf(in.shape, 8), *compression, bounds)) {
    auto e = predict(p);
    if (in.round_timeout_seconds <= 0 || !e.ok() || e->round_seconds <= in.round_timeout_seconds / 2)
      plans.push_back(p);
  }
  if (plans.empty()) {
    out.plan.set_reason("keeps its plan: every plan within the bounds is predicted to take more than half the "
                        "round timeout");
    return out;
  }
  auto d = sp::Replan(plans, bounds, {current.inner_steps(), *current_codec, current.overlap_steps()}, predict,
                      in.return_streak);
  if (!d.ok()) {
    out.plan.set_reason("keeps its plan: re-planning failed (" + d.status().message() + ")");
    return out;
  }
  out.plan.set_inner_steps(d->plan.inner_steps);
  out.plan.set_codec(proto::CodecToWire(d->plan.codec));
  out.plan.set_overlap_steps(d->plan.overlap_steps);
  out.plan.set_reason(d->reason + calibration);
  out.plan.set_predicted_cu(d->estimate.cu);
  out.changed = d->changed;
  out.return_streak = d->return_streak;
  return out;
}

}  // namespace

ChosenRoundPlan ChooseRoundPlan(const RoundPlanInputs& in) {
  ChosenRoundPlan out = ChooseStepsAndCodec(in);
  // Time-budgeted: H steps of the pace-setting (fastest) region, measured in
  // the round before; the first round runs H everywhere.
  if (in.spec->sync().time_budgeted() && in.shape.step_seconds > 0) {
    out.plan.set_compute_budget_seconds(out.plan.inner_steps() * in.shape.step_seconds);
    out.plan.set_max_inner_steps(2 * out.plan.inner_steps());
  }
  return out;
}

}  // namespace longhaul::orchestrator
