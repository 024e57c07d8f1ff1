// Dense AllReduceMean: ring reduce-scatter with fp32 accumulation and
// re-quantisation per hop, then a ring all-gather of the owners' exact bytes.
#include "collective_wire.h"
#include "collectives_impl.h"
#include "longhaul/sync_policies/schedule.h"

namespace longhaul::sync_policies {

Status RingAllReduceMean(CollectiveLink& link, std::span<float> data, const Compressor& codec, Deadline deadline,
                         uint64_t* bytes_sent) {
  const int world = link.world_size(), rank = link.rank();
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  const uint32_t w = static_cast<uint32_t>(world);
  auto chunk = [&](std::vector<float>& v, int c) {
    auto [begin, end] = FragmentRange(v.size(), w, static_cast<uint32_t>(c));
    return std::span<float>(v).subspan(begin, end - begin);
  };
  // All work happens on a copy; `data` changes only once everything succeeded.
  std::vector<float> work(data.begin(), data.end());
  std::vector<float> decoded;
  std::vector<std::byte> outgoing;

  // Reduce-scatter: at step s send chunk (rank - s), receive chunk (rank - s - 1)
  // and add our own part to it; after world-1 steps chunk (rank + 1) is complete.
  for (int s = 0; s < world - 1; ++s) {
    int send_c = (rank - s + 2 * world) % world, recv_c = (rank - s - 1 + 2 * world) % world;
    if (s == 0) codec.Encode(chunk(work, send_c), outgoing);
    LONGHAUL_RETURN_IF_ERROR(
        wire::SendFrame(link, right, wire::Phase::kReduceScatter, send_c, outgoing, deadline, bytes_sent));
    std::span<float> acc = chunk(work, recv_c);
    LONGHAUL_ASSIGN_OR_RETURN(wire::Frame frame, wire::RecvFrame(link, left, wire::Phase::kReduceScatter, recv_c,
                                                                 codec.EncodedBytes(acc.size()), deadline));
    decoded.resize(acc.size());
    Status s_decode = codec.Decode(frame.payload(), decoded);
    if (!s_decode.ok()) return s_decode.WithContext("reduce-scatter: chunk from peer rank " + std::to_string(left));
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = decoded[i] + acc[i];
    if (s < world - 2) codec.Encode(acc, outgoing);
  }

  // The owner turns the sum into the mean, encodes it once and keeps the decoded
  // bytes itself, exactly as every other participant will see them.
  const int own = (rank + 1) % world;
  std::span<float> mine = chunk(work, own);
  const float divisor = static_cast<float>(world);
  for (float& x : mine) x = x / divisor;
  codec.Encode(mine, outgoing);
  LONGHAUL_RETURN_IF_ERROR(codec.Decode(outgoing, mine));

  // All-gather: forward the owners' bytes unchanged around the ring.
  for (int s = 0; s < world - 1; ++s) {
    int send_c = (rank + 1 - s + 2 * world) % world, recv_c = (rank - s + 2 * world) % world;
    LONGHAUL_RETURN_IF_ERROR(
        wire::SendFrame(link, right, wire::Phase::kAllGather, send_c, outgoing, deadline, bytes_sent));
    std::span<float> dst = chunk(work, recv_c);
    LONGHAUL_ASSIGN_OR_RETURN(wire::Frame frame, wire::RecvFrame(link, left, wire::Phase::kAllGather, recv_c,
                                                                 codec.EncodedBytes(dst.size()), deadline));
    decoded.resize(dst.size());
    Status s_decode = codec.Decode(frame.payload(), decoded);
    if (!s_decode.ok()) return s_decode.WithContext("all-gather: chunk from peer rank " + std::to_string(left));
    std::copy(decoded.begin(), decoded.end(), dst.begin());
    outgoing.assign(frame.payload().begin(), frame.payload().end());
  }
  std::copy(work.begin(), work.end(), data.begin());
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
