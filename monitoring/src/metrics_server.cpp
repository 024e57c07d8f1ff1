#include "longhaul/monitoring/metrics_server.h"

#include <exception>

namespace longhaul::monitoring {

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& bind_address) {
  const auto colon = bind_address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == bind_address.size())
    return InvalidArgument("metrics address '" + bind_address + "' is not host:port");
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->host_ = bind_address.substr(0, colon);
  try {
    // civetweb serves each connection on one thread until it closes: with the
    // library's default of 2 threads, two idle TCP connections held /metrics
    // hostage for ~30 s. More threads, and idle or slow connections cut after a
    // short timeout, so no client can hold up a scrape.
    server->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", bind_address, "num_threads", "16", "request_timeout_ms", "2000",
        "enable_keep_alive", "no"});
  } catch (const std::exception& e) {
    return Unavailable("cannot serve metrics on " + bind_address + ": " + e.what());
  }
  const auto ports = server->exposer_->GetListeningPorts();
  if (ports.empty()) return Unavailable("metrics exposer on " + bind_address + " has no listening port");
  server->port_ = ports.front();
  server->registry_ = std::make_shared<prometheus::Registry>();
  server->exposer_->RegisterCollectable(server->registry_);
  return server;
}

std::string MetricsServer::url() const { return "http://" + host_ + ":" + std::to_string(port_) + "/metrics"; }

}  // namespace longhaul::monitoring
