// The pseudo-gradient codecs: one enum and one table (the byte layouts are in
// compressor.h). The name is the job spec's spelling (`compression.codec`).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "longhaul/common/status.h"

namespace longhaul::sync_policies {

enum class Codec { kFp32, kBf16, kInt8Block, kInt4Block, kFp4E3M0, kTopK };

struct CodecTraits {
  Codec codec;
  std::string_view name;
  // Bits per transmitted value, scales and indices not counted (top-k: the
  // kept values' 32; its size is set by topk_fraction).
  unsigned bits_per_value;
  bool lossy;
  // One fp32 scale per compression.block_size floats.
  bool uses_blocks;
  bool sparse;  // sends a subset of the entries (topk_fraction)
};

// Every codec, in the order of the enum.
std::span<const CodecTraits> Codecs();
const CodecTraits& Traits(Codec codec);
// The canonical name: "fp32", "bf16", "int8", "int4", "fp4", "topk".
std::string_view CodecName(Codec codec);
// Accepts the canonical names and "none" (= fp32); kInvalidArgument naming them.
Result<Codec> ParseCodec(std::string_view name);
// "none, fp32, bf16, int8, int4, fp4, topk".
std::string CodecNames();

}  // namespace longhaul::sync_policies
