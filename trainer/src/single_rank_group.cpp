// The group of one: every collective is the identity (or a copy).
#include <algorithm>
#include <string>

#include "longhaul/trainer/intra_region.h"

namespace longhaul::trainer {

IntraRegionGroup::~IntraRegionGroup() = default;

namespace {

class SingleRankGroup final : public IntraRegionGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllReduceMean(std::span<float>) override { return Status::Ok(); }
  Status AllGather(std::span<const float> mine, std::span<float> all) override {
    if (all.size() != mine.size())
      return InvalidArgument("all-gather: output has " + std::to_string(all.size()) +
                             " floats, want " + std::to_string(mine.size()));
    std::copy(mine.begin(), mine.end(), all.begin());
    return Status::Ok();
  }
  Status Broadcast(std::span<float>, int root) override {
    if (root != 0) return InvalidArgument("broadcast: root " + std::to_string(root) + " not in a group of 1");
    return Status::Ok();
  }
  Status Barrier() override { return Status::Ok(); }
};

}  // namespace

std::unique_ptr<IntraRegionGroup> MakeSingleRankGroup() { return std::make_unique<SingleRankGroup>(); }

}  // namespace longhaul::trainer
