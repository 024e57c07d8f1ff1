// Fuzz target: the WAN / control frame decoder (proto/src/frame.cpp) and the
// data plane's chunk reassembly behind it (wan_transport/src/chunking.cpp), as
// WanEndpoint's receive path (endpoint_rx.cpp) uses them.
//
// Input: byte 0 is a mode.
//   bit 0 clear: the rest is one raw frame, given to DecodeControl and DecodeData
//                (magic, length bound, XXH3 checksum, parse, version).
//   bit 0 set:   the rest is up to 32 records { u16 n; n bytes of protobuf payload;
//                u16 m; m bytes of chunk payload }. Each payload is wrapped in a
//                valid frame (so the fuzzer gets past the checksum) and decoded as
//                both a ControlMessage and a DataFrame; a DataFrame holding a
//                TensorChunkHeader goes through the endpoint's checks and into a
//                Reassembly with the chunk payload (bit 2 set: the header's
//                checksum is fixed up to match, so geometry is what gets tested).
// Properties: no crash/UB; whatever decodes re-encodes and decodes again; a
// reassembly is complete only when every byte of the transfer arrived.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz_proto.h"
#include "longhaul/common/checksum.h"
#include "longhaul/proto/frame.h"
#include "longhaul/wan_transport/chunking.h"

namespace {

using namespace longhaul;

constexpr size_t kMaxInput = 256 << 10;
constexpr size_t kMaxRecords = 32;
constexpr uint64_t kMaxTransferBytes = 1 << 20;  // stands in for the endpoint's max_message_bytes

void CheckControl(const v1::ControlMessage& msg) {
  (void)proto::BodyName(msg);
  if (msg.has_error()) (void)proto::FromWireError(msg.error());
  auto again = proto::DecodeControl(proto::EncodeControl(msg));
  LONGHAUL_FUZZ_CHECK(again.ok());
  LONGHAUL_FUZZ_CHECK(again->body_case() == msg.body_case());
}

void CheckData(const v1::DataFrame& frame) {
  if (frame.has_control() && frame.control().has_error()) (void)proto::FromWireError(frame.control().error());
  auto again = proto::DecodeData(proto::EncodeData(frame));
  LONGHAUL_FUZZ_CHECK(again.ok());
  LONGHAUL_FUZZ_CHECK(again->body_case() == frame.body_case());
}

// The receive side's transfers: (shard, step, fragment) -> reassembly, as in
// WanEndpoint::Impl::HandleChunk (one job, epoch and round here).
using Key = std::tuple<uint32_t, uint32_t, uint32_t>;

void HandleChunk(std::map<Key, std::unique_ptr<wan_transport::Reassembly>>& transfers, v1::TensorChunkHeader h,
                 std::string_view payload_text, bool fix_checksum) {
  const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(payload_text.data()),
                                           payload_text.size());
  // The endpoint's own checks before it allocates anything.
  if (h.total_bytes() > kMaxTransferBytes) return;
  if (h.chunk_count() == 0 || h.chunk_count() > h.total_bytes() + 1) return;
  if (fix_checksum) h.set_checksum(Checksum64(payload));
  const Key key{h.shard(), h.step(), h.fragment()};
  auto it = transfers.find(key);
  if (it == transfers.end()) {
    auto r = std::make_unique<wan_transport::Reassembly>(h.total_bytes(), h.chunk_count(),
                                                         std::vector<std::byte>(h.total_bytes()));
    it = transfers.emplace(key, std::move(r)).first;
  }
  wan_transport::Reassembly& r = *it->second;
  auto outcome = r.Add(h, payload);
  LONGHAUL_FUZZ_CHECK(r.received_bytes() <= r.total_bytes());
  if (r.complete()) LONGHAUL_FUZZ_CHECK(r.received_bytes() == r.total_bytes());
  if (!outcome.ok() && r.received_bytes() == 0 && !r.complete()) transfers.erase(it);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::InitializeQuietly(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return -1;  // -1: not added to the corpus
  fuzz::Reader in(data, size);
  const uint8_t mode = in.U8();
  if ((mode & 1) == 0) {
    const std::string_view frame = in.Rest();
    if (auto c = proto::DecodeControl(frame); c.ok()) CheckControl(*c);
    if (auto d = proto::DecodeData(frame); d.ok()) CheckData(*d);
    return 0;
  }
  std::map<Key, std::unique_ptr<wan_transport::Reassembly>> transfers;
  for (size_t i = 0; i < kMaxRecords && in.left() > 0; ++i) {
    const std::string frame = fuzz::WrapFrame(in.Bytes(in.U16() & 0x3fff));  // <= 16 KiB of protobuf
    const std::string_view chunk_payload = in.Bytes(in.U16());
    if (auto c = proto::DecodeControl(frame); c.ok()) CheckControl(*c);
    auto d = proto::DecodeData(frame);
    if (!d.ok()) continue;
    CheckData(*d);
    if (d->has_chunk()) HandleChunk(transfers, d->chunk(), chunk_payload, (mode & 4) != 0);
  }
  return 0;
}
