#include "longhaul/sync_policies/in_process_link.h"

#include <atomic>
#include <string>

namespace longhaul::sync_policies {

class InProcessGroup::Link final : public CollectiveLink {
 public:
  Link(InProcessGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_->size(); }
  uint64_t bytes_sent() const override { return bytes_sent_.load(); }

  Status Send(int peer, uint32_t tag, std::span<const std::byte> data, Deadline) override {
    LONGHAUL_RETURN_IF_ERROR(CheckPeer(peer));
    std::lock_guard<std::mutex> lock(group_->mu_);
    if (group_->dead_[rank_]) return Aborted("rank " + std::to_string(rank_) + " was killed");
    if (group_->dead_[peer]) return Unavailable("peer rank " + std::to_string(peer) + " is gone");
    group_->queues_[{rank_, peer, tag}].emplace_back(data.begin(), data.end());
    bytes_sent_ += data.size();
    group_->cv_.notify_all();
    return Status::Ok();
  }

  Result<std::vector<std::byte>> Recv(int peer, uint32_t tag, Deadline deadline) override {
    LONGHAUL_RETURN_IF_ERROR(CheckPeer(peer));
    std::unique_lock<std::mutex> lock(group_->mu_);
    auto& queue = group_->queues_[{peer, rank_, tag}];
    while (true) {
      if (group_->dead_[rank_]) return Status(Aborted("rank " + std::to_string(rank_) + " was killed"));
      if (!queue.empty()) {
        std::vector<std::byte> msg = std::move(queue.front());
        queue.pop_front();
        return msg;
      }
      // Messages sent before a peer died are still delivered, as a network would.
      if (group_->dead_[peer]) return Status(Unavailable("peer rank " + std::to_string(peer) + " is gone"));
      if (group_->cv_.wait_until(lock, deadline) == std::cv_status::timeout && queue.empty() && !group_->dead_[peer])
        return Status(DeadlineExceeded("no message from peer rank " + std::to_string(peer) + " (tag " +
                                       std::to_string(tag) + ") by the deadline"));
    }
  }

 private:
  Status CheckPeer(int peer) const {
    if (peer < 0 || peer >= group_->size() || peer == rank_)
      return InvalidArgument("rank " + std::to_string(rank_) + ": bad peer rank " + std::to_string(peer) +
                             " (world size " + std::to_string(group_->size()) + ")");
    return Status::Ok();
  }

  InProcessGroup* group_;
  int rank_;
  std::atomic<uint64_t> bytes_sent_{0};
};

InProcessGroup::InProcessGroup(int n) : dead_(n > 0 ? n : 0, false) {
  for (int r = 0; r < n; ++r) links_.push_back(std::make_unique<Link>(this, r));
}

InProcessGroup::~InProcessGroup() = default;

CollectiveLink& InProcessGroup::link(int rank) { return *links_.at(rank); }

void InProcessGroup::Kill(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank >= 0 && rank < size()) dead_[rank] = true;
  cv_.notify_all();
}

}  // namespace longhaul::sync_policies
