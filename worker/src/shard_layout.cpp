#include "longhaul/worker/shard_layout.h"

#include <algorithm>
#include <vector>

#include "longhaul/sync_policies/schedule.h"

namespace longhaul::worker {

ShardLayout::ShardLayout(size_t num_params, uint32_t fragments, int workers, int rank)
    : num_params_(num_params), fragments_(std::max<uint32_t>(1, fragments)), workers_(workers), rank_(rank) {}

ShardPiece ShardLayout::PieceOf(uint32_t fragment, int rank) const {
  ShardPiece p;
  auto [fb, fe] = sync_policies::FragmentRange(num_params_, fragments_, fragment);
  p.fragment_begin = fb;
  p.fragment_end = fe;
  auto [b, e] = sync_policies::FragmentRange(fe - fb, static_cast<uint32_t>(workers_), static_cast<uint32_t>(rank));
  p.begin = fb + b;
  p.end = fb + e;
  p.padded = (fe - fb + static_cast<size_t>(workers_) - 1) / static_cast<size_t>(workers_);
  return p;
}

Status GatherFragment(trainer::IntraRegionGroup& group, const ShardLayout& layout, uint32_t fragment,
                      std::span<const float> mine, std::span<float> full, std::vector<float>& scratch) {
  const ShardPiece me = layout.Piece(fragment);
  if (mine.size() != me.size() || full.size() != layout.num_params()) {
    return InvalidArgument("GatherFragment: piece of " + std::to_string(mine.size()) + " floats, expected " +
                           std::to_string(me.size()));
  }
  if (layout.workers() == 1) {
    std::copy(mine.begin(), mine.end(), full.begin() + static_cast<std::ptrdiff_t>(me.begin));
    return Status::Ok();
  }
  // AllGather needs equal contributions: pad every piece to the largest one.
  // scratch = [this worker's padded piece | every worker's].
  scratch.resize(me.padded * (static_cast<size_t>(layout.workers()) + 1));
  std::span<float> slot = std::span<float>(scratch).first(me.padded);
  std::span<float> all = std::span<float>(scratch).subspan(me.padded);
  std::copy(mine.begin(), mine.end(), slot.begin());
  std::fill(slot.begin() + static_cast<std::ptrdiff_t>(mine.size()), slot.end(), 0.0f);
  LONGHAUL_RETURN_IF_ERROR(group.AllGather(slot, all));
  for (int r = 0; r < layout.workers(); ++r) {
    const ShardPiece p = layout.PieceOf(fragment, r);
    const auto src = all.begin() + static_cast<std::ptrdiff_t>(me.padded * static_cast<size_t>(r));
    std::copy(src, src + static_cast<std::ptrdiff_t>(p.size()), full.begin() + static_cast<std::ptrdiff_t>(p.begin));
  }
  return Status::Ok();
}

Result<bool> AllRanksOk(trainer::IntraRegionGroup& group, bool ok) {
  float flag = ok ? 1.0f : 0.0f;
  if (group.size() > 1) LONGHAUL_RETURN_IF_ERROR(group.AllReduceMean(std::span<float>(&flag, 1)));
  return flag == 1.0f;
}

}  // namespace longhaul::worker
