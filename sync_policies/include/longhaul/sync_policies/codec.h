// The pseudo-gradient codecs: one enum and one table (the byte layouts are in
// compressor.h). The name is the job spec's spelling (`compression.codec`).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "longhaul/common/status.h"

namespace longhaul::sync_policies {

enum class Codec { kFp32, kBf16, kInt8Block, kInt4Block, kFp4E3M0, kTopK, kTopK2Bit };

struct CodecTraits {
  Codec codec;
  std::string_view name;
  // Bits per transmitted value, scales, indices and tables not counted (the
  // sparse codecs: per kept value; their size is set by topk_fraction).
  unsigned bits_per_value;
  bool lossy;
  // One fp32 scale per compression.block_size floats.
  bool uses_blocks;
  bool sparse;  // sends a subset of the entries (topk_fraction), with u32 indices
  // fp32 entries of a lookup table sent once per payload (topk2: 4 bin centres).
  unsigned table_floats;
};

// Every codec, in the order of the enum.
std::span<const CodecTraits> Codecs();
const CodecTraits& Traits(Codec codec);
// The canonical name: "fp32", "bf16", "int8", "int4", "fp4", "topk", "topk2".
std::string_view CodecName(Codec codec);
// Accepts the canonical names and "none" (= fp32); kInvalidArgument naming them.
Result<Codec> ParseCodec(std::string_view name);
// "none, fp32, bf16, int8, int4, fp4, topk, topk2".
std::string CodecNames();

}  // namespace longhaul::sync_policies
