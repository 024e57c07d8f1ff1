// The one conversion between a link estimate and its wire form.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "longhaul/proto/wire_links.h"

using namespace longhaul;

TEST_CASE("a link estimate goes to the wire and back unchanged") {
  const sync_policies::LinkEstimate e{12.5e6, 0.04};
  const v1::LinkSample s = proto::LinkToWire("us-east", e);
  CHECK(s.peer() == "us-east");
  auto back = proto::LinkFromWire(s);
  REQUIRE(back.ok());
  CHECK(back->bytes_per_second == 12.5e6);
  CHECK(back->rtt_seconds == 0.04);
  CHECK_FALSE(back->rate_includes_latency);
  // Unknown stays unknown.
  auto unknown = proto::LinkFromWire(proto::LinkToWire("eu", {}));
  REQUIRE(unknown.ok());
  CHECK_FALSE(unknown->has_rate());
  CHECK_FALSE(unknown->has_rtt());
}

TEST_CASE("a negative or NaN sample is refused naming the peer") {
  for (auto [bw, rtt] : {std::pair{-1.0, 0.01}, std::pair{1e6, -0.5}, std::pair{std::nan(""), 0.01},
                         std::pair{1e6, std::numeric_limits<double>::quiet_NaN()}}) {
    v1::LinkSample s;
    s.set_peer("ap-south");
    s.set_bytes_per_second(bw);
    s.set_rtt_seconds(rtt);
    auto e = proto::LinkFromWire(s);
    CHECK(e.status().code() == StatusCode::kInvalidArgument);
    CHECK(e.status().message().find("ap-south") != std::string::npos);
  }
}
