// AllReduceMean of the sparse codecs (topk, topk2): sparse sums do not stay
// sparse, so instead of a reduce the payloads themselves travel the ring
// (all-gather) and every participant sums the same bytes in rank order.
#include <span>
#include <string>
#include <vector>

#include "collective_wire.h"
#include "collectives_impl.h"

namespace longhaul::sync_policies {

Status SparseAllGatherMean(CollectiveLink& link, std::span<float> data, const Compressor& codec, Deadline deadline,
                           ErrorFeedback* feedback, uint64_t* bytes_sent) {
  const int world = link.world_size(), rank = link.rank();
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  if (data.size() > 0xffffffffull)  // top-k indices are u32
    return InvalidArgument("top-k all-reduce of " + std::to_string(data.size()) + " floats: at most 2^32-1 per shard");
  // The residual's update is staged and committed only on success. Our own
  // payload is encoded into a link buffer (pooled on the WAN) and given back.
  const size_t expected = codec.EncodedBytes(data.size());
  std::vector<std::byte> own = link.Buffer(expected);
  if (feedback) {
    feedback->Stage(codec, data, own);
  } else {
    codec.Encode(data, own);
  }
  // Every rank's payload: our own, then the frames as they arrive (kept, not copied).
  std::vector<std::span<const std::byte>> payloads(world);
  payloads[rank] = own;
  std::vector<wire::Frame> received;
  received.reserve(world - 1);
  for (int s = 0; s < world - 1; ++s) {
    int send_origin = (rank - s + 2 * world) % world, recv_origin = (rank - s - 1 + 2 * world) % world;
    LONGHAUL_RETURN_IF_ERROR(wire::SendFrame(link, right, wire::Phase::kSparseAllGather,
                                             {static_cast<uint32_t>(send_origin)}, payloads[send_origin], deadline,
                                             bytes_sent));
    LONGHAUL_ASSIGN_OR_RETURN(wire::Frame frame,
                              wire::RecvFrame(link, left, wire::Phase::kSparseAllGather,
                                              {static_cast<uint32_t>(recv_origin)}, expected, deadline));
    received.push_back(std::move(frame));
    payloads[recv_origin] = received.back().payload();
  }
  // The sum in rank order, in scratch kept per thread (a replica runs its
  // exchanges on one long-lived thread; kind sync, on the trainer's), so that
  // a round takes no fresh model-sized memory: with DecodeAdd's own decode
  // scratch two shards per thread stay allocated. `data` is written only once
  // every payload decoded.
  thread_local std::vector<float> sum;
  sum.assign(data.size(), 0.0f);
  for (int q = 0; q < world; ++q) {
    Status s = codec.DecodeAdd(payloads[q], sum, sum);
    if (!s.ok()) return s.WithContext("sparse all-gather: payload of rank " + std::to_string(q));
  }
  const float divisor = static_cast<float>(world);
  for (size_t i = 0; i < sum.size(); ++i) data[i] = sum[i] / divisor;
  if (feedback) feedback->Commit();
  link.Recycle(std::move(own));
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
