// MetricsServer: the /metrics endpoint every longhaul process exposes.
//
// One Registry, served in Prometheus's text format by a small server of our
// own (src/http_server.h): one thread and a poll() loop, so idle or slow
// connections never hold up a scrape (each has 5 s to send its request; past
// 1024 open connections the oldest idle one is closed for a new one). With a
// web config (web_config.h, Prometheus's web.yml) it serves HTTPS and asks for
// basic auth.
//
// Bind "127.0.0.1:0" to get a free port (tests never use fixed ports); port()
// tells which one was chosen. Metric families are created on registry() by the
// component that owns them, named longhaul_* with base units in the name (see
// metric_names.h).
#pragma once

#include <prometheus/registry.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "longhaul/common/status.h"

namespace longhaul::monitoring {

class HttpServer;

struct MetricsServerOptions {
  std::string bind_address = "127.0.0.1:0";  // host:port ([v6]:port); port 0 picks a free port
  std::string web_config_file;               // Prometheus web.yml; "" = plain HTTP, no auth
  // Time a connection has for its TLS handshake and request headers.
  std::chrono::milliseconds request_timeout{5000};
  // Open connections; one more closes the oldest that has not sent a request.
  size_t max_connections = 1024;
};

class MetricsServer {
 public:
  static Result<std::unique_ptr<MetricsServer>> Start(const MetricsServerOptions& options);
  // bind_address: "host:port"; port 0 picks a free port. Plain HTTP, no auth.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& bind_address);
  // Stops the server thread and closes every socket.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  prometheus::Registry& registry() { return *registry_; }
  std::shared_ptr<prometheus::Registry> shared_registry() { return registry_; }
  int port() const { return port_; }
  bool tls() const { return tls_; }
  bool basic_auth() const { return basic_auth_; }
  std::string url() const;  // http://host:port/metrics, https:// with TLS

 private:
  MetricsServer();
  std::string host_;
  int port_ = 0;
  bool tls_ = false;
  bool basic_auth_ = false;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<HttpServer> http_;  // last: stopped before the registry goes
};

}  // namespace longhaul::monitoring
