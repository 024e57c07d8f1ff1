// Injectable time source (LevelDB's Env, Envoy's TimeSource): membership,
// heartbeat and scheduling decisions take a Clock so tests drive time by hand.
#pragma once

#include <atomic>
#include <chrono>

namespace longhaul {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Wall-clock seconds since the Unix epoch, for persisted timestamps.
  virtual double UnixSeconds() const = 0;
};

// The real clock.
class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  double UnixSeconds() const override;
  static SystemClock& Instance();
};

// A clock that moves only when told to; for deterministic tests.
class ManualClock final : public Clock {
 public:
  TimePoint Now() const override { return TimePoint(std::chrono::nanoseconds(now_ns_.load())); }
  double UnixSeconds() const override { return 1.7e9 + static_cast<double>(now_ns_.load()) * 1e-9; }
  void Advance(std::chrono::nanoseconds d) { now_ns_ += d.count(); }

 private:
  std::atomic<long long> now_ns_{0};
};

}  // namespace longhaul
