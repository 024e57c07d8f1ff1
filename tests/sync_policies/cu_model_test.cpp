// The CU model (cu_model.h): closed-form cases, the inverse, refused inputs.
#include <catch2/catch.hpp>

#include "longhaul/sync_policies/cu_model.h"

namespace ls = longhaul::sync_policies;

TEST_CASE("cu model: a whole-vector DiLoCo exchange stalls the round by its ring transfer and latency",
          "[cu_model]") {
  const ls::ComputeProfile compute{.params = 1e6, .layers = 4, .step_seconds = 0.2};
  const ls::WanProfile wan{.regions = 3, .bandwidth_bps = 1e8, .rtt_seconds = 0.05};
  const ls::PlanSchedule diloco{.kind = ls::PlanKind::kDiLoCo, .inner_steps = 10, .bits_per_value = 8, .layerwise = false};
  auto e = ls::PredictRound(compute, wan, diloco);
  REQUIRE(e.ok());
  // 8 Mbit x 2 (3 - 1) / 3 over 100 Mbit/s, then 2 round trips of 50 ms.
  const double stall = 8e6 * 4.0 / 3.0 / 1e8 + 2 * 0.05;
  CHECK(e->compute_seconds == Approx(2.0));
  CHECK(e->stall_seconds == Approx(stall));
  CHECK(e->round_seconds == Approx(2.0 + stall));
  CHECK(e->cu == Approx(2.0 / (2.0 + stall)));
  CHECK(e->wan_bytes_per_step == Approx(1e6 * 4.0 / 3.0 / 10));  // 1 byte a value, one sync per 10 steps
}

TEST_CASE("cu model: layer by layer, data parallelism exposes only the last layer when each fits a node",
          "[cu_model]") {
  // L = 10: 29 nodes of 10 ms. Each layer's 1e5 values x 16 bits at 4e8 bit/s take 4 ms < 10 ms.
  const ls::ComputeProfile compute{.params = 1e6, .layers = 10, .step_seconds = 0.29};
  const ls::WanProfile wan{.regions = 2, .bandwidth_bps = 4e8};
  auto e = ls::PredictRound(compute, wan, {.kind = ls::PlanKind::kDataParallel, .inner_steps = 1});
  REQUIRE(e.ok());
  CHECK(e->stall_seconds == Approx(0.004));  // layer 1 leaves at the step's end, needed at once
  // The same exchanges once per round of 100 steps: DiLoCo hides them 100 times better.
  auto d = ls::PredictRound(compute, wan, {.kind = ls::PlanKind::kDiLoCo, .inner_steps = 100});
  REQUIRE(d.ok());
  CHECK(d->stall_seconds == Approx(0.004));
  CHECK(d->cu > e->cu);
}

TEST_CASE("cu model: Streaming DiLoCo's overlap hides a fragment that arrives within tau steps", "[cu_model]") {
  const ls::ComputeProfile compute{.params = 1e6, .layers = 8, .step_seconds = 0.1};
  ls::PlanSchedule s{.kind = ls::PlanKind::kStreamingDiLoCo, .inner_steps = 40, .fragments = 4, .bits_per_value = 16};
  const ls::WanProfile slow{.regions = 2, .bandwidth_bps = 2e7};  // a fragment's 4 Mbit: 0.2 s, two steps
  auto plain = ls::PredictRound(compute, slow, s);
  REQUIRE(plain.ok());
  CHECK(plain->cu < 0.99);
  s.overlap_steps = 3;
  auto overlapped = ls::PredictRound(compute, slow, s);
  REQUIRE(overlapped.ok());
  CHECK(overlapped->stall_seconds == 0);
  CHECK(overlapped->cu == Approx(1.0));
}

TEST_CASE("cu model: the bandwidth for a CU target is the least that reaches it", "[cu_model]") {
  const ls::ComputeProfile compute{.params = 1e9, .layers = 24, .step_seconds = 0.1};
  const ls::WanProfile wan{.regions = 4, .rtt_seconds = 0.08};
  const ls::PlanSchedule diloco{.kind = ls::PlanKind::kDiLoCo, .inner_steps = 100};
  auto bps = ls::BandwidthForCu(compute, wan, diloco, 0.9);
  REQUIRE(bps.ok());
  ls::WanProfile at = wan;
  at.bandwidth_bps = *bps;
  CHECK(ls::PredictRound(compute, at, diloco)->cu >= 0.9);
  at.bandwidth_bps = *bps * 0.99;
  CHECK(ls::PredictRound(compute, at, diloco)->cu < 0.9);
  // Latency alone: 3 round trips of 10 s per 1 s of compute.
  auto far = ls::BandwidthForCu(compute, {.regions = 4, .rtt_seconds = 10}, {.kind = ls::PlanKind::kDiLoCo, .inner_steps = 10},
                                0.5);
  REQUIRE_FALSE(far.ok());
  CHECK_THAT(far.status().message(), Catch::Contains("out of reach"));
  CHECK_FALSE(ls::BandwidthForCu(compute, wan, diloco, 1.5).ok());
}

TEST_CASE("cu model: inputs it cannot model are refused, naming them", "[cu_model]") {
  const ls::ComputeProfile compute{.params = 1e6, .layers = 4, .step_seconds = 0.1};
  const ls::WanProfile wan{.regions = 2, .bandwidth_bps = 1e9};
  auto message = [&](ls::ComputeProfile c, ls::WanProfile w, ls::PlanSchedule s) {
    auto e = ls::PredictRound(c, w, s);
    return e.ok() ? std::string("ok") : e.status().message();
  };
  CHECK_THAT(message(compute, {.regions = 1, .bandwidth_bps = 1e9}, {}), Catch::Contains("at least 2 regions"));
  CHECK_THAT(message(compute, {.regions = 2}, {}), Catch::Contains("bandwidth"));
  CHECK_THAT(message({.params = 1e6, .layers = 4, .step_seconds = 0}, wan, {}), Catch::Contains("step time"));
  CHECK_THAT(message(compute, wan, {.kind = ls::PlanKind::kDiLoCo, .overlap_steps = 2}),
             Catch::Contains("overlap_steps must be 0 for diloco"));
  CHECK_THAT(message(compute, wan, {.kind = ls::PlanKind::kStreamingDiLoCo, .inner_steps = 10, .fragments = 5}),
             Catch::Contains("5 fragments, 4 layers"));
  CHECK_THAT(message(compute, wan, {.kind = ls::PlanKind::kStreamingDiLoCo, .inner_steps = 4, .fragments = 5}),
             Catch::Contains("fragments must be in 1..inner_steps"));
}

TEST_CASE("cu model: given every link of the ring, an exchange counts each where it delays the hops", "[cu_model]") {
  const ls::ComputeProfile compute{.params = 3e6, .layers = 1, .step_seconds = 0.01};
  const ls::PlanSchedule diloco{.kind = ls::PlanKind::kDiLoCo, .inner_steps = 10, .bits_per_value = 8, .layerwise = false};
  // Equal links: the same as the slowest link at the worst RTT, 32 Mbit at 80 Mbit/s and 2 round trips.
  const ls::LinkEstimate slow{8e7 / 8, 0.04}, fast{8e8 / 8, 0.04};  // 80 and 800 Mbit/s
  auto uniform = ls::PredictRound(compute, {.regions = 3, .bandwidth_bps = 8e7, .rtt_seconds = 0.04}, diloco);
  auto same = ls::PredictRound(compute, {.regions = 3, .ring = {slow, slow, slow}}, diloco);
  REQUIRE(uniform.ok());
  REQUIRE(same.ok());
  CHECK(uniform->stall_seconds == Approx(0.4 + 2 * 0.04));
  CHECK(same->stall_seconds == Approx(uniform->stall_seconds));
  // One slow link: it sends its 4 hops of 8 Mbit back to back, fed in time by
  // the fast ones, and its last lands half a round trip later.
  auto one_slow = ls::PredictRound(compute, {.regions = 3, .ring = {fast, fast, slow}}, diloco);
  REQUIRE(one_slow.ok());
  CHECK(one_slow->stall_seconds == Approx(4 * 0.1 + 0.02));
  // A long round trip on a fast link delays what the slow link has to forward;
  // a short one hides behind it.
  auto far_fast = ls::PredictRound(compute, {.regions = 3, .ring = {{8e8 / 8, 0.6}, fast, slow}}, diloco);
  auto near_fast = ls::PredictRound(compute, {.regions = 3, .ring = {{8e8 / 8, 0.001}, fast, slow}}, diloco);
  REQUIRE(far_fast.ok());
  REQUIRE(near_fast.ok());
  CHECK(far_fast->stall_seconds > 2 * 0.3 + 0.1);  // two hops over it, one over the slow link at least
  CHECK(near_fast->stall_seconds == Approx(one_slow->stall_seconds));
  auto wrong = ls::PredictRound(compute, {.regions = 3, .ring = {slow, slow}}, diloco);
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(wrong.status().message(), Catch::Contains("3 regions has 3 links, got 2"));
  CHECK_FALSE(ls::PredictRound(compute, {.regions = 3, .ring = {slow, slow, {0, 0.01}}}, diloco).ok());
}

TEST_CASE("cu model: longhaul's round ends once every fragment it sent has landed", "[cu_model]") {
  // 4 fragments of 2 Mbit at 20 Mbit/s: 0.1 s each, hidden by 3 steps of 0.1 s,
  // except the one sent at the round's last step, which the round waits for.
  const ls::ComputeProfile compute{.params = 1e6, .layers = 8, .step_seconds = 0.1};
  ls::PlanSchedule s{.kind = ls::PlanKind::kStreamingDiLoCo, .inner_steps = 40, .fragments = 4, .overlap_steps = 3,
                     .bits_per_value = 8};
  const ls::WanProfile wan{.regions = 2, .bandwidth_bps = 2e7};
  auto layerwise = ls::PredictRound(compute, wan, s);  // the paper's: overlaps into the next round
  s.layerwise = false;
  auto longhaul = ls::PredictRound(compute, wan, s);
  REQUIRE(layerwise.ok());
  REQUIRE(longhaul.ok());
  CHECK(layerwise->stall_seconds == 0);
  CHECK(longhaul->stall_seconds == Approx(0.1));
}
