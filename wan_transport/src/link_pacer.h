// LinkPacer: longhaul-linkem's rate limit, one per direction of a link (its
// connections share it). Pure: the caller gives the times and does the waiting
// (link_emulator.cpp).
//
// It keeps the time at which the link finishes sending what it was given,
// as a real link at this rate would: bytes start once the link is free and
// they are ready, and may be handed on once the link is within a burst (2 ms
// of the rate, at least 16 KiB) of having sent them. So bytes that reach an
// idle link go out at once, an idle time is no licence for a long burst, and
// writers sharing the pacer never exceed the rate together. "Ready" is when the
// bytes could leave (their release after the link's delay), not when a writer
// thread got to them: a writer scheduled late on a loaded machine held back
// bytes the link would have been sending, and catches up (the link is never
// more than kMaxLateness behind the present, which also bounds the burst after
// a receiver that stopped reading for a while).
#pragma once

#include <chrono>
#include <cstddef>

namespace longhaul::wan_transport {

class LinkPacer {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kMaxLateness{100};

  // bytes_per_second <= 0: unlimited.
  LinkPacer(double bytes_per_second, Clock::time_point now);
  void SetRate(double bytes_per_second) { rate_ = bytes_per_second; }
  double rate() const { return rate_; }

  // `bytes`, ready to leave since `ready`, are taken at `now`: returns the
  // time from which they may be sent (`now` when the link can take them).
  Clock::time_point Take(size_t bytes, Clock::time_point ready, Clock::time_point now);

 private:
  double rate_;
  Clock::time_point finish_;  // when the link has sent everything taken so far
};

}  // namespace longhaul::wan_transport
