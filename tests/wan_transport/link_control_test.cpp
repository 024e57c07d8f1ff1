// The control text longhaul-linkem reads to reshape a running link.
#include <catch2/catch.hpp>

#include "longhaul/wan_transport/link_emulator.h"

using namespace longhaul;
using namespace longhaul::wan_transport;
using namespace std::chrono_literals;

TEST_CASE("a control text changes the settings it names and keeps the others") {
  const LinkShape now{.rate_bytes_per_second = 5e6, .delay = 20ms, .jitter = 1ms};
  auto s = ParseLinkControl("rate-mbit=10\n# the link gets worse\ndelay-ms=40.5  # one way\n", now);
  REQUIRE(s.ok());
  CHECK(s->rate_bytes_per_second == Approx(1.25e6));
  CHECK(s->delay == 40500us);
  CHECK(s->jitter == 1ms);
  CHECK(s->ToString() == "rate-mbit=10 delay-ms=40.5 jitter-ms=1");
  CHECK(ParseLinkControl(s->ToString(), now)->delay == 40500us);  // what it prints, it reads
  auto same = ParseLinkControl("  \n", now);
  REQUIRE(same.ok());
  CHECK(same->delay == 20ms);
}

TEST_CASE("a control text that cannot be used is refused, naming the setting") {
  const LinkShape now{.rate_bytes_per_second = 5e6, .delay = 20ms, .jitter = 1ms};
  auto message = [&](const std::string& text) {
    auto s = ParseLinkControl(text, now);
    return s.ok() ? std::string("ok") : s.status().message();
  };
  CHECK_THAT(message("rate-mbit=fast"), Catch::Contains("rate-mbit: 'fast' is not a number"));
  CHECK_THAT(message("rate-mbit=-1"), Catch::Contains("rate-mbit: '-1'"));
  CHECK_THAT(message("delay-ms=10ms"), Catch::Contains("delay-ms: '10ms'"));
  CHECK_THAT(message("loss=0.1"), Catch::Contains("unknown setting 'loss'"));
  CHECK_THAT(message("rate-mbit"), Catch::Contains("'rate-mbit' is not key=value"));
  CHECK_THAT(message("delay-ms=0.5"), Catch::Contains("jitter must not exceed delay"));
  CHECK_THAT(message("rate-mbit=nan"), Catch::Contains("not a number"));
}
