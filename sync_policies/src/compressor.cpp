// Compressor::Create, and the defaults of the ring's fused calls (codecs
// without a kernel for them: encode to scratch and copy, decode and add).
#include <algorithm>
#include <cstring>
#include <string>

#include "compressor_impl.h"

namespace longhaul::sync_policies {

void Compressor::EncodeTo(std::span<const float> in, std::span<std::byte> out) const {
  thread_local std::vector<std::byte> encoded;
  Encode(in, encoded);
  if (!encoded.empty()) std::memcpy(out.data(), encoded.data(), std::min(out.size(), encoded.size()));
}

Status CheckAddend(std::span<const float> addend, std::span<float> out) {
  if (addend.size() == out.size()) return Status::Ok();
  return InvalidArgument("decode-add of " + std::to_string(out.size()) + " floats given an addend of " +
                         std::to_string(addend.size()));
}

Status Compressor::DecodeAdd(std::span<const std::byte> in, std::span<const float> addend, std::span<float> out) const {
  LONGHAUL_RETURN_IF_ERROR(CheckAddend(addend, out));
  thread_local std::vector<float> decoded;  // a ring piece, or a sparse codec's shard: kept per thread
  decoded.resize(out.size());
  LONGHAUL_RETURN_IF_ERROR(Decode(in, decoded));
  for (size_t i = 0; i < out.size(); ++i) out[i] = decoded[i] + addend[i];
  return Status::Ok();
}

Result<std::unique_ptr<Compressor>> Compressor::Create(const CompressionOptions& options) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  switch (options.codec) {
    case Codec::kTopK:
      return MakeTopKCompressor(options);
    case Codec::kTopK2Bit:
      return MakeTopK2BitCompressor(options);
    default:
      return MakeDenseCompressor(options);
  }
}

}  // namespace longhaul::sync_policies
