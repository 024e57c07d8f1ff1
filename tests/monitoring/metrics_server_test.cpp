#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

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

TEST_CASE("MetricsServer: idle connections do not hold up a scrape", "[monitoring]") {
  auto server = monitoring::MetricsServer::Start("127.0.0.1:0");
  REQUIRE(server.ok());
  // Several clients connect and send nothing (a port scanner, a stuck proxy).
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>((*server)->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    idle.push_back(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto body = testing::HttpGet((*server)->port(), "/metrics");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int fd : idle) ::close(fd);
  REQUIRE(body.has_value());
  CHECK(seconds < 5.0);  // before: ~30 s, until the idle connections timed out
}
