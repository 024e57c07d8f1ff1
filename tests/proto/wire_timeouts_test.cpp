#include <catch2/catch.hpp>

#include "longhaul/proto/wire_timeouts.h"

using namespace longhaul;

TEST_CASE("timeouts travel on the wire unchanged and a broken hierarchy is refused, naming the message",
          "[proto][timeouts]") {
  Timeouts t;
  t.link_io = std::chrono::milliseconds(1500);
  t.collective = std::chrono::seconds(15);
  t.heartbeat_interval = std::chrono::milliseconds(200);
  t.heartbeat_misses = 5;
  t.round = std::chrono::seconds(60);
  t.job_idle = std::chrono::seconds(7200);
  auto back = proto::TimeoutsFromWire(proto::TimeoutsToWire(t), "assignment");
  REQUIRE(back.ok());
  CHECK(back->link_io == t.link_io);
  CHECK(back->collective == t.collective);
  CHECK(back->heartbeat_interval == t.heartbeat_interval);
  CHECK(back->heartbeat_misses == t.heartbeat_misses);
  CHECK(back->round == t.round);
  CHECK(back->job_idle == t.job_idle);
  v1::Timeouts w = proto::TimeoutsToWire(t);
  w.set_round_ms(10000);  // below the collective
  auto bad = proto::TimeoutsFromWire(w, "the assignment's timeouts");
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("the assignment's timeouts") && Catch::Contains("collective"));
  CHECK_FALSE(proto::TimeoutsFromWire(v1::Timeouts(), "empty").ok());  // all zero: refused, not "no timeout"
}
