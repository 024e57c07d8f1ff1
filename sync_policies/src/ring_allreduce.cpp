// Dense AllReduceMean: ring reduce-scatter with fp32 accumulation and
// re-quantisation per hop, then a ring all-gather of the owners' exact bytes.
//
// Pipelined: every chunk travels as pieces of kRingPieceFloats values, and a hop
// reduces and forwards piece p as soon as it arrives, while the pieces behind it
// are still on the wire. Working memory is one piece of fp32 scratch plus the
// encoded chunks the all-gather delivers; `data` is only read until every
// message has arrived, then written once.
#include "collective_wire.h"
#include "collectives_impl.h"
#include "longhaul/sync_policies/cross_region.h"
#include "longhaul/sync_policies/schedule.h"

namespace longhaul::sync_policies {
namespace {

// Chunk c of the ring and its pieces.
class ChunkPieces {
 public:
  ChunkPieces(std::span<float> data, int world, int c) {
    auto [begin, end] = FragmentRange(data.size(), static_cast<uint32_t>(world), static_cast<uint32_t>(c));
    chunk_ = data.subspan(begin, end - begin);
    count_ = static_cast<uint32_t>(std::max<size_t>(1, (chunk_.size() + kRingPieceFloats - 1) / kRingPieceFloats));
    index_ = static_cast<uint32_t>(c);
  }
  uint32_t count() const { return count_; }
  std::span<float> piece(uint32_t p) const {
    size_t begin = std::min(chunk_.size(), p * kRingPieceFloats);
    return chunk_.subspan(begin, std::min(chunk_.size() - begin, kRingPieceFloats));
  }
  wire::Part part(uint32_t p) const { return {index_, p, count_}; }

 private:
  std::span<float> chunk_;
  uint32_t count_ = 1, index_ = 0;
};

}  // namespace

Status RingAllReduceMean(CollectiveLink& link, std::span<float> data, const Compressor& codec, Deadline deadline,
                         uint64_t* bytes_sent) {
  const int world = link.world_size(), rank = link.rank();
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  auto chunk = [&](int c) { return ChunkPieces(data, world, (c + world) % world); };
  std::vector<float> acc;

  // Reduce-scatter: at step s chunk (rank - s) goes right and chunk (rank - s - 1)
  // arrives from the left, gets our part added and goes on as step s+1's send;
  // after world-1 steps chunk (rank + 1) holds the sum of every region's part.
  const ChunkPieces first = chunk(rank);
  for (uint32_t p = 0; p < first.count(); ++p) {
    LONGHAUL_RETURN_IF_ERROR(wire::SendEncoded(link, right, wire::Phase::kReduceScatter, first.part(p), codec,
                                               first.piece(p), deadline, bytes_sent));
  }
  // The owner turns the sum into the mean and encodes it once; every participant,
  // the owner included, ends with exactly these bytes decoded.
  const ChunkPieces own = chunk(rank + 1);
  std::vector<wire::Frame> own_encoded;  // in link buffers, pooled like every message's
  own_encoded.reserve(own.count());
  const float divisor = static_cast<float>(world);
  for (int s = 0; s < world - 1; ++s) {
    const ChunkPieces in = chunk(rank - s - 1);
    const bool last = s == world - 2;  // then `in` is our own chunk
    for (uint32_t p = 0; p < in.count(); ++p) {
      std::span<const float> mine = in.piece(p);
      LONGHAUL_ASSIGN_OR_RETURN(wire::Frame frame, wire::RecvFrame(link, left, wire::Phase::kReduceScatter, in.part(p),
                                                                   codec.EncodedBytes(mine.size()), deadline));
      acc.resize(mine.size());
      // Ours added to what came, in one pass; encoded straight into the link's buffer.
      Status s_decode = codec.DecodeAdd(frame.payload(), mine, acc);
      if (!s_decode.ok()) return s_decode.WithContext("reduce-scatter: chunk from peer rank " + std::to_string(left));
      if (!last) {
        LONGHAUL_RETURN_IF_ERROR(wire::SendEncoded(link, right, wire::Phase::kReduceScatter, in.part(p), codec, acc,
                                                   deadline, bytes_sent));
        continue;
      }
      for (float& x : acc) x = x / divisor;
      own_encoded.push_back(wire::EncodeFrame(link, wire::Phase::kAllGather, own.part(p), codec, acc));
      // All-gather step 0 sends our own chunk: start it piece by piece right away.
      LONGHAUL_RETURN_IF_ERROR(wire::SendFrame(link, right, wire::Phase::kAllGather, own.part(p),
                                               own_encoded.back().payload(), deadline, bytes_sent));
    }
  }

  // All-gather: forward the owners' bytes unchanged around the ring and keep them.
  std::vector<std::vector<wire::Frame>> gathered(world);
  for (int s = 0; s < world - 1; ++s) {
    const int c = (rank - s + world) % world;
    const ChunkPieces in = chunk(c);
    gathered[c].reserve(in.count());
    for (uint32_t p = 0; p < in.count(); ++p) {
      LONGHAUL_ASSIGN_OR_RETURN(wire::Frame frame, wire::RecvFrame(link, left, wire::Phase::kAllGather, in.part(p),
                                                                   codec.EncodedBytes(in.piece(p).size()), deadline));
      if (s < world - 2) {
        LONGHAUL_RETURN_IF_ERROR(
            wire::SendFrame(link, right, wire::Phase::kAllGather, in.part(p), frame.payload(), deadline, bytes_sent));
      }
      gathered[c].push_back(std::move(frame));
    }
  }

  // Every message is in: decode the mean into `data`. RecvFrame checked each
  // payload's size, the only thing a dense decoder can fail on, so this loop
  // cannot stop half-way through `data`.
  for (int c = 0; c < world; ++c) {
    const ChunkPieces out = chunk(c);
    const bool is_own = c == (rank + 1) % world;
    for (uint32_t p = 0; p < out.count(); ++p) {
      std::span<const std::byte> bytes = is_own ? own_encoded[p].payload() : gathered[c][p].payload();
      Status s_decode = codec.Decode(bytes, out.piece(p));
      if (!s_decode.ok())
        return Internal("all-gather: decoding chunk " + std::to_string(c) + ": " + s_decode.ToString());
    }
  }
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
