#include "longhaul/sync_policies/replan.h"

#include <algorithm>

#include "longhaul/common/format_number.h"
#include "longhaul/sync_policies/planner.h"

namespace longhaul::sync_policies {
namespace {

std::string Percent(double x) { return FormatNumber("%.1f%%", 100 * x); }

}  // namespace

PlanPredictor CuModelPredictor(const ComputeProfile& compute, const WanProfile& wan, const PlanSchedule& base,
                               const CompressionOptions& compression) {
  return [=](const RoundPlanChoice& plan) -> Result<CuEstimate> {
    CompressionOptions c = compression;
    c.codec = plan.codec;
    PlanSchedule schedule = base;
    LONGHAUL_ASSIGN_OR_RETURN(schedule.bits_per_value, WireBitsPerValue(c));
    schedule.inner_steps = plan.inner_steps;
    schedule.overlap_steps = plan.overlap_steps;
    return PredictRound(compute, wan, schedule);
  };
}

std::string PlanChoiceName(const RoundPlanChoice& plan) {
  return "H=" + std::to_string(plan.inner_steps) +
         (plan.overlap_steps > 0 ? " tau=" + std::to_string(plan.overlap_steps) : std::string()) + " " +
         std::string(Traits(plan.codec).name);
}

std::vector<RoundPlanChoice> AdaptivePlans(const PlanSchedule& base, const CompressionOptions& compression,
                                           const AdaptiveBounds& bounds) {
  std::vector<uint32_t> steps;
  const uint32_t max = std::max(base.inner_steps, bounds.max_inner_steps);
  for (uint64_t h = base.inner_steps; h <= max && h > 0; h *= 2) steps.push_back(static_cast<uint32_t>(h));
  if (steps.empty() || steps.back() != max) steps.push_back(max);
  const std::vector<Codec> codecs = bounds.codecs.empty() ? std::vector<Codec>{compression.codec} : bounds.codecs;
  const bool streaming = base.kind == PlanKind::kStreamingDiLoCo;
  const uint32_t fragments = std::max(1u, base.fragments);
  std::vector<RoundPlanChoice> out;
  for (uint32_t h : steps) {
    // tau < H / P: the largest allowed at this H caps the doubling.
    std::vector<uint32_t> taus = {base.overlap_steps};
    if (streaming && h / fragments > 0) {
      const uint32_t cap = std::min(std::max(base.overlap_steps, bounds.max_overlap_steps), h / fragments - 1);
      for (uint64_t t = std::max(1u, 2 * base.overlap_steps); t <= cap; t *= 2) taus.push_back(static_cast<uint32_t>(t));
      if (cap > taus.back()) taus.push_back(cap);
    }
    for (uint32_t tau : taus)
      for (Codec c : codecs) out.push_back({h, c, tau});
  }
  return out;
}

Result<ReplanDecision> Replan(const std::vector<RoundPlanChoice>& plans, const AdaptiveBounds& bounds,
                              const RoundPlanChoice& current, const PlanPredictor& predict, uint32_t return_streak) {
  if (!(bounds.target_cu > 0 && bounds.target_cu <= 1)) return InvalidArgument("target CU must be in (0, 1]");
  if (plans.empty()) return InvalidArgument("no plans to choose from");
  auto predicted = [&](const RoundPlanChoice& p) -> Result<CuEstimate> {
    auto e = predict(p);
    if (!e.ok()) return e.status().WithContext(PlanChoiceName(p));
    return e;
  };
  std::vector<CuEstimate> est;
  for (const auto& p : plans) {
    LONGHAUL_ASSIGN_OR_RETURN(CuEstimate e, predicted(p));
    est.push_back(e);
  }
  LONGHAUL_ASSIGN_OR_RETURN(CuEstimate now, predicted(current));
  const auto at = std::find(plans.begin(), plans.end(), current);
  const size_t cur = static_cast<size_t>(at - plans.begin());  // plans.size(): not among them
  const double target = bounds.target_cu;

  ReplanDecision d;
  d.current_cu = now.cu;
  auto choose = [&](size_t i, std::string why) {
    d.plan = plans[i];
    d.estimate = est[i];
    d.meets_target = est[i].cu >= target;
    d.changed = !(plans[i] == current);
    d.reason = std::move(why);
  };
  const std::string target_text = "target " + Percent(target);
  const std::string current_text = PlanChoiceName(current) + " predicted at CU " + Percent(now.cu);
  if (now.cu >= target) {
    d.plan = current;
    d.estimate = now;
    d.meets_target = true;
    d.reason = current_text + " meets the " + target_text;
    // Plans before the current one are more synchronous; a current plan that
    // is not among them (a spec codec the bounds do not list) has none before it.
    for (size_t i = 0; i < (cur < plans.size() ? cur : 0); ++i) {
      if (est[i].cu < target + bounds.hysteresis) continue;
      const std::string above = PlanChoiceName(plans[i]) + " predicted at CU " + Percent(est[i].cu) + ", above the " +
                                target_text + " by more than " + FormatNumber("%.0f", 100 * bounds.hysteresis) +
                                " points";
      d.return_streak = return_streak + 1;
      if (d.return_streak < bounds.rounds_to_return) {
        d.reason += "; " + above + " (" + std::to_string(d.return_streak) + " of " +
                    std::to_string(bounds.rounds_to_return) + " re-plans in a row before going back)";
        return d;
      }
      choose(i, above + " in " + std::to_string(d.return_streak) + " re-plans in a row: back from " + current_text);
      d.return_streak = 0;
      return d;
    }
    return d;
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    if (est[i].cu >= target) {
      choose(i, current_text + " misses the " + target_text + "; " + PlanChoiceName(plans[i]) +
                    " is the most synchronous plan predicted to meet it (" + Percent(est[i].cu) + ")");
      return d;
    }
  }
  size_t best = 0;
  for (size_t i = 1; i < plans.size(); ++i)
    if (est[i].cu > est[best].cu) best = i;
  if (est[best].cu <= now.cu) {
    d.plan = current;
    d.estimate = now;
    d.reason = current_text + " misses the " + target_text + "; no plan within the bounds is predicted higher";
    return d;
  }
  choose(best, current_text + " misses the " + target_text + "; no plan within the bounds meets it, " +
                   PlanChoiceName(plans[best]) + " comes closest (" + Percent(est[best].cu) + ")");
  return d;
}

}  // namespace longhaul::sync_policies
