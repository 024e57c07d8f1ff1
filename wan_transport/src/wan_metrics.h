// Prometheus families of the WAN data plane (all optional: no registry, no-ops).
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace longhaul::wan_transport {

class WanMetrics {
 public:
  explicit WanMetrics(prometheus::Registry* registry);
  void BytesSent(const std::string& peer, double bytes);
  void Link(const std::string& peer, double bandwidth_bytes_per_second, double rtt_seconds);
  void TransferDone(double seconds);
  void FrameDropped(const std::string& reason);
  void Connections(const std::string& peer, size_t open);

 private:
  std::mutex mu_;
  prometheus::Family<prometheus::Counter>* bytes_sent_ = nullptr;
  prometheus::Family<prometheus::Gauge>* bandwidth_ = nullptr;
  prometheus::Family<prometheus::Gauge>* rtt_ = nullptr;
  prometheus::Family<prometheus::Counter>* dropped_ = nullptr;
  prometheus::Family<prometheus::Gauge>* connections_ = nullptr;
  prometheus::Histogram* duration_ = nullptr;
};

}  // namespace longhaul::wan_transport
