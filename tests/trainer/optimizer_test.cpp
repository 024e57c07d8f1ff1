// AdamW: schedule shape and the update rule.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "longhaul/trainer/optimizer.h"

using namespace longhaul;
using namespace longhaul::trainer;

TEST_CASE("trainer: learning rate warms up linearly then decays by cosine to the floor", "[trainer][adamw]") {
  AdamWOptions o;
  o.lr = 1.0f;
  o.warmup_steps = 10;
  o.total_steps = 110;
  o.min_lr_ratio = 0.1f;
  REQUIRE(o.Validate().ok());
  AdamW opt(o, 1);
  CHECK(opt.LrAt(1) == Approx(0.1));
  CHECK(opt.LrAt(10) == Approx(1.0));
  CHECK(opt.LrAt(60) == Approx(0.55));  // halfway: min + (max - min) / 2
  CHECK(opt.LrAt(110) == Approx(0.1));
  CHECK(opt.LrAt(500) == Approx(0.1));
  CHECK(opt.CurrentLr() == Approx(0.1));
}

TEST_CASE("trainer: first AdamW step moves each parameter by lr against its gradient sign", "[trainer][adamw]") {
  AdamWOptions o;
  o.lr = 0.01f;
  o.warmup_steps = 0;
  o.weight_decay = 0.0f;
  AdamW opt(o, 3);
  std::vector<float> p = {1.0f, 1.0f, 1.0f}, g = {2.0f, -0.5f, 0.0f};
  opt.Step(p, g);
  CHECK(p[0] == Approx(0.99).epsilon(1e-5));
  CHECK(p[1] == Approx(1.01).epsilon(1e-5));
  CHECK(p[2] == Approx(1.0));
  CHECK(opt.step() == 1);
}

TEST_CASE("trainer: decoupled weight decay shrinks parameters with zero gradient", "[trainer][adamw]") {
  AdamWOptions o;
  o.lr = 0.1f;
  o.warmup_steps = 0;
  o.weight_decay = 0.5f;
  AdamW opt(o, 1);
  std::vector<float> p = {2.0f}, g = {0.0f};
  opt.Step(p, g);
  CHECK(p[0] == Approx(2.0 * (1.0 - 0.1 * 0.5)));
}

TEST_CASE("trainer: AdamW flushes subnormal moments to zero and leaves the caller's float mode as it was",
          "[trainer][adamw]") {
  AdamWOptions o;
  o.warmup_steps = 0;
  AdamW opt(o, 2);
  // g^2 = 1e-40 is subnormal (floats below 1.18e-38 are); so would be the
  // second moment (1 - beta2) g^2. Flushed, it is exactly 0 and the step stays finite.
  std::vector<float> p = {1.0f, 1.0f}, g = {1e-20f, 1.0f};
  opt.Step(p, g);
  CHECK(opt.second_moment()[0] == 0.0f);
  CHECK(opt.first_moment()[0] == Approx(1e-21f));
  CHECK(std::isfinite(p[0]));
  CHECK(opt.second_moment()[1] == Approx(1.0f - o.beta2));
  // Outside the step this thread still computes subnormals.
  volatile float tiny = 1e-20f;
  CHECK(tiny * tiny > 0.0f);
}

TEST_CASE("trainer: invalid AdamW options name the field", "[trainer][adamw]") {
  AdamWOptions o;
  o.beta2 = 1.0f;
  CHECK(o.Validate().message().find("beta2") != std::string::npos);
  o = AdamWOptions{};
  o.warmup_steps = 2000;
  CHECK(o.Validate().message().find("warmup_steps") != std::string::npos);
  o = AdamWOptions{};
  o.lr = -1;
  CHECK(o.Validate().code() == StatusCode::kInvalidArgument);
}
