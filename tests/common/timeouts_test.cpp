#include <catch2/catch.hpp>

#include "longhaul/common/timeouts.h"

using namespace longhaul;
using namespace std::chrono_literals;

TEST_CASE("Default timeouts respect the hierarchy", "[timeouts]") { REQUIRE(Timeouts{}.Validate().ok()); }

TEST_CASE("A timeout hierarchy out of order is refused, naming the pair", "[timeouts]") {
  Timeouts t;
  t.link_io = 120s;
  t.collective = 60s;
  Status s = t.Validate();
  REQUIRE(s.code() == StatusCode::kInvalidArgument);
  REQUIRE(s.message().find("link_io") != std::string::npos);
  REQUIRE(s.message().find("collective") != std::string::npos);

  Timeouts u;
  u.heartbeat_interval = 200s;
  REQUIRE(u.Validate().message().find("heartbeat_miss") != std::string::npos);
}

TEST_CASE("Remaining never goes negative", "[timeouts]") {
  REQUIRE(Remaining(DeadlineAfter(-5s)).count() == 0);
  REQUIRE(Remaining(DeadlineAfter(5s)).count() > 4000);
}
