// Between the wire's sync kinds and codecs (JobSpec.sync.kind, v1::Codec) and
// the enums sync_policies works with (sync_kind.h, codec.h: the tables).
#pragma once

#include <string_view>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/codec.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/sync_kind.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::proto {

v1::Codec CodecToWire(sync_policies::Codec codec);
// kInvalidArgument naming compression.codec for UNSPECIFIED or an unknown value.
Result<sync_policies::Codec> CodecFromWire(v1::Codec codec);
// The spec's compression section as sync_policies' options (not validated).
Result<sync_policies::CompressionOptions> CompressionFromWire(const v1::Compression& compression);
// The job spec's spelling ("int8"; "none" for UNSPECIFIED) and back.
std::string_view CodecName(v1::Codec codec);
Result<v1::Codec> CodecFromName(std::string_view name);

// The job spec's intra_region spelling ("auto", "nccl", "gloo"; "unset" for
// UNSPECIFIED) and back (kInvalidArgument naming the field and the accepted names).
std::string_view IntraRegionName(v1::IntraRegion intra_region);
Result<v1::IntraRegion> IntraRegionFromName(std::string_view name);
// "auto, nccl, gloo": the names, for messages.
std::string IntraRegionNames();

// kInvalidArgument naming sync.kind and the accepted kinds.
Result<sync_policies::SyncKind> SyncKindOf(const v1::SyncPolicy& sync);
void SetSyncKind(v1::SyncPolicy* sync, sync_policies::SyncKind kind);

}  // namespace longhaul::proto
