// ShardLayout: which floats of the flat parameter vector a worker carries.
//
// The vector is split into F fragments (1 for DiLoCo, P for Streaming DiLoCo;
// sync_policies::FragmentRange) and each fragment into N contiguous pieces, one
// per worker of the region (sizes differ by at most one). Worker i carries piece
// i of every fragment over the WAN and keeps the outer-optimizer state for it.
// Since pieces partition fragments and fragments partition the vector, any
// per-element state laid out piece by piece lines up with the parameters,
// which is what makes checkpoints independent of the worker count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/trainer/intra_region.h"

namespace longhaul::worker {

struct ShardPiece {
  size_t begin = 0, end = 0;                 // this worker's piece, absolute indices
  size_t fragment_begin = 0, fragment_end = 0;
  size_t padded = 0;                         // largest piece of the fragment (all-gather slot)
  size_t size() const { return end - begin; }
};

class ShardLayout {
 public:
  ShardLayout(size_t num_params, uint32_t fragments, int workers, int rank);
  uint32_t fragments() const { return fragments_; }
  int workers() const { return workers_; }
  int rank() const { return rank_; }
  size_t num_params() const { return num_params_; }
  ShardPiece Piece(uint32_t fragment) const { return PieceOf(fragment, rank_); }
  ShardPiece PieceOf(uint32_t fragment, int rank) const;

 private:
  size_t num_params_;
  uint32_t fragments_;
  int workers_;
  int rank_;
};

// Every worker contributes its piece of `fragment` (mine.size() == piece size);
// `full` (the whole vector) receives every worker's piece of that fragment.
// `scratch` holds the padded pieces between calls (kept by the caller, so that
// gathering every round or step takes no fresh memory).
Status GatherFragment(trainer::IntraRegionGroup& group, const ShardLayout& layout, uint32_t fragment,
                      std::span<const float> mine, std::span<float> full, std::vector<float>& scratch);

// True on every rank iff `ok` is true on every rank (one tiny all-reduce), so all
// workers of a region take the same branch after a step that may fail on some.
Result<bool> AllRanksOk(trainer::IntraRegionGroup& group, bool ok);

}  // namespace longhaul::worker
