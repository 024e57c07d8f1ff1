// MetricsServer: the /metrics endpoint every longhaul process exposes.
//
// Wraps a prometheus-cpp Exposer and one Registry. Bind "127.0.0.1:0" to get a
// free port (tests never use fixed ports); port() tells which one was chosen.
// Metric families are created on registry() by the component that owns them,
// named longhaul_* with base units in the name (see metric_names.h).
#pragma once

#include <memory>
#include <string>

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "longhaul/common/status.h"

namespace longhaul::monitoring {

class MetricsServer {
 public:
  // bind_address: "host:port"; port 0 picks a free port.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& bind_address);

  prometheus::Registry& registry() { return *registry_; }
  std::shared_ptr<prometheus::Registry> shared_registry() { return registry_; }
  int port() const { return port_; }
  std::string url() const;  // http://host:port/metrics

 private:
  MetricsServer() = default;
  std::string host_;
  int port_ = 0;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace longhaul::monitoring
