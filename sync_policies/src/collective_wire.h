// Framing of collective messages: a 24-byte header (magic, phase, chunk, piece,
// pieces, world size; u32 little-endian) before each payload, so a receiver can
// tell a stale or misrouted message from the one it expects and fail with an
// error naming the peer. A chunk travels as `pieces` messages so that the ring
// can pipeline: a hop forwards piece p while piece p+1 is still on the wire.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/link.h"

namespace longhaul::sync_policies::wire {

enum class Phase : uint32_t { kReduceScatter = 1, kAllGather = 2, kSparseAllGather = 3, kBroadcast = 4 };
inline constexpr size_t kHeaderBytes = 24;

// Which message of a phase: chunk `chunk`, piece `piece` of `pieces`.
struct Part {
  uint32_t chunk = 0;
  uint32_t piece = 0;
  uint32_t pieces = 1;
};

const char* PhaseName(Phase phase);

// A frame in a link buffer (received, or encoded to keep); the buffer goes back
// to the link (Recycle) when it dies.
struct Frame {
  Frame(CollectiveLink* link, std::vector<std::byte>&& b) : bytes(std::move(b)), link_(link) {}
  Frame(Frame&& o) noexcept : bytes(std::move(o.bytes)), link_(std::exchange(o.link_, nullptr)) {}
  Frame& operator=(Frame&&) = delete;
  ~Frame() {
    if (link_) link_->Recycle(std::move(bytes));
  }
  std::span<const std::byte> payload() const { return std::span<const std::byte>(bytes).subspan(kHeaderBytes); }

  std::vector<std::byte> bytes;  // header + payload

 private:
  CollectiveLink* link_;
};

// Sends header + payload to `peer`; adds the bytes sent to *bytes_sent.
Status SendFrame(CollectiveLink& link, int peer, Phase phase, Part part, std::span<const std::byte> payload,
                 Deadline deadline, uint64_t* bytes_sent);
// Sends header + codec.EncodeTo(values), encoded straight into the link's
// buffer (no scratch, no copy); adds the bytes sent to *bytes_sent.
Status SendEncoded(CollectiveLink& link, int peer, Phase phase, Part part, const Compressor& codec,
                   std::span<const float> values, Deadline deadline, uint64_t* bytes_sent);
// Header + codec.EncodeTo(values) in a link buffer, kept rather than sent: a
// pooled buffer, so that a round's own encoded chunk takes no fresh memory.
Frame EncodeFrame(CollectiveLink& link, Phase phase, Part part, const Compressor& codec, std::span<const float> values);
// Receives the next frame of `phase` from `peer` and checks it is `part` with a
// payload of `payload_bytes`; errors name the peer rank.
Result<Frame> RecvFrame(CollectiveLink& link, int peer, Phase phase, Part part, size_t payload_bytes,
                        Deadline deadline);

}  // namespace longhaul::sync_policies::wire
