// AllReduceMean of the sparse codecs (topk, topk2): sparse sums do not stay
// sparse, so instead of a reduce the payloads themselves travel the ring
// (all-gather) and every participant sums the same bytes in rank order.
#include <string>

#include "collective_wire.h"
#include "collectives_impl.h"

namespace longhaul::sync_policies {

Status SparseAllGatherMean(CollectiveLink& link, std::span<float> data, const Compressor& codec, Deadline deadline,
                           ErrorFeedback* feedback, uint64_t* bytes_sent) {
  const int world = link.world_size(), rank = link.rank();
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  if (data.size() > 0xffffffffull)  // top-k indices are u32
    return InvalidArgument("top-k all-reduce of " + std::to_string(data.size()) + " floats: at most 2^32-1 per shard");
  std::vector<std::vector<std::byte>> payloads(world);
  // The residual is updated on a copy and committed only on success.
  ErrorFeedback pending;
  if (feedback) {
    pending = *feedback;
    pending.Compress(codec, data, payloads[rank]);
  } else {
    codec.Encode(data, payloads[rank]);
  }
  const size_t expected = codec.EncodedBytes(data.size());
  for (int s = 0; s < world - 1; ++s) {
    int send_origin = (rank - s + 2 * world) % world, recv_origin = (rank - s - 1 + 2 * world) % world;
    LONGHAUL_RETURN_IF_ERROR(wire::SendFrame(link, right, wire::Phase::kSparseAllGather,
                                             {static_cast<uint32_t>(send_origin)}, payloads[send_origin], deadline,
                                             bytes_sent));
    LONGHAUL_ASSIGN_OR_RETURN(wire::Frame frame,
                              wire::RecvFrame(link, left, wire::Phase::kSparseAllGather,
                                              {static_cast<uint32_t>(recv_origin)}, expected, deadline));
    payloads[recv_origin].assign(frame.payload().begin(), frame.payload().end());
  }
  std::vector<float> sum(data.size(), 0.0f), decoded(data.size());
  for (int q = 0; q < world; ++q) {
    Status s = codec.Decode(payloads[q], decoded);
    if (!s.ok()) return s.WithContext("sparse all-gather: payload of rank " + std::to_string(q));
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += decoded[i];
  }
  const float divisor = static_cast<float>(world);
  for (size_t i = 0; i < sum.size(); ++i) data[i] = sum[i] / divisor;
  if (feedback) *feedback = std::move(pending);
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
