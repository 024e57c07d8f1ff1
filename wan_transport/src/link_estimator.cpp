#include <algorithm>
#include <cmath>

#include "longhaul/wan_transport/endpoint.h"
#include "longhaul/wan_transport/link_matrix.h"

namespace longhaul::wan_transport {

void LinkEstimator::AddTransfer(const std::string& peer, uint64_t bytes, double seconds) {
  if (seconds <= 0) return;
  std::lock_guard lock(mu_);
  LinkEstimate& e = m_.peers[peer];
  constexpr double kAlpha = 0.3;
  // A transfer takes about rtt + bytes/bw; subtract the known RTT so small
  // transfers do not make the link look slow.
  double transfer_time = seconds - e.rtt_seconds;
  if (bytes >= (uint64_t{256} << 10) && transfer_time > seconds * 0.1) {
    double bw = static_cast<double>(bytes) / transfer_time;
    e.bandwidth_bytes_per_second = e.bandwidth_bytes_per_second == 0 ? bw : (1 - kAlpha) * e.bandwidth_bytes_per_second + kAlpha * bw;
  } else if (bytes < (uint64_t{64} << 10)) {
    e.rtt_seconds = e.rtt_seconds == 0 ? seconds : (1 - kAlpha) * e.rtt_seconds + kAlpha * seconds;
  }
  ++e.samples;
}

void LinkEstimator::SetProbe(const std::string& peer, double rtt, double bw) {
  std::lock_guard lock(mu_);
  LinkEstimate& e = m_.peers[peer];
  e.rtt_seconds = rtt;
  e.bandwidth_bytes_per_second = bw;
  ++e.samples;
}

LinkEstimate LinkEstimator::Get(const std::string& peer) const {
  std::lock_guard lock(mu_);
  auto it = m_.peers.find(peer);
  return it == m_.peers.end() ? LinkEstimate{} : it->second;
}

LinkMatrix LinkEstimator::Snapshot() const {
  std::lock_guard lock(mu_);
  return m_;
}

int ConnectionsForBdp(double bw, double rtt, size_t window_bytes) {
  if (bw <= 0 || rtt <= 0 || window_bytes == 0) return 4;
  double k = std::ceil(bw * rtt / static_cast<double>(window_bytes));
  return static_cast<int>(std::clamp(k, 1.0, 16.0));
}

}  // namespace longhaul::wan_transport
