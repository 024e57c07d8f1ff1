// CollectiveLink: the abstract transport the cross-region collectives are
// written against (as Gloo's algorithms are written against transport::Pair).
//
// One CollectiveLink is one participant's view of a group of `world_size()`
// participants (the regions taking part in a round, in ring order; this one is
// `rank()`). wan_transport provides the ZeroMQ implementation; tests use the
// in-process one. Contract:
//  - Send() is buffered: it returns once the bytes are queued (it may block for
//    backpressure, but the implementation keeps receiving meanwhile), so every
//    participant of a ring may Send before it Recvs without deadlock.
//  - Messages between one (sender, receiver, tag) are delivered in order.
//  - Recv() returns the next message from `peer` with `tag`, or an error by the
//    deadline: kDeadlineExceeded / kUnavailable naming the peer when it stalls or
//    dies, kAborted when the collective was aborted. No partial message is ever
//    returned as complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"

namespace longhaul::sync_policies {

class CollectiveLink {
 public:
  virtual ~CollectiveLink() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual Status Send(int peer, uint32_t tag, std::span<const std::byte> data, Deadline deadline) = 0;
  virtual Result<std::vector<std::byte>> Recv(int peer, uint32_t tag, Deadline deadline) = 0;
  // Bytes this participant has sent so far (payload only), for metrics and benches.
  virtual uint64_t bytes_sent() const = 0;

  // Buffer recycling, for links that pay for fresh memory (page faults) per
  // message: Buffer(n) hands out n bytes to fill and pass to SendOwned, which
  // takes it without a copy; Recycle takes back a buffer Recv returned, or one
  // Buffer handed out and the caller kept, once the caller is done with it. The
  // defaults allocate, copy and free.
  virtual std::vector<std::byte> Buffer(size_t n) { return std::vector<std::byte>(n); }
  virtual Status SendOwned(int peer, uint32_t tag, std::vector<std::byte>&& data, Deadline deadline) {
    return Send(peer, tag, data, deadline);
  }
  virtual void Recycle(std::vector<std::byte>&& /*buffer*/) {}
};

}  // namespace longhaul::sync_policies
