// Re-planning between rounds: the most synchronous plan within the bounds that
// the CU model predicts at the target, with hysteresis on the way back.
#include <catch2/catch.hpp>

#include "longhaul/sync_policies/planner.h"
#include "longhaul/sync_policies/replan.h"

namespace ls = longhaul::sync_policies;

namespace {

// 10M parameters, 10 ms steps, DiLoCo H=50 int8 over a 3-region ring.
const ls::ComputeProfile kModel{.params = 1e7, .layers = 1, .step_seconds = 0.01};
const ls::PlanSchedule kBase{.kind = ls::PlanKind::kDiLoCo, .inner_steps = 50, .layerwise = false};
const ls::CompressionOptions kInt8{.codec = ls::Codec::kInt8Block};
const ls::AdaptiveBounds kBounds{.target_cu = 0.6,
                                 .max_inner_steps = 400,
                                 .codecs = {ls::Codec::kInt8Block, ls::Codec::kInt4Block}};

ls::WanProfile Ring(double mbyte_per_s) { return {.regions = 3, .bandwidth_bps = mbyte_per_s * 8e6, .rtt_seconds = 0.04}; }

longhaul::Result<ls::ReplanDecision> Replan(const ls::WanProfile& wan, const ls::AdaptiveBounds& bounds,
                                            const ls::RoundPlanChoice& current, uint32_t return_streak = 0) {
  return ls::Replan(ls::AdaptivePlans(kBase, kInt8, bounds), bounds, current,
                    ls::CuModelPredictor(kModel, wan, kBase, kInt8), return_streak);
}

double Cu(const ls::WanProfile& wan, const ls::RoundPlanChoice& p) {
  ls::PlanSchedule s = kBase;
  s.inner_steps = p.inner_steps;
  s.bits_per_value = ls::WireBitsPerValue({.codec = p.codec}).value();
  return ls::PredictRound(kModel, wan, s).value().cu;
}

}  // namespace

TEST_CASE("replan: the plans run from the spec's H doubling to the bound, codecs in the spec's order", "[replan]") {
  auto plans = ls::AdaptivePlans(kBase, kInt8, {.target_cu = 0.6, .max_inner_steps = 300, .codecs = {ls::Codec::kInt8Block, ls::Codec::kFp4E3M0}});
  std::vector<std::string> names;
  for (const auto& p : plans) names.push_back(ls::PlanChoiceName(p));
  CHECK(names == std::vector<std::string>{"H=50 int8", "H=50 fp4", "H=100 int8", "H=100 fp4",
                                          "H=200 int8", "H=200 fp4", "H=300 int8", "H=300 fp4"});
  // No bounds: the spec's plan alone.
  auto only = ls::AdaptivePlans(kBase, kInt8, {.target_cu = 0.6});
  REQUIRE(only.size() == 1);
  CHECK(only[0] == ls::RoundPlanChoice{50, ls::Codec::kInt8Block});
}

TEST_CASE("replan: a plan that meets the target stays", "[replan]") {
  const ls::RoundPlanChoice spec{50, ls::Codec::kInt8Block};
  auto d = Replan(Ring(100), kBounds, spec);
  REQUIRE(d.ok());
  REQUIRE(Cu(Ring(100), spec) >= 0.6);
  CHECK_FALSE(d->changed);
  CHECK(d->meets_target);
  CHECK(d->plan == spec);
  CHECK_THAT(d->reason, Catch::Contains("H=50 int8 predicted at CU") && Catch::Contains("meets the target 60.0%"));
}

TEST_CASE("replan: a slower link moves to the most synchronous plan predicted to meet the target", "[replan]") {
  const ls::RoundPlanChoice spec{50, ls::Codec::kInt8Block};
  const auto slow = Ring(25);
  REQUIRE(Cu(slow, spec) < 0.6);
  auto d = Replan(slow, kBounds, spec);
  REQUIRE(d.ok());
  CHECK(d->changed);
  CHECK(d->meets_target);
  CHECK(d->estimate.cu >= 0.6);
  CHECK(d->current_cu == Approx(Cu(slow, spec)));
  const auto plans = ls::AdaptivePlans(kBase, kInt8, kBounds);
  const auto chosen = std::find(plans.begin(), plans.end(), d->plan);
  REQUIRE(chosen != plans.end());
  REQUIRE(chosen != plans.begin());
  for (auto it = plans.begin(); it != chosen; ++it) CHECK(Cu(slow, *it) < 0.6);  // none before it would do
  CHECK_THAT(d->reason, Catch::Contains("misses the target 60.0%") &&
                            Catch::Contains(ls::PlanChoiceName(d->plan) + " is the most synchronous plan"));
}

TEST_CASE("replan: back to a more synchronous plan only with a margin above the target, three re-plans in a row",
          "[replan]") {
  const ls::RoundPlanChoice adapted{400, ls::Codec::kInt4Block};
  const ls::RoundPlanChoice spec{50, ls::Codec::kInt8Block};
  // The spec's plan on this link: above the target, but by less than the margin.
  ls::AdaptiveBounds bounds = kBounds;
  const auto link = Ring(100);
  const double spec_cu = Cu(link, spec);
  bounds.target_cu = spec_cu - 0.02;
  auto stay = Replan(link, bounds, adapted);
  REQUIRE(stay.ok());
  CHECK(stay->plan != spec);  // the spec's plan is within 5 points of the target: not preferred yet
  // With a lower target, the spec's plan is 5+ points above it: back to it once
  // the third re-plan in a row says so.
  bounds.target_cu = spec_cu - 0.06;
  bounds.codecs = {ls::Codec::kInt8Block};  // the spec's plan the only one above the margin
  uint32_t streak = 0;
  for (uint32_t i = 1; i <= 2; ++i) {
    auto wait = Replan(link, bounds, {400, ls::Codec::kInt8Block}, streak);
    REQUIRE(wait.ok());
    CHECK_FALSE(wait->changed);
    CHECK(wait->return_streak == i);
    CHECK_THAT(wait->reason, Catch::Contains(std::to_string(i) + " of 3 re-plans in a row before going back"));
    streak = wait->return_streak;
  }
  auto back = Replan(link, bounds, {400, ls::Codec::kInt8Block}, streak);
  REQUIRE(back.ok());
  CHECK(back->changed);
  CHECK(back->plan == spec);
  CHECK(back->return_streak == 0);
  CHECK_THAT(back->reason, Catch::Contains("in 3 re-plans in a row: back from H=400 int8"));
  // A re-plan that finds none above the margin (none is more synchronous than
  // the spec's) starts the count again.
  auto reset = Replan(link, bounds, spec, 2);
  REQUIRE(reset.ok());
  CHECK_FALSE(reset->changed);
  CHECK(reset->return_streak == 0);
}

TEST_CASE("replan: when no plan meets the target, the one predicted highest", "[replan]") {
  const ls::RoundPlanChoice spec{50, ls::Codec::kInt8Block};
  ls::AdaptiveBounds bounds = kBounds;
  bounds.target_cu = 0.999;
  auto d = Replan(Ring(1), bounds, spec);
  REQUIRE(d.ok());
  CHECK_FALSE(d->meets_target);
  CHECK(d->plan == ls::RoundPlanChoice{400, ls::Codec::kInt4Block});
  for (const auto& p : ls::AdaptivePlans(kBase, kInt8, bounds)) CHECK(Cu(Ring(1), p) <= d->estimate.cu);
  CHECK_THAT(d->reason, Catch::Contains("no plan within the bounds meets it, H=400 int4 comes closest"));
  // Already there: it stays, saying so.
  auto again = Replan(Ring(1), bounds, d->plan);
  REQUIRE(again.ok());
  CHECK_FALSE(again->changed);
  CHECK_THAT(again->reason, Catch::Contains("no plan within the bounds is predicted higher"));
}

TEST_CASE("replan: a bad target is refused", "[replan]") {
  ls::AdaptiveBounds bounds = kBounds;
  bounds.target_cu = 0;
  CHECK_FALSE(Replan(Ring(100), bounds, {50, ls::Codec::kInt8Block}).ok());
}

TEST_CASE("replan: Streaming DiLoCo's overlap grows within its bound and below H / P", "[replan]") {
  const ls::PlanSchedule streaming{.kind = ls::PlanKind::kStreamingDiLoCo,
                                   .inner_steps = 48,
                                   .fragments = 4,
                                   .overlap_steps = 2,
                                   .layerwise = false};
  auto plans = ls::AdaptivePlans(streaming, kInt8, {.target_cu = 0.6, .max_inner_steps = 96, .max_overlap_steps = 16});
  std::vector<std::string> names;
  for (const auto& p : plans) names.push_back(ls::PlanChoiceName(p));
  // H=48: tau < 12 caps the doubling at 11; H=96: tau < 24, the bound 16.
  CHECK(names == std::vector<std::string>{"H=48 tau=2 int8", "H=48 tau=4 int8", "H=48 tau=8 int8", "H=48 tau=11 int8",
                                          "H=96 tau=2 int8", "H=96 tau=4 int8", "H=96 tau=8 int8",
                                          "H=96 tau=16 int8"});
  // More overlap hides more of a fragment's exchange: a slow link's prediction rises with tau.
  const ls::ComputeProfile model{.params = 1e7, .layers = 1, .step_seconds = 0.01};
  auto predict = ls::CuModelPredictor(model, Ring(30), streaming, kInt8);
  CHECK(predict({48, ls::Codec::kInt8Block, 11}).value().cu > predict({48, ls::Codec::kInt8Block, 2}).value().cu);
}
