// LinkMatrix: measured bandwidth and RTT per peer, for the scheduler and metrics.
// Passive samples (acked transfers) are blended with an EWMA; a probe overwrites.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace longhaul::wan_transport {

struct LinkEstimate {
  double bandwidth_bytes_per_second = 0;  // 0 = unknown
  double rtt_seconds = 0;                 // 0 = unknown
  uint64_t samples = 0;
};

struct LinkMatrix {
  std::map<std::string, LinkEstimate> peers;  // by peer endpoint
};

// Thread-safe accumulator behind WanEndpoint::measurements().
class LinkEstimator {
 public:
  // A transfer of bytes acked after seconds; small transfers only inform the RTT.
  void AddTransfer(const std::string& peer, uint64_t bytes, double seconds);
  void SetProbe(const std::string& peer, double rtt_seconds, double bandwidth_bytes_per_second);
  LinkEstimate Get(const std::string& peer) const;
  LinkMatrix Snapshot() const;

 private:
  mutable std::mutex mu_;
  LinkMatrix m_;
};

}  // namespace longhaul::wan_transport
