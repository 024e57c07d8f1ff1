#include "longhaul/sync_policies/outer_optimizer.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace longhaul;
using namespace longhaul::sync_policies;

TEST_CASE("Nesterov outer step matches hand-computed values (lr 0.7, momentum 0.9)", "[outer_optimizer]") {
  auto opt = OuterOptimizer::Create(OuterOptimizerOptions{}, 2);
  REQUIRE(opt.ok());
  std::vector<float> theta{1.0f, -2.0f};
  std::vector<float> g{0.5f, -1.0f};
  (*opt)->Step(theta, g);
  // m = g; update = g + 0.9 m = 1.9 g; theta -= 0.7 * 1.9 g
  CHECK(theta[0] == Approx(1.0 - 0.7 * 0.95).epsilon(1e-6));
  CHECK(theta[1] == Approx(-2.0 + 0.7 * 1.9).epsilon(1e-6));
  CHECK((*opt)->state()[0] == Approx(0.5f));
  (*opt)->Step(theta, g);
  // m = 0.9 * 0.5 + 0.5 = 0.95; update = 0.5 + 0.9 * 0.95 = 1.355
  CHECK(theta[0] == Approx(0.335 - 0.7 * 1.355).epsilon(1e-6));
  CHECK((*opt)->state()[0] == Approx(0.95f));
  CHECK((*opt)->state()[1] == Approx(-1.9f));
}

TEST_CASE("SGD outer step is theta - lr * g and has no state", "[outer_optimizer]") {
  auto opt = OuterOptimizer::Create({.name = "sgd", .lr = 0.5f}, 3);
  REQUIRE(opt.ok());
  std::vector<float> theta{1, 2, 3}, g{2, -2, 0};
  (*opt)->Step(theta, g);
  CHECK(theta == std::vector<float>{0, 3, 3});
  CHECK((*opt)->state().empty());
  CHECK((*opt)->LoadState({}).ok());
}

TEST_CASE("Heavy-ball momentum accumulates the velocity", "[outer_optimizer]") {
  auto opt = OuterOptimizer::Create({.name = "momentum", .lr = 1.0f, .momentum = 0.5f}, 1);
  REQUIRE(opt.ok());
  std::vector<float> theta{0}, g{1};
  (*opt)->Step(theta, g);  // m = 1
  (*opt)->Step(theta, g);  // m = 1.5
  CHECK(theta[0] == Approx(-2.5f));
}

TEST_CASE("Outer optimizer state transfers to a joining replica bit for bit", "[outer_optimizer]") {
  auto a = OuterOptimizer::Create({}, 4);
  auto b = OuterOptimizer::Create({}, 4);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<float> theta_a{0.1f, 0.2f, 0.3f, 0.4f}, g{0.01f, -0.02f, 0.03f, 0.5f};
  (*a)->Step(theta_a, g);
  std::vector<float> theta_b = theta_a;
  REQUIRE((*b)->LoadState((*a)->state()).ok());
  (*a)->Step(theta_a, g);
  (*b)->Step(theta_b, g);
  CHECK(theta_a == theta_b);
  auto bad = (*b)->LoadState(std::vector<float>(3));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().find("4 floats, got 3") != std::string::npos);
}

TEST_CASE("Outer optimizer options are validated with the field named", "[outer_optimizer]") {
  CHECK(OuterOptimizerOptions{}.Validate().ok());
  auto bad_name = OuterOptimizer::Create({.name = "adam"}, 1);
  REQUIRE_FALSE(bad_name.ok());
  CHECK(bad_name.status().message().find("'adam'") != std::string::npos);
  CHECK(OuterOptimizerOptions{.lr = 0}.Validate().message().find("lr") != std::string::npos);
  CHECK(OuterOptimizerOptions{.momentum = 1.0f}.Validate().message().find("momentum") != std::string::npos);
  auto opt = OuterOptimizer::Create({}, 2);
  REQUIRE(opt.ok());
  std::vector<float> theta(3), g(2);
  CHECK((*opt)->TryStep(theta, g).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Outer schedule: lr warm-up, then cosine or linear decay to the final fraction", "[outer_optimizer]") {
  OuterOptimizerOptions o;
  o.lr = 1.0f;
  o.momentum = 0.9f;
  o.total_rounds = 12;
  o.warmup_rounds = 4;
  CHECK(OuterScheduleAt(o, 0).lr == 1.0f);  // round 0: no schedule
  CHECK(OuterScheduleAt(o, 1).lr == Approx(0.25));
  CHECK(OuterScheduleAt(o, 4).lr == Approx(1.0));
  CHECK(OuterScheduleAt(o, 12).lr == Approx(1.0));  // no decay
  o.decay = LrDecay::kCosine;
  o.final_lr_fraction = 0.1f;
  CHECK(OuterScheduleAt(o, 4).lr == Approx(1.0));   // the decay starts where the warm-up ends
  CHECK(OuterScheduleAt(o, 8).lr == Approx(0.55));  // half way: the mean of 1 and 0.1
  CHECK(OuterScheduleAt(o, 12).lr == Approx(0.1));
  o.decay = LrDecay::kLinear;
  CHECK(OuterScheduleAt(o, 10).lr == Approx(1.0 - 0.9 * 0.75));
  CHECK(OuterScheduleAt(o, 12).lr == Approx(0.1));
  CHECK(OuterScheduleAt(o, 7).momentum == 0.9f);  // momentum untouched
  CHECK_FALSE(OuterScheduleAt(o, 7).restart);
}

TEST_CASE("Outer schedule: momentum warm-up from 0 and restarts every R rounds", "[outer_optimizer]") {
  OuterOptimizerOptions o;
  o.momentum = 0.8f;
  o.momentum_warmup_rounds = 4;
  o.momentum_restart_rounds = 5;
  CHECK(OuterScheduleAt(o, 1).momentum == 0.0f);
  CHECK(OuterScheduleAt(o, 3).momentum == Approx(0.4));
  CHECK(OuterScheduleAt(o, 5).momentum == 0.8f);
  std::vector<uint32_t> restarts;
  for (uint32_t t = 1; t <= 16; ++t)
    if (OuterScheduleAt(o, t).restart) restarts.push_back(t);
  CHECK(restarts == std::vector<uint32_t>{6, 11, 16});

  // A restart zeroes the buffer before the step: the step is then plain
  // Nesterov from zero momentum, as in round 1.
  o.lr = 0.5f;
  o.momentum_warmup_rounds = 0;
  o.momentum_restart_rounds = 2;
  auto opt = OuterOptimizer::Create(o, 1);
  REQUIRE(opt.ok());
  std::vector<float> theta = {0.0f};
  const std::vector<float> g = {1.0f};
  (*opt)->Step(theta, g, 1);  // m = 1, theta -= 0.5 * (1 + 0.8)
  CHECK(theta[0] == Approx(-0.9));
  CHECK((*opt)->state()[0] == 1.0f);
  (*opt)->Step(theta, g, 2);  // m = 0.8 + 1
  CHECK((*opt)->state()[0] == Approx(1.8));
  (*opt)->Step(theta, g, 3);  // restart: m = 0 * 0.8 + 1
  CHECK((*opt)->state()[0] == 1.0f);
}

TEST_CASE("Outer lr decay names: one table, unknown names listed", "[outer_optimizer]") {
  for (const auto& d : kLrDecays) {
    auto back = LrDecayFromName(d.name);
    REQUIRE(back.ok());
    CHECK(*back == d.decay);
    CHECK(std::string(LrDecayName(d.decay)) == d.name);
  }
  auto bad = LrDecayFromName("exp");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("none, cosine, linear"));
  OuterOptimizerOptions o;
  o.decay = LrDecay::kCosine;
  CHECK_THAT(o.Validate().message(), Catch::Contains("needs total_rounds"));
  o.total_rounds = 10;
  o.final_lr_fraction = 1.5f;
  CHECK_THAT(o.Validate().message(), Catch::Contains("final_lr_fraction"));
}
