#include <catch2/catch.hpp>

#include <prometheus/counter.h>

#include "longhaul/monitoring/metrics_server.h"
#include "support/subprocess.h"

using namespace longhaul;


TEST_CASE("MetricsServer serves registered metrics on a free port", "[monitoring]") {
  auto server = monitoring::MetricsServer::Start("127.0.0.1:0");
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  auto& family = prometheus::BuildCounter().Name("longhaul_test_events_total").Help("test").Register((*server)->registry());
  family.Add({{"region", "eu"}}).Increment(3);
  std::string body = testing::HttpGet((*server)->port(), "/metrics").value_or("");
  REQUIRE(body.find("longhaul_test_events_total{region=\"eu\"} 3") != std::string::npos);
}

TEST_CASE("MetricsServer refuses a malformed address", "[monitoring]") {
  auto server = monitoring::MetricsServer::Start("no-port-here");
  REQUIRE_FALSE(server.ok());
  REQUIRE(server.status().message().find("no-port-here") != std::string::npos);
}
