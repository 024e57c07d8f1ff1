// Entry points of the cross-region collectives.
#include "longhaul/sync_policies/cross_region.h"

#include <chrono>
#include <cstring>
#include <optional>

#include "collective_wire.h"
#include "collectives_impl.h"

namespace longhaul::sync_policies {

Status AllReduceMean(CollectiveLink& link, std::span<float> data, const CompressionOptions& options, Deadline deadline,
                     CollectiveStats* stats, ErrorFeedback* feedback) {
  const auto start = std::chrono::steady_clock::now();
  LONGHAUL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> codec, Compressor::Create(options));
  uint64_t sent = 0;
  Status result = Status::Ok();
  if (link.world_size() > 1) {
    result = Traits(options.codec).sparse ? SparseAllGatherMean(link, data, *codec, deadline, feedback, &sent)
                                          : RingAllReduceMean(link, data, *codec, deadline, &sent);
  }
  if (stats) {
    stats->bytes_sent = sent;
    stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (!result.ok()) return result.WithContext("all-reduce on rank " + std::to_string(link.rank()));
  return result;
}

Status Broadcast(CollectiveLink& link, int root, std::span<float> data, Deadline deadline) {
  const int world = link.world_size(), rank = link.rank();
  if (root < 0 || root >= world)
    return InvalidArgument("broadcast root rank " + std::to_string(root) + " outside world of " +
                           std::to_string(world));
  if (world == 1) return Status::Ok();
  const int distance = (rank - root + world) % world;  // hops from the root along the ring
  const size_t bytes = data.size() * sizeof(float);
  std::span<const std::byte> payload = std::as_bytes(std::span<const float>(data));
  std::optional<wire::Frame> frame;
  if (distance > 0) {
    auto received = wire::RecvFrame(link, (rank + world - 1) % world, wire::Phase::kBroadcast,
                                    {static_cast<uint32_t>(root)}, bytes, deadline);
    if (!received.ok()) return received.status().WithContext("broadcast on rank " + std::to_string(rank));
    frame.emplace(std::move(received).value());
    payload = frame->payload();
  }
  if (distance < world - 1) {
    Status s = wire::SendFrame(link, (rank + 1) % world, wire::Phase::kBroadcast, {static_cast<uint32_t>(root)},
                               payload, deadline, nullptr);
    if (!s.ok()) return s.WithContext("broadcast on rank " + std::to_string(rank));
  }
  if (distance > 0 && bytes > 0) std::memcpy(data.data(), payload.data(), bytes);
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
