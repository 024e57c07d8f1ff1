// In-process CollectiveLink for tests: n participants in one process, one thread
// each. Messages are queued per (sender, receiver, tag), so Send never blocks.
// Kill(rank) simulates a region dying: its peers get kUnavailable naming it once
// its queued messages are consumed, and its own calls fail with kAborted.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "longhaul/sync_policies/link.h"

namespace longhaul::sync_policies {

class InProcessGroup {
 public:
  explicit InProcessGroup(int n);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const { return static_cast<int>(links_.size()); }
  CollectiveLink& link(int rank);
  void Kill(int rank);

 private:
  class Link;
  friend class Link;
  using Key = std::tuple<int, int, uint32_t>;  // sender, receiver, tag

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::deque<std::vector<std::byte>>> queues_;
  std::vector<bool> dead_;
  std::vector<std::unique_ptr<Link>> links_;
};

}  // namespace longhaul::sync_policies
