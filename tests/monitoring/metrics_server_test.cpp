#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <prometheus/counter.h>

#include "longhaul/monitoring/metrics_server.h"

using namespace longhaul;

namespace {
// Minimal HTTP GET over a raw socket: the test needs no HTTP client library.
std::string HttpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}
}  // namespace

TEST_CASE("MetricsServer serves registered metrics on a free port", "[monitoring]") {
  auto server = monitoring::MetricsServer::Start("127.0.0.1:0");
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  auto& family = prometheus::BuildCounter().Name("longhaul_test_events_total").Help("test").Register((*server)->registry());
  family.Add({{"region", "eu"}}).Increment(3);
  std::string body = HttpGet((*server)->port(), "/metrics");
  REQUIRE(body.find("longhaul_test_events_total{region=\"eu\"} 3") != std::string::npos);
}

TEST_CASE("MetricsServer refuses a malformed address", "[monitoring]") {
  auto server = monitoring::MetricsServer::Start("no-port-here");
  REQUIRE_FALSE(server.ok());
  REQUIRE(server.status().message().find("no-port-here") != std::string::npos);
}
