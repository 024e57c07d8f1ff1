// Decoupled averaging of the inner optimizer's moments across regions
// (DES-LOC, arXiv 2505.22549), for the kinds with an outer step (diloco,
// streaming_diloco). DiLoCo leaves each region's AdamW moments its own; with a
// period P > 0 a moment is replaced by its mean over the round's regions at the
// end of every round that is a multiple of P, so a region's next inner steps
// start from the job-wide estimate of the gradient's mean (m) and scale (v).
//
// Every round that averages m averages v too (m's period is a multiple of
// v's): a region that divides the job's mean m by its own v takes huge steps
// where its own data rarely reaches (non-IID regions; measured: a
// pseudo-gradient 2000x the median one round after m alone was averaged).
//
// The moments travel in bf16 whatever the job's codec: the second moment needs
// relative precision at every size (a block codec rounds a block's small
// values to zero, and Adam's step m / sqrt(v) then explodes), and bf16 keeps
// 8 bits of it. The bytes count in the round's WAN bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "longhaul/common/status.h"

namespace longhaul::sync_policies {

struct MomentSyncOptions {
  uint32_t first_moment_sync_rounds = 0;   // AdamW's m (the inner state's buffer 0); 0 = never
  uint32_t second_moment_sync_rounds = 0;  // v (buffer 1); 0 = never

  bool enabled() const { return first_moment_sync_rounds > 0 || second_moment_sync_rounds > 0; }
  // How many inner-state buffers the periods need (2 when v is averaged).
  size_t buffers_needed() const { return second_moment_sync_rounds > 0 ? 2 : first_moment_sync_rounds > 0 ? 1 : 0; }
  // Is inner-state buffer `buffer` (0 = m, 1 = v) averaged at the end of `round`?
  bool Due(size_t buffer, uint32_t round) const;
  // Periods in 0..1000000; m's a multiple of v's. Errors name the field
  // (first_moment_sync_rounds, second_moment_sync_rounds).
  Status Validate() const;
  static const char* BufferName(size_t buffer) { return buffer == 0 ? "first moment" : "second moment"; }
};

}  // namespace longhaul::sync_policies
