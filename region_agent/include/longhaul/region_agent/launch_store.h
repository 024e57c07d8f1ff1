// LaunchStore: one launch's rendezvous key/value store (Gloo's store; an NCCL
// unique id), kept by the agent and served to that launch's workers over the
// worker socket (v1::StoreRequest), so workers on any host meet without a
// shared filesystem. A new launch starts with an empty one. Bounded: a worker
// cannot make the agent hold more than kMaxTotalBytes.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::region_agent {

class LaunchStore {
 public:
  static constexpr size_t kMaxKeyBytes = 512;
  static constexpr size_t kMaxValueBytes = size_t{1} << 20;
  static constexpr size_t kMaxTotalBytes = size_t{64} << 20;

  // Sets (or replaces) a key; kInvalidArgument / kResourceExhausted name it.
  Status Set(const std::string& key, std::string value);
  std::optional<std::string> Get(const std::string& key) const;
  // One request whose token was checked -> its reply.
  v1::StoreReply Serve(const v1::StoreRequest& request);
  size_t bytes() const { return bytes_; }

 private:
  std::map<std::string, std::string> entries_;
  size_t bytes_ = 0;
};

}  // namespace longhaul::region_agent
