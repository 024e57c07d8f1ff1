// LinkMatrix: measured bandwidth and RTT per peer, for the scheduler and metrics.
//
// Passive, from the transfers a job makes anyway:
//  - RTT: the ack time of something too small to be slowed by bandwidth (a
//    transfer under kRttSampleMaxBytes, or the 1-byte lead probe the endpoint
//    sends ahead of a larger one), not the first on a new connection (its TCP
//    and CURVE handshakes are in it); the estimate is the least of the last
//    kRttWindow samples: queueing behind earlier bytes can only inflate a sample.
//  - bandwidth: delivery rate over a busy period. A peer's link is busy from the
//    first transfer queued while none is in flight until the last of them is
//    acked. Its first bytes reach the peer half an RTT after they leave, its last
//    bytes' ack comes back half an RTT after they arrive, so the period's bytes
//    over the time from its marker's send plus one RTT (the marker: the lead
//    probe, or the first transfer itself when it is small) to its last ack is the
//    link's rate, whatever the RTT, however many transfers and connections share
//    the period. (Not from the marker's ack itself: on another connection than
//    the period's bytes it can come back behind them.) Blended with an EWMA,
//    except that a second rate in a row more than 2x off the estimate, the same
//    way, replaces it (a changed link is seen at its second period, not many
//    rounds later; one period with gaps does not throw the estimate);
//    periods under kTimedBytes, with a failed transfer, or without a marker ack
//    teach nothing; gaps in which the sender had nothing to send make a period
//    read low. Until a link's first period ends, the part of the open one acked
//    so far (kTimedBytes or more) stands for it: a job's first exchange gives
//    its links a rate before the acks of its last bytes are back.
// An explicit probe (WanEndpoint::Probe) overwrites both.
//
// Times are seconds on the caller's steady clock; the arithmetic is pure and
// unit-tested without sockets.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "longhaul/sync_policies/link_estimate.h"

namespace longhaul::wan_transport {

// samples: busy periods timed plus round trips and probes taken.
using sync_policies::LinkEstimate;

struct LinkMatrix {
  std::map<std::string, LinkEstimate> peers;  // by peer endpoint
};

// Thread-safe accumulator behind WanEndpoint::measurements().
class LinkEstimator {
 public:
  static constexpr uint64_t kRttSampleMaxBytes = uint64_t{64} << 10;  // smaller transfers: round trips
  static constexpr uint64_t kTimedBytes = uint64_t{256} << 10;        // smaller busy periods: no rate
  static constexpr size_t kRttWindow = 16;

  // What a transfer entering a peer's link must carry back to Done.
  struct Ticket {
    uint64_t period = 0;  // the busy period it belongs to
    bool opens = false;   // the first of its period: it (small) or a lead probe marks the start
  };
  Ticket Queued(const std::string& peer);
  // The period's marker, sent at `sent`, was acked at `acked`: a round trip
  // (unless it opened its connection: the handshakes are in it), and the
  // period's clock starts at sent + RTT (at `acked` without a clean RTT).
  void MarkerAcked(const std::string& peer, uint64_t period, double sent, double acked,
                   bool opened_connection = false);
  // A transfer of the period left the link at `at`: acked (its bytes count
  // unless it was the marker) or failed (the period teaches nothing).
  void Done(const std::string& peer, uint64_t period, uint64_t bytes, bool acked, double at);
  // A round trip of something too small to be slowed by bandwidth.
  void AddRtt(const std::string& peer, double seconds);
  void SetProbe(const std::string& peer, double rtt_seconds, double bandwidth_bytes_per_second);
  LinkEstimate Get(const std::string& peer) const;
  LinkMatrix Snapshot() const;

 private:
  void AddRttLocked(const std::string& peer, double seconds);
  LinkEstimate WithOpenPeriodLocked(const std::string& peer, LinkEstimate e) const;

  struct Busy {
    uint64_t period = 0;
    int open = 0;          // transfers queued and not yet done
    uint64_t bytes = 0;    // acked in this period, the marker's excluded
    double start = -1;     // the marker's send + RTT; < 0 = no marker ack yet
    double last_ack = -1;  // of the bytes counted
    bool failed = false;
  };

  mutable std::mutex mu_;
  LinkMatrix m_;
  std::map<std::string, std::deque<double>> rtt_samples_;  // newest last, at most kRttWindow
  std::map<std::string, Busy> busy_;
  std::map<std::string, int> off_streak_;  // the last rate was 2x above (1) or below (-1) the estimate
  uint64_t periods_ = 0;
};

}  // namespace longhaul::wan_transport
