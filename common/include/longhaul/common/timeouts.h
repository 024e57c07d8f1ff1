// The one timeout hierarchy of longhaul. Every blocking call takes a deadline
// derived from these values, and the order below is an invariant checked by
// Timeouts::Validate():
//
//   link_io  <  collective  <  round  <  job_idle
//   heartbeat_interval  <  heartbeat_miss (= interval * misses)  <  round
//
// A single chunk read or write (link_io) fails before the collective that issued
// it gives up, so the collective can say which peer stalled. Heartbeats run on
// their own thread, independent of the data plane, so a region stuck in a slow
// collective still heartbeats; a dead region is noticed after heartbeat_miss,
// well before the round deadline, and the round is aborted and retried with the
// survivors. A job with no committed round for job_idle is failed.
#pragma once

#include <chrono>
#include <string>

#include "longhaul/common/status.h"

namespace longhaul {

using Duration = std::chrono::milliseconds;

struct Timeouts {
  Duration link_io{std::chrono::seconds(10)};        // one chunk send/receive, one reply
  Duration collective{std::chrono::seconds(60)};     // one cross-region all-reduce
  Duration heartbeat_interval{std::chrono::milliseconds(500)};
  int heartbeat_misses = 6;                           // region down after this many misses
  Duration round{std::chrono::seconds(600)};         // H inner steps + outer sync
  Duration job_idle{std::chrono::seconds(3600)};     // no committed round for this long

  Duration heartbeat_miss() const { return heartbeat_interval * heartbeat_misses; }
  // Fails, naming the pair, when the order above does not hold.
  Status Validate() const;
};

// A point in time by which a blocking call must return.
using Deadline = std::chrono::steady_clock::time_point;
inline Deadline DeadlineAfter(Duration d) { return std::chrono::steady_clock::now() + d; }
// Milliseconds left until the deadline, never negative.
inline Duration Remaining(Deadline d) {
  auto left = std::chrono::duration_cast<Duration>(d - std::chrono::steady_clock::now());
  return left.count() > 0 ? left : Duration(0);
}

}  // namespace longhaul
