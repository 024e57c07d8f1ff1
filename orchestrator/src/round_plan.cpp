#include "longhaul/orchestrator/round_plan.h"

#include <cmath>

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
  return p;
}

}  // namespace

uint64_t ConvertPayloadBytes(const v1::JobSpec& spec, uint64_t bytes, v1::Codec from, v1::Codec to) {
  const double from_bits = BitsPerValue(spec, from), to_bits = BitsPerValue(spec, to);
  if (from_bits <= 0 || to_bits <= 0 || from == to) return bytes;
  return static_cast<uint64_t>(std::llround(static_cast<double>(bytes) * to_bits / from_bits));
}

RoundShape ShapeWithPlan(RoundShape shape, const v1::JobSpec& spec, const v1::RoundPlan& plan) {
  if (plan.inner_steps() == 0) return shape;
  shape.inner_steps = plan.inner_steps();
  shape.payload_bytes = ConvertPayloadBytes(spec, shape.payload_bytes, spec.compression().codec(), plan.codec());
  return shape;
}

ChosenRoundPlan ChooseRoundPlan(const RoundPlanInputs& in) {
  const v1::JobSpec& spec = *in.spec;
  ChosenRoundPlan out;
  const v1::RoundPlan current = in.current.inner_steps() != 0 ? in.current : SpecPlan(spec);
  out.plan = current;
  out.plan.set_first_step(in.first_step);
  if (!spec.sync().has_adaptive()) {
    out.plan.set_reason("the job spec's schedule");
    return out;
  }
  const auto& adaptive = spec.sync().adaptive();
  auto kind = proto::SyncKindOf(spec.sync());
  auto compression = proto::CompressionFromWire(spec.compression());
  auto current_codec = proto::CodecFromWire(current.codec());
  if (!kind.ok() || !compression.ok() || !current_codec.ok()) {
    out.plan.set_reason("keeps its plan: the spec's schedule does not translate");
    return out;
  }
  if (!in.wan || in.step_seconds <= 0 || in.spec_payload_bytes == 0) {
    out.plan.set_reason("keeps " + sp::PlanChoiceName({current.inner_steps(), *current_codec}) +
                        ": no measured links and step times to re-plan from yet");
    return out;
  }
  sp::AdaptiveBounds bounds{.target_cu = adaptive.target_utilisation(), .max_inner_steps = adaptive.max_inner_steps()};
  for (int i = 0; i < adaptive.codecs_size(); ++i) {
    auto c = proto::CodecFromWire(adaptive.codecs(i));
    if (c.ok()) bounds.codecs.push_back(*c);
  }
  RoundShape spec_shape{.kind = *kind,
                        .inner_steps = spec.sync().inner_steps(),
                        .fragments = spec.sync().fragments(),
                        .overlap_steps = spec.sync().overlap_steps()};
  const sp::PlanSchedule base = PlanScheduleOf(spec_shape, 8);
  const double bits = BitsPerValue(spec, spec.compression().codec());
  // Values exchanged: the spec codec's payload over its bits per value.
  const sp::ComputeProfile compute{.params = bits > 0 ? 8.0 * static_cast<double>(in.spec_payload_bytes) / bits : 0,
                                   .layers = 1,
                                   .step_seconds = in.step_seconds};
  auto d = sp::Replan(compute, *in.wan, base, *compression, bounds, {current.inner_steps(), *current_codec});
  if (!d.ok()) {
    out.plan.set_reason("keeps its plan: re-planning failed (" + d.status().message() + ")");
    return out;
  }
  out.plan.set_inner_steps(d->plan.inner_steps);
  out.plan.set_codec(proto::CodecToWire(d->plan.codec));
  out.plan.set_reason(d->reason);
  out.plan.set_predicted_cu(d->estimate.cu);
  out.changed = d->changed;
  return out;
}

}  // namespace longhaul::orchestrator
