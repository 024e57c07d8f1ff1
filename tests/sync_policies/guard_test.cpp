#include "longhaul/sync_policies/guard.h"

#include <catch2/catch.hpp>
#include <limits>
#include <vector>

using namespace longhaul;
using namespace longhaul::sync_policies;

TEST_CASE("Guard rejects NaN and Inf naming the region and index", "[guard]") {
  PseudoGradientGuard guard(GuardOptions{});
  std::vector<float> g(100, 0.5f);
  g[42] = std::numeric_limits<float>::quiet_NaN();
  auto s = guard.Check("eu-west", g);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("eu-west") != std::string::npos);
  CHECK(s.message().find("NaN at index 42") != std::string::npos);
  g[42] = -std::numeric_limits<float>::infinity();
  CHECK(guard.Check("us-east", g).message().find("Inf at index 42") != std::string::npos);
  CHECK(guard.ReferenceNorm() == 0.0);  // rejected norms never enter the window
}

TEST_CASE("Guard rejects a norm far above the running median", "[guard]") {
  PseudoGradientGuard guard({.norm_factor = 10.0, .window = 4});
  std::vector<float> g(16, 1.0f);  // norm 4
  for (int i = 0; i < 6; ++i) REQUIRE(guard.Check("eu-west", g).ok());
  CHECK(guard.ReferenceNorm() == Approx(4.0));
  std::vector<float> big(16, 9.0f);  // norm 36 < 40: accepted
  CHECK(guard.Check("ap-south", big).ok());
  std::vector<float> huge(16, 11.0f);  // norm 44 > 10 x median 4
  auto s = guard.Check("ap-south", huge);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("ap-south") != std::string::npos);
  CHECK(s.message().find("norm 44") != std::string::npos);
  CHECK(guard.ReferenceNorm() == Approx(4.0));  // one accepted outlier moves the median little
}

TEST_CASE("Guard options are validated", "[guard]") {
  CHECK(GuardOptions{}.Validate().ok());
  CHECK(GuardOptions{.norm_factor = 0.5}.Validate().message().find("norm_factor") != std::string::npos);
  CHECK(GuardOptions{.window = 0}.Validate().message().find("window") != std::string::npos);
  PseudoGradientGuard bad({.window = 0});
  CHECK_FALSE(bad.Check("eu", std::vector<float>{1.0f}).ok());
}
