// Codec names and CompressionOptions validation.
#include <cmath>
#include <string>

#include "longhaul/sync_policies/compressor.h"

namespace longhaul::sync_policies {

Result<Codec> ParseCodec(std::string_view name) {
  if (name == "none" || name == "fp32") return Codec::kFp32;
  if (name == "bf16") return Codec::kBf16;
  if (name == "int8") return Codec::kInt8Block;
  if (name == "int4") return Codec::kInt4Block;
  if (name == "fp4") return Codec::kFp4E3M0;
  if (name == "topk") return Codec::kTopK;
  return InvalidArgument("unknown codec '" + std::string(name) +
                         "' (expected one of none, fp32, bf16, int8, int4, fp4, topk)");
}

std::string_view CodecName(Codec codec) {
  switch (codec) {
    case Codec::kFp32:
      return "fp32";
    case Codec::kBf16:
      return "bf16";
    case Codec::kInt8Block:
      return "int8";
    case Codec::kInt4Block:
      return "int4";
    case Codec::kFp4E3M0:
      return "fp4";
    case Codec::kTopK:
      return "topk";
  }
  return "unknown";
}

Status CompressionOptions::Validate() const {
  switch (codec) {
    case Codec::kFp32:
    case Codec::kBf16:
    case Codec::kInt8Block:
    case Codec::kInt4Block:
    case Codec::kFp4E3M0:
    case Codec::kTopK:
      break;
    default:
      return InvalidArgument("compression.codec: unknown value " + std::to_string(static_cast<int>(codec)));
  }
  // The upper bound keeps a block's scratch on the stack-free path and a block's
  // scale meaningful; 1 << 20 floats is far beyond any useful block.
  if (block_size == 0 || block_size > (size_t{1} << 20))
    return InvalidArgument("compression.block_size must be in [1, 1048576], got " + std::to_string(block_size));
  if (!(topk_fraction > 0.0 && topk_fraction <= 1.0) || !std::isfinite(topk_fraction))
    return InvalidArgument("compression.topk_fraction must be in (0, 1], got " + std::to_string(topk_fraction));
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
