// The planner's decision: the most synchronous candidate that meets the CU target.
#include <catch2/catch.hpp>

#include "longhaul/sync_policies/planner.h"

namespace ls = longhaul::sync_policies;

namespace {
const ls::ComputeProfile kModel{.params = 1e9, .layers = 24, .step_seconds = 0.1};
}

TEST_CASE("planner: a fast link keeps data parallelism, a slower one moves down the table, naming why",
          "[planner]") {
  auto fast = ls::ChoosePlan(kModel, {.regions = 2, .bandwidth_bps = 1e13}, 0.95);
  REQUIRE(fast.ok());
  CHECK(fast->meets_target);
  CHECK(fast->candidates[fast->chosen].name == "sync fp32 (data parallel)");
  CHECK_THAT(fast->reason, Catch::Contains("the most synchronous candidate predicted at CU >= 95.0%"));

  auto wan = ls::ChoosePlan(kModel, {.regions = 3, .bandwidth_bps = 10e9, .rtt_seconds = 0.05}, 0.95);
  REQUIRE(wan.ok());
  REQUIRE(wan->meets_target);
  const auto& chosen = wan->candidates[wan->chosen];
  CHECK(chosen.schedule.kind != ls::PlanKind::kDataParallel);
  CHECK(chosen.estimate.cu >= 0.95);
  for (int i = 0; i < wan->chosen; ++i) CHECK(wan->candidates[i].estimate.cu < 0.95);  // none before it would do
  CHECK_THAT(wan->reason, Catch::Contains(wan->candidates[wan->chosen - 1].name + ", stalls on the WAN"));
  // Every candidate carries its prediction; DiLoCo H=50 int8 sends 1/50 of sync's steps at 8.125 of 32 bits.
  double sync_bytes = 0, diloco_bytes = 0;
  for (const auto& c : wan->candidates) {
    if (c.name == "sync fp32 (data parallel)") sync_bytes = c.estimate.wan_bytes_per_step;
    if (c.name == "DiLoCo H=50 int8") diloco_bytes = c.estimate.wan_bytes_per_step;
  }
  CHECK(sync_bytes / diloco_bytes == Approx(50 * 32 / 8.125));
}

TEST_CASE("planner: when nothing reaches the target, the closest candidate is named as such", "[planner]") {
  auto slow = ls::ChoosePlan(kModel, {.regions = 4, .bandwidth_bps = 1e6, .rtt_seconds = 0.3}, 0.99);
  REQUIRE(slow.ok());
  CHECK_FALSE(slow->meets_target);
  double best = 0;
  for (const auto& c : slow->candidates) best = std::max(best, c.estimate.cu);
  CHECK(slow->candidates[slow->chosen].estimate.cu == best);
  CHECK_THAT(slow->reason, Catch::Contains("no candidate reaches CU 99.0% on this link"));
  CHECK_FALSE(ls::ChoosePlan(kModel, {.regions = 1, .bandwidth_bps = 1e9}, 0.9).ok());
  CHECK_FALSE(ls::ChoosePlan(kModel, {.regions = 2, .bandwidth_bps = 1e9}, 0).ok());
}

TEST_CASE("planner: wire bits include the block codecs' scales", "[planner]") {
  CHECK(ls::WireBitsPerValue({.codec = ls::Codec::kFp32}).value() == 32);
  CHECK(ls::WireBitsPerValue({.codec = ls::Codec::kInt8Block}).value() == Approx(8.125));
  CHECK(ls::WireBitsPerValue({.codec = ls::Codec::kFp4E3M0}).value() == Approx(4.125));
}
