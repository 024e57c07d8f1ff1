// LinkPacer (longhaul-linkem's rate limit) on a fake clock.
#include <catch2/catch.hpp>

#include "link_pacer.h"

using longhaul::wan_transport::LinkPacer;
using namespace std::chrono_literals;
using Clock = LinkPacer::Clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

constexpr double kRate = 5e6;       // 40 Mbit/s: 16 KiB take 3.3 ms
constexpr size_t kPiece = 16384;    // linkem's writers take 16 KiB at a time

// A writer that sends `pieces` back to back, each ready once the previous one
// was written (at once), and that wakes `late` after the time the pacer gave
// whenever it has to wait: the time the last piece may be sent.
Clock::time_point SendPieces(LinkPacer& pacer, Clock::time_point start, int pieces, Clock::duration late) {
  Clock::time_point ready = start, now = start, at = start;
  for (int i = 0; i < pieces; ++i) {
    at = pacer.Take(kPiece, ready, now);
    if (at > now) now = at + late;
    ready = at;
  }
  return at;
}

}  // namespace

TEST_CASE("linkem pacer: back-to-back pieces leave at the rate, and an idle link takes a burst at once",
          "[wan][linkem]") {
  const Clock::time_point t0{};
  LinkPacer pacer(kRate, t0);
  CHECK(pacer.Take(kPiece, t0, t0) == t0);  // one burst (16 KiB) goes at once
  // 300 more pieces: 300 x 16 KiB at the rate.
  const Clock::time_point last = SendPieces(pacer, t0, 300, 0ms);
  CHECK(Seconds(last - t0) == Approx(300 * kPiece / kRate).epsilon(0.01));
  // A second of idle time earns no more than a burst: the second piece waits.
  const Clock::time_point later = last + 1s;
  CHECK(pacer.Take(kPiece, later, later) == later);
  CHECK(Seconds(pacer.Take(kPiece, later, later) - later) == Approx(kPiece / kRate).epsilon(0.01));
  // Unlimited: nothing waits.
  LinkPacer open(0, t0);
  CHECK(open.Take(size_t{1} << 30, t0, t0) == t0);
}

TEST_CASE("linkem pacer: writers that wake late still deliver the rate", "[wan][linkem]") {
  // Each wake-up 5 ms late (a loaded machine), more than a piece's 3.3 ms: a
  // bucket that refills only up to its burst loses part of that on every wait
  // (about 80% of the rate here); the pacer catches up.
  const Clock::time_point t0{};
  LinkPacer pacer(kRate, t0);
  const int pieces = 300;
  const Clock::time_point last = SendPieces(pacer, t0, pieces, 5ms);
  const double seconds = Seconds(last - t0) + 0.005;  // the last one may be written 5 ms late too
  CHECK(pieces * kPiece / seconds == Approx(kRate).epsilon(0.03));
}

TEST_CASE("linkem pacer: bytes ready while the writer was away are credited, a gap without bytes is not",
          "[wan][linkem]") {
  const Clock::time_point t0{};
  LinkPacer pacer(kRate, t0);
  const size_t big = 20 * kPiece;  // 66 ms at the rate
  // Ready at t0, taken 50 ms late: the link would have sent 50 ms worth meanwhile.
  const Clock::time_point late = t0 + 50ms;
  const Clock::time_point at = pacer.Take(big, t0, late);
  CHECK(Seconds(at - t0) == Approx((big - 16384.0) / kRate).epsilon(0.01));
  // Bytes that became ready only when taken (after a gap): no credit for the gap.
  const Clock::time_point gap = at + 200ms;
  const Clock::time_point next = pacer.Take(big, gap, gap);
  CHECK(Seconds(next - gap) == Approx((big - 16384.0) / kRate).epsilon(0.01));
  // A writer stopped for a minute catches up at most kMaxLateness.
  const Clock::time_point minute = next + 60s;
  const size_t second_of_bytes = static_cast<size_t>(kRate);
  const Clock::time_point resumed = pacer.Take(second_of_bytes, next, minute);
  CHECK(Seconds(resumed - minute) ==
        Approx(1.0 - Seconds(LinkPacer::kMaxLateness) - 16384.0 / kRate).epsilon(0.01));
}
