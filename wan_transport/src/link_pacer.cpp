#include "link_pacer.h"

#include <algorithm>

namespace longhaul::wan_transport {
namespace {
LinkPacer::Clock::duration SecondsOf(double s) {
  return std::chrono::duration_cast<LinkPacer::Clock::duration>(std::chrono::duration<double>(s));
}
}  // namespace

LinkPacer::LinkPacer(double bytes_per_second, Clock::time_point now) : rate_(bytes_per_second), finish_(now) {}

LinkPacer::Clock::time_point LinkPacer::Take(size_t bytes, Clock::time_point ready, Clock::time_point now) {
  if (rate_ <= 0) return now;
  const double burst = std::max(16384.0, rate_ * 0.002);
  finish_ = std::max({finish_, std::min(ready, now), now - kMaxLateness}) + SecondsOf(static_cast<double>(bytes) / rate_);
  return std::max(now, finish_ - SecondsOf(burst / rate_));
}

}  // namespace longhaul::wan_transport
