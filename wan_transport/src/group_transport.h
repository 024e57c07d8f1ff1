// What a round's group link (wan_group.cpp) needs from its endpoint, and all it
// may use: the endpoint's sockets, maps and lock stay private to
// WanEndpoint::Impl, which implements this interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/sync_policies/link.h"
#include "longhaul/wan_transport/endpoint.h"

namespace longhaul::wan_transport {

using GroupKey = std::tuple<std::string, uint64_t, uint32_t>;  // job, epoch, round
inline GroupKey KeyOf(const GroupSpec& spec) { return {spec.job_id, spec.epoch, spec.round}; }

class GroupTransport {
 public:
  virtual ~GroupTransport() = default;

  // A group is open from its link's construction to its destruction: frames for
  // it are kept until received; after Close they are dropped, and its sends not
  // yet acknowledged end (kAborted).
  virtual void OpenGroup(const GroupKey& key) = 0;
  virtual void CloseGroup(const GroupKey& key) = 0;

  // Pooled buffers: Take hands out exactly n bytes, Recycle takes one back.
  virtual std::vector<std::byte> TakeBuffer(size_t n) = 0;
  virtual void RecycleBuffer(std::vector<std::byte>&& buffer) = 0;
  virtual size_t max_message_bytes() const = 0;

  // Queues `data` (taken without a copy) to spec.peers[peer] as message
  // `sequence` of (this rank, tag); returns once queued (blocks for the window
  // up to the deadline), not when acknowledged.
  virtual Status SendMessage(const GroupSpec& spec, int peer, uint32_t tag, uint32_t sequence,
                             std::vector<std::byte>&& data, Deadline deadline) = 0;
  // The next complete message of (peer, tag) in sequence order; fails when the
  // group's epoch is cancelled, the transfer failed or stalled for link_io, or
  // the deadline passes. Errors name the peer rank and its endpoint.
  virtual Result<std::vector<std::byte>> ReceiveMessage(const GroupSpec& spec, int peer, uint32_t tag,
                                                        Deadline deadline) = 0;
};

// The CollectiveLink of one round over `transport`, which must outlive it.
std::unique_ptr<sync_policies::CollectiveLink> MakeGroupLink(GroupTransport& transport, GroupSpec spec);

}  // namespace longhaul::wan_transport
