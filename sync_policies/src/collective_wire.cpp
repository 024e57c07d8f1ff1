#include "collective_wire.h"

#include <cstring>

namespace longhaul::sync_policies::wire {
namespace {

constexpr uint32_t kMagic = 0x5243484cu;  // "LHCR"
constexpr uint32_t kTagBase = 0x4c480000u;

uint32_t Tag(Phase phase) { return kTagBase | static_cast<uint32_t>(phase); }

uint32_t ReadU32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

std::string PartName(Part part) {
  std::string name = "chunk " + std::to_string(part.chunk);
  if (part.pieces > 1) name += " piece " + std::to_string(part.piece) + "/" + std::to_string(part.pieces);
  return name;
}

}  // namespace

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kReduceScatter:
      return "reduce-scatter";
    case Phase::kAllGather:
      return "all-gather";
    case Phase::kSparseAllGather:
      return "sparse all-gather";
    case Phase::kBroadcast:
      return "broadcast";
  }
  return "unknown phase";
}

namespace {

// A link buffer of header + `payload_bytes`, the header written.
std::vector<std::byte> Framed(CollectiveLink& link, Phase phase, Part part, size_t payload_bytes) {
  std::vector<std::byte> bytes = link.Buffer(kHeaderBytes + payload_bytes);
  uint32_t header[6] = {kMagic,      static_cast<uint32_t>(phase),
                        part.chunk,  part.piece,
                        part.pieces, static_cast<uint32_t>(link.world_size())};
  std::memcpy(bytes.data(), header, kHeaderBytes);
  return bytes;
}

Status SendFramed(CollectiveLink& link, int peer, Phase phase, Part part, std::vector<std::byte>&& bytes,
                  Deadline deadline, uint64_t* bytes_sent) {
  const size_t size = bytes.size();
  Status s = link.SendOwned(peer, Tag(phase), std::move(bytes), deadline);
  if (!s.ok())
    return s.WithContext(std::string(PhaseName(phase)) + ": sending " + PartName(part) + " to peer rank " +
                         std::to_string(peer));
  if (bytes_sent) *bytes_sent += size;
  return Status::Ok();
}

}  // namespace

Status SendFrame(CollectiveLink& link, int peer, Phase phase, Part part, std::span<const std::byte> payload,
                 Deadline deadline, uint64_t* bytes_sent) {
  std::vector<std::byte> bytes = Framed(link, phase, part, payload.size());
  if (!payload.empty()) std::memcpy(bytes.data() + kHeaderBytes, payload.data(), payload.size());
  return SendFramed(link, peer, phase, part, std::move(bytes), deadline, bytes_sent);
}

Status SendEncoded(CollectiveLink& link, int peer, Phase phase, Part part, const Compressor& codec,
                   std::span<const float> values, Deadline deadline, uint64_t* bytes_sent) {
  std::vector<std::byte> bytes = Framed(link, phase, part, codec.EncodedBytes(values.size()));
  codec.EncodeTo(values, std::span<std::byte>(bytes).subspan(kHeaderBytes));
  return SendFramed(link, peer, phase, part, std::move(bytes), deadline, bytes_sent);
}

Frame EncodeFrame(CollectiveLink& link, Phase phase, Part part, const Compressor& codec, std::span<const float> values) {
  Frame frame(&link, Framed(link, phase, part, codec.EncodedBytes(values.size())));
  codec.EncodeTo(values, std::span<std::byte>(frame.bytes).subspan(kHeaderBytes));
  return frame;
}

Result<Frame> RecvFrame(CollectiveLink& link, int peer, Phase phase, Part part, size_t payload_bytes,
                        Deadline deadline) {
  std::string where =
      std::string(PhaseName(phase)) + ": receiving " + PartName(part) + " from peer rank " + std::to_string(peer);
  auto received = link.Recv(peer, Tag(phase), deadline);
  if (!received.ok()) return received.status().WithContext(where);
  Frame frame(&link, std::move(received).value());
  if (frame.bytes.size() < kHeaderBytes)
    return DataLoss(where + ": message of " + std::to_string(frame.bytes.size()) + " bytes has no header");
  const std::byte* h = frame.bytes.data();
  if (ReadU32(h) != kMagic || ReadU32(h + 4) != static_cast<uint32_t>(phase))
    return DataLoss(where + ": not a " + PhaseName(phase) + " message");
  const Part got{ReadU32(h + 8), ReadU32(h + 12), ReadU32(h + 16)};
  if (got.chunk != part.chunk || got.piece != part.piece || got.pieces != part.pieces ||
      ReadU32(h + 20) != static_cast<uint32_t>(link.world_size()))
    return DataLoss(where + ": got " + PartName(got) + " of a world of " + std::to_string(ReadU32(h + 20)) +
                    " (stale or misrouted message)");
  if (frame.bytes.size() - kHeaderBytes != payload_bytes)
    return DataLoss(where + ": payload of " + std::to_string(frame.bytes.size() - kHeaderBytes) + " bytes, expected " +
                    std::to_string(payload_bytes));
  return frame;
}

}  // namespace longhaul::sync_policies::wire
