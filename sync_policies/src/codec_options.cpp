// The codec table, codec names and CompressionOptions validation.
#include <array>
#include <cmath>
#include <string>

#include "longhaul/sync_policies/compressor.h"

namespace longhaul::sync_policies {
namespace {

//      codec               name     bits  lossy  blocks sparse table
constexpr std::array<CodecTraits, 7> kCodecs = {{
    {Codec::kFp32, "fp32", 32, false, false, false, 0},
    {Codec::kBf16, "bf16", 16, true, false, false, 0},
    {Codec::kInt8Block, "int8", 8, true, true, false, 0},
    {Codec::kInt4Block, "int4", 4, true, true, false, 0},
    {Codec::kFp4E3M0, "fp4", 4, true, true, false, 0},
    {Codec::kTopK, "topk", 32, true, false, true, 0},
    {Codec::kTopK2Bit, "topk2", 2, true, false, true, 4},
}};
constexpr std::string_view kFp32Alias = "none";

const CodecTraits* Find(Codec codec) {
  for (const auto& t : kCodecs)
    if (t.codec == codec) return &t;
  return nullptr;
}

}  // namespace

std::span<const CodecTraits> Codecs() { return kCodecs; }

const CodecTraits& Traits(Codec codec) {
  const CodecTraits* t = Find(codec);
  return t != nullptr ? *t : kCodecs[0];  // every enumerator is in the table (codec_test checks)
}

std::string_view CodecName(Codec codec) {
  const CodecTraits* t = Find(codec);
  return t != nullptr ? t->name : "unknown";
}

Result<Codec> ParseCodec(std::string_view name) {
  if (name == kFp32Alias) return Codec::kFp32;
  for (const auto& t : kCodecs)
    if (t.name == name) return t.codec;
  return InvalidArgument("unknown codec '" + std::string(name) + "' (expected one of " + CodecNames() + ")");
}

std::string CodecNames() {
  std::string names(kFp32Alias);
  for (const auto& t : kCodecs) names += ", " + std::string(t.name);
  return names;
}

Status CompressionOptions::Validate() const {
  if (Find(codec) == nullptr)
    return InvalidArgument("compression.codec: unknown value " + std::to_string(static_cast<int>(codec)));
  // The upper bound keeps a block's scratch on the stack-free path and a block's
  // scale meaningful; 1 << 20 floats is far beyond any useful block.
  if (block_size == 0 || block_size > (size_t{1} << 20))
    return InvalidArgument("compression.block_size must be in [1, 1048576], got " + std::to_string(block_size));
  if (!(topk_fraction > 0.0 && topk_fraction <= 1.0) || !std::isfinite(topk_fraction))
    return InvalidArgument("compression.topk_fraction must be in (0, 1], got " + std::to_string(topk_fraction));
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
