// Fuzz target: every codec's decoder (sync_policies: Compressor::Decode of fp32,
// bf16, int8, int4, fp4, topk, topk2), i.e. what a region does with the payload
// bytes a peer sent in the ring all-reduce or the sparse all-gather.
//
// Input: byte 0 codec (value % 8: 0..6 the codecs in enum order, 7 no such
// codec), bytes 1-2 element count n (u16 LE, <= 16384), bytes 3-4 block size (u16,
// 0 is invalid), byte 5 top-k fraction (b / 255; 0 is invalid), byte 6 flags (bit 0:
// cut or zero-pad the payload to the codec's exact size for n, so the kernels and
// the top-k index checks run, not just the size check), then the payload.
// Properties: Decode returns an error Status for bad input, never crashes; an
// error leaves the output untouched (compressor.h / README "Malformed payloads");
// whatever decodes re-encodes to a payload that decodes again (fp32: bit-exact).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz_support.h"
#include "longhaul/sync_policies/compressor.h"

namespace {

using namespace longhaul;
using sync_policies::Codec;

constexpr size_t kMaxFloats = 16384;
constexpr size_t kMaxInput = 1 << 20;
constexpr float kSentinel = -12345.678f;

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::SilenceLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return -1;
  fuzz::Reader in(data, size);
  sync_policies::CompressionOptions options;
  options.codec = static_cast<Codec>(in.U8() % 8);
  const size_t n = in.U16() % (kMaxFloats + 1);
  options.block_size = in.U16();
  options.topk_fraction = in.U8() / 255.0;
  const uint8_t flags = in.U8();
  auto created = sync_policies::Compressor::Create(options);
  if (!created.ok()) return 0;  // invalid options are refused before any decoder exists
  const sync_policies::Compressor& codec = **created;

  const std::string_view rest = in.Rest();
  std::vector<std::byte> payload(reinterpret_cast<const std::byte*>(rest.data()),
                                 reinterpret_cast<const std::byte*>(rest.data()) + rest.size());
  if (flags & 1) payload.resize(codec.EncodedBytes(n));  // zero-padded or cut

  std::vector<float> out(n, kSentinel);
  const std::vector<float> before = out;
  const Status decoded = codec.Decode(payload, out);
  if (!decoded.ok()) {
    LONGHAUL_FUZZ_CHECK(SameBits(out, before));  // nothing written on error
    return 0;
  }
  LONGHAUL_FUZZ_CHECK(payload.size() == codec.EncodedBytes(n));

  std::vector<std::byte> reencoded;
  codec.Encode(out, reencoded);
  LONGHAUL_FUZZ_CHECK(reencoded.size() == codec.EncodedBytes(n));
  std::vector<float> again(n, kSentinel);
  LONGHAUL_FUZZ_CHECK(codec.Decode(reencoded, again).ok());
  if (codec.codec() == Codec::kFp32) LONGHAUL_FUZZ_CHECK(SameBits(out, again));
  return 0;
}
