#include <catch2/catch.hpp>

#include "longhaul/common/status.h"

using namespace longhaul;

namespace {
Result<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("value must be > 0, got " + std::to_string(v));
  return v;
}
Result<int> Doubled(int v) {
  LONGHAUL_ASSIGN_OR_RETURN(int x, ParsePositive(v));
  return 2 * x;
}
}  // namespace

TEST_CASE("Status names its code and message", "[status]") {
  Status s = DeadlineExceeded("waiting for chunk 3 from eu-west");
  REQUIRE_FALSE(s.ok());
  REQUIRE(s.ToString() == "DEADLINE_EXCEEDED: waiting for chunk 3 from eu-west");
  REQUIRE(s.WithContext("round 4").message() == "round 4: waiting for chunk 3 from eu-west");
  REQUIRE(Status::Ok().ToString() == "OK");
}

TEST_CASE("Result carries a value or the error that replaced it", "[status]") {
  REQUIRE(Doubled(4).ok());
  REQUIRE(*Doubled(4) == 8);
  auto bad = Doubled(-1);
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.status().code() == StatusCode::kInvalidArgument);
  REQUIRE(bad.status().message() == "value must be > 0, got -1");
}
