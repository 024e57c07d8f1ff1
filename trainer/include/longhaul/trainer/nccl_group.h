// NCCL backend of IntraRegionGroup, compiled only with CUDA (LONGHAUL_HAVE_CUDA).
//
// Rendezvous: one NewNcclUniqueId() per group (job and launch), shared through
// the region's rendezvous store as the Gloo group meets (ShareNcclUniqueId: the
// agent's LaunchStore for its workers, on any node); each worker then calls
// MakeNcclGroup with the 128 bytes and its rank. All spans passed to the group's collectives must point to DEVICE memory on
// `device`; each call is enqueued on the group's stream, a blocking one (it
// starts after the work queued before it on the legacy default stream, where
// the caller's kernels wrote the buffer), and waited for before it returns, so
// the results are ready when it does. AllReduceMean uses ncclAvg.
#pragma once

#ifdef LONGHAUL_HAVE_CUDA

#include <chrono>
#include <cstdint>
#include <string>
#include <memory>
#include <vector>

#include "longhaul/trainer/intra_region.h"

namespace longhaul::trainer {

// The opaque ncclUniqueId, as bytes (works without a GPU).
Result<std::vector<uint8_t>> NewNcclUniqueId();

// Rank 0 makes the group's id and sets it under "<prefix>/nccl-unique-id";
// every other rank reads it from there (waiting up to `timeout`). An error
// names the key or the bad length.
Result<std::vector<uint8_t>> ShareNcclUniqueId(RendezvousStore& store, const std::string& prefix, int rank,
                                               std::chrono::milliseconds timeout);

struct NcclGroupOptions {
  std::vector<uint8_t> unique_id;  // from NewNcclUniqueId(), NCCL_UNIQUE_ID_BYTES long
  int rank = 0;
  int size = 1;
  int device = 0;                  // CUDA device ordinal of this worker
  // Bounds the rendezvous and each collective: past it the communicator is
  // aborted (kDeadlineExceeded) and the group unusable, as a Gloo group's
  // timeout leaves it, instead of a rank waiting for ever on a peer gone.
  std::chrono::milliseconds timeout{30000};
  Status Validate() const;
};

// kUnavailable when CUDA/NCCL cannot initialise (no driver, no GPU);
// kDeadlineExceeded when the peers did not all join within options.timeout.
Result<std::unique_ptr<IntraRegionGroup>> MakeNcclGroup(const NcclGroupOptions& options);

}  // namespace longhaul::trainer

#endif  // LONGHAUL_HAVE_CUDA
