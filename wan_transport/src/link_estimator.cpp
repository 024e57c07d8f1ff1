#include <algorithm>
#include <cmath>

#include "longhaul/wan_transport/endpoint.h"
#include "longhaul/wan_transport/link_matrix.h"

namespace longhaul::wan_transport {
namespace {
constexpr double kBandwidthAlpha = 0.3;  // EWMA weight of a new delivery rate
constexpr double kStepChange = 2.0;      // a rate this many times off the estimate replaces it
}  // namespace

LinkEstimator::Ticket LinkEstimator::Queued(const std::string& peer) {
  std::lock_guard lock(mu_);
  Busy& b = busy_[peer];
  Ticket t{.period = b.period, .opens = false};
  if (b.open == 0) {
    b = Busy{.period = ++periods_};
    t = {.period = b.period, .opens = true};
  }
  ++b.open;
  return t;
}

void LinkEstimator::MarkerAcked(const std::string& peer, uint64_t period, double sent, double acked,
                                bool opened_connection) {
  if (!(acked > sent)) return;
  std::lock_guard lock(mu_);
  if (!opened_connection) AddRttLocked(peer, acked - sent);
  auto it = busy_.find(peer);
  if (it == busy_.end() || it->second.period != period || it->second.start >= 0) return;
  // The marker's own ack can come late (queued behind the period's bytes on
  // another connection); the least round trip says when it would have come.
  // Behind a connection's handshakes everything waited as long as it did.
  const double rtt = m_.peers[peer].rtt_seconds;
  it->second.start = opened_connection || rtt <= 0 ? acked : sent + rtt;
}

void LinkEstimator::Done(const std::string& peer, uint64_t period, uint64_t bytes, bool acked, double at) {
  std::lock_guard lock(mu_);
  auto it = busy_.find(peer);
  if (it == busy_.end() || it->second.period != period || it->second.open == 0) return;
  Busy& b = it->second;
  if (!acked) b.failed = true;
  else if (b.start >= 0) {  // bytes acked before the marker's ack cannot be timed
    b.bytes += bytes;
    b.last_ack = at;
  }
  if (--b.open > 0) return;
  const double seconds = at - b.start;
  if (b.failed || b.start < 0 || b.bytes < kTimedBytes || !(seconds > 0)) return;
  LinkEstimate& e = m_.peers[peer];
  const double bw = static_cast<double>(b.bytes) / seconds, known = e.bytes_per_second;
  // Two rates in a row off by more than kStepChange, the same way, are a
  // changed link: taken at once (blended, a 4x drop would take many rounds to
  // show). One alone is blended like any other (a period with gaps reads low).
  const int off = known == 0 ? 0 : bw > known * kStepChange ? 1 : bw < known / kStepChange ? -1 : 0;
  int& streak = off_streak_[peer];
  const bool changed = known == 0 || (off != 0 && streak == off);
  streak = changed ? 0 : off;
  e.bytes_per_second = changed ? bw : (1 - kBandwidthAlpha) * known + kBandwidthAlpha * bw;
  ++e.samples;
}

void LinkEstimator::AddRttLocked(const std::string& peer, double seconds) {
  auto& window = rtt_samples_[peer];
  window.push_back(seconds);
  if (window.size() > kRttWindow) window.pop_front();
  LinkEstimate& e = m_.peers[peer];
  e.rtt_seconds = *std::min_element(window.begin(), window.end());
  ++e.samples;
}

void LinkEstimator::AddRtt(const std::string& peer, double seconds) {
  if (!(seconds > 0)) return;
  std::lock_guard lock(mu_);
  AddRttLocked(peer, seconds);
}

void LinkEstimator::SetProbe(const std::string& peer, double rtt, double bw) {
  std::lock_guard lock(mu_);
  LinkEstimate& e = m_.peers[peer];
  e.rtt_seconds = rtt;
  e.bytes_per_second = bw;
  rtt_samples_[peer].assign(1, rtt);
  ++e.samples;
}

LinkEstimate LinkEstimator::WithOpenPeriodLocked(const std::string& peer, LinkEstimate e) const {
  if (e.bytes_per_second > 0) return e;
  auto it = busy_.find(peer);
  if (it == busy_.end()) return e;
  const Busy& b = it->second;
  if (b.open > 0 && !b.failed && b.start >= 0 && b.bytes >= kTimedBytes && b.last_ack > b.start)
    e.bytes_per_second = static_cast<double>(b.bytes) / (b.last_ack - b.start);
  return e;
}

LinkEstimate LinkEstimator::Get(const std::string& peer) const {
  std::lock_guard lock(mu_);
  auto it = m_.peers.find(peer);
  return WithOpenPeriodLocked(peer, it == m_.peers.end() ? LinkEstimate{} : it->second);
}

LinkMatrix LinkEstimator::Snapshot() const {
  std::lock_guard lock(mu_);
  LinkMatrix out = m_;
  for (auto& [peer, e] : out.peers) e = WithOpenPeriodLocked(peer, e);
  return out;
}

int ConnectionsForBdp(double bw, double rtt, size_t window_bytes, int max_connections, int unmeasured) {
  const double cap = std::max(1, max_connections);
  if (bw <= 0 || rtt <= 0 || window_bytes == 0) return static_cast<int>(std::clamp<double>(unmeasured, 1.0, cap));
  const double k = std::ceil(bw * rtt / static_cast<double>(window_bytes));
  return static_cast<int>(std::clamp(k, 1.0, cap));
}

}  // namespace longhaul::wan_transport
