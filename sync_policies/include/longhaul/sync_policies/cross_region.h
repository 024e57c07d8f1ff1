// Cross-region collectives over a CollectiveLink (ranks in ring order).
//
// AllReduceMean, dense codecs: ring reduce-scatter then ring all-gather. Each
// hop decodes the partial sum, adds its own chunk in fp32 and re-encodes; the
// chunk's owner divides by world size, encodes the mean once, decodes its own
// bytes, and the all-gather forwards those exact bytes, so every participant
// ends with bitwise-identical values whatever the arrival order. Chunks travel
// as pieces of at most kRingPieceFloats values (each encoded on its own), so a
// hop forwards one piece while the next is still on the wire.
// Sparse codecs (topk, topk2): all-gather of the sparse payloads, summed in
// rank order by everyone.
//
// Failure is all or nothing: on any error (naming the peer rank) `data` and the
// error-feedback residual are left untouched.
#pragma once

#include <cstdint>
#include <span>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/link.h"

namespace longhaul::sync_policies {

struct CollectiveStats {
  uint64_t bytes_sent = 0;  // payload bytes this participant sent
  double seconds = 0;       // wall time of the collective
};

// Values per message of the dense ring (2 MB of fp32; 512 KB as int8).
inline constexpr size_t kRingPieceFloats = size_t{1} << 19;

// Mean of `data` over all participants, in place. `feedback` (optional) is this
// participant's error feedback for the sparse codecs; the others ignore it.
// world_size 1 returns the data unchanged.
Status AllReduceMean(CollectiveLink& link, std::span<float> data, const CompressionOptions& options, Deadline deadline,
                     CollectiveStats* stats = nullptr, ErrorFeedback* feedback = nullptr);

// Copies root's `data` to every participant, exact fp32 (forwarded along the ring).
// Used to bootstrap a joining region with theta and the outer state.
Status Broadcast(CollectiveLink& link, int root, std::span<float> data, Deadline deadline);

}  // namespace longhaul::sync_policies
