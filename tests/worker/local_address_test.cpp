// LONGHAUL_WAN_HOST=auto: the address of this host on the route to the agent.
#include <catch2/catch.hpp>

#include "longhaul/session/local_address.h"

namespace ls = longhaul::session;

TEST_CASE("session: auto host is this host's address on the route to the agent", "[session]") {
  // Every 127/8 address is on lo, whose own address is 127.0.0.1.
  auto own = ls::LocalAddressToward("tcp://127.0.0.2:5555");
  REQUIRE(own.ok());
  CHECK(*own == "127.0.0.1");
  own = ls::LocalAddressToward("tcp://localhost:1");
  REQUIRE(own.ok());
  CHECK(*own == "127.0.0.1");
}

TEST_CASE("session: auto host refuses an endpoint it cannot read or resolve, naming it", "[session]") {
  CHECK(ls::LocalAddressToward("127.0.0.1:5").status().message() == "'127.0.0.1:5' is not tcp://HOST:PORT");
  CHECK(ls::LocalAddressToward("tcp://:5").status().message() == "'tcp://:5' is not tcp://HOST:PORT");
  const auto bad = ls::LocalAddressToward("tcp://no-such-host.invalid:5");
  CHECK(bad.status().code() == longhaul::StatusCode::kUnavailable);
  CHECK_THAT(bad.status().message(), Catch::StartsWith("cannot resolve no-such-host.invalid (of tcp://no-such-host.invalid:5)"));
}
