#include "longhaul/proto/wire_enums.h"

#include <array>
#include <string>
#include <utility>

namespace longhaul::proto {
namespace {

namespace sp = sync_policies;

constexpr std::array<std::pair<sp::Codec, v1::Codec>, 7> kWireCodecs = {{
    {sp::Codec::kFp32, v1::CODEC_FP32},
    {sp::Codec::kBf16, v1::CODEC_BF16},
    {sp::Codec::kInt8Block, v1::CODEC_INT8_BLOCK},
    {sp::Codec::kInt4Block, v1::CODEC_INT4_BLOCK},
    {sp::Codec::kFp4E3M0, v1::CODEC_FP4_E3M0},
    {sp::Codec::kTopK, v1::CODEC_TOPK},
    {sp::Codec::kTopK2Bit, v1::CODEC_TOPK_2BIT},
}};

constexpr std::array<std::pair<v1::IntraRegion, std::string_view>, 3> kIntraRegionNames = {{
    {v1::INTRA_REGION_AUTO, "auto"},
    {v1::INTRA_REGION_NCCL, "nccl"},
    {v1::INTRA_REGION_GLOO, "gloo"},
}};

}  // namespace

v1::Codec CodecToWire(sp::Codec codec) {
  for (const auto& [mine, wire] : kWireCodecs)
    if (mine == codec) return wire;
  return v1::CODEC_UNSPECIFIED;
}

Result<sp::Codec> CodecFromWire(v1::Codec codec) {
  if (codec == v1::CODEC_UNSPECIFIED)
    return InvalidArgument("compression.codec is unset (the orchestrator fills every default at admission)");
  for (const auto& [mine, wire] : kWireCodecs)
    if (wire == codec) return mine;
  return InvalidArgument("compression.codec: unknown codec " + std::to_string(static_cast<int>(codec)));
}

Result<sp::CompressionOptions> CompressionFromWire(const v1::Compression& c) {
  LONGHAUL_ASSIGN_OR_RETURN(sp::Codec codec, CodecFromWire(c.codec()));
  return sp::CompressionOptions{.codec = codec, .block_size = c.block_size(), .topk_fraction = c.topk_fraction()};
}

std::string_view CodecName(v1::Codec codec) {
  auto mine = CodecFromWire(codec);
  return mine.ok() ? sp::CodecName(*mine) : std::string_view("none");
}

Result<v1::Codec> CodecFromName(std::string_view name) {
  auto mine = sp::ParseCodec(name);
  if (!mine.ok()) return mine.status().WithContext("compression.codec");
  return CodecToWire(*mine);
}

std::string_view IntraRegionName(v1::IntraRegion intra_region) {
  for (const auto& [value, name] : kIntraRegionNames)
    if (value == intra_region) return name;
  return "unset";
}

std::string IntraRegionNames() {
  std::string names;
  for (const auto& [value, name] : kIntraRegionNames) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

Result<v1::IntraRegion> IntraRegionFromName(std::string_view name) {
  for (const auto& [value, known] : kIntraRegionNames)
    if (known == name) return value;
  return InvalidArgument("intra_region: '" + std::string(name) + "' is not one of " + IntraRegionNames());
}

Result<sp::SyncKind> SyncKindOf(const v1::SyncPolicy& sync) {
  auto kind = sp::ParseSyncKind(sync.kind());
  if (!kind.ok()) return kind.status().WithContext("sync.kind");
  return *kind;
}

void SetSyncKind(v1::SyncPolicy* sync, sp::SyncKind kind) { sync->set_kind(std::string(sp::SyncKindName(kind))); }

}  // namespace longhaul::proto
