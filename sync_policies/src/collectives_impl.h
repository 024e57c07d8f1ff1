// The algorithms behind AllReduceMean, one per payload kind.
#pragma once

#include <cstdint>
#include <span>

#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/link.h"

namespace longhaul::sync_policies {

// Dense codecs: ring reduce-scatter + all-gather (world_size >= 2).
Status RingAllReduceMean(CollectiveLink& link, std::span<float> data, const Compressor& codec, Deadline deadline,
                         uint64_t* bytes_sent);
// Sparse payloads (topk, topk2): ring all-gather, summed in rank order (world_size >= 2).
Status SparseAllGatherMean(CollectiveLink& link, std::span<float> data, const Compressor& codec, Deadline deadline,
                           ErrorFeedback* feedback, uint64_t* bytes_sent);

}  // namespace longhaul::sync_policies
