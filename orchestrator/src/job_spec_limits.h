// The size limits of a job spec, in one table: the YAML reader checks them as it
// reads (adding the line), ValidateJobSpec checks them again for specs from the
// wire, and docs/job-spec.md lists them. They bound what one spec costs the
// orchestrator (memory, the state file, every JobStatus that carries the spec)
// and keep the largest legal spec far inside the 16 MiB control frame. Lengths
// are bytes of UTF-8; every string must be valid UTF-8 without NUL bytes, since
// protobuf refuses to parse a string field that is not UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "longhaul/common/status.h"
#include "longhaul/common/utf8.h"

namespace longhaul::orchestrator::spec_limits {

inline constexpr size_t kMaxJobFileBytes = size_t{1} << 20;  // the YAML text: 1 MiB

// A string field by its YAML name, and its longest value in bytes.
struct TextLimit {
  std::string_view field;
  size_t max_bytes;
};

inline constexpr TextLimit kName{"name", 128};
inline constexpr TextLimit kModelPreset{"model_preset", 64};
inline constexpr TextLimit kRegion{"regions", 128};  // each region name
inline constexpr TextLimit kTextPath{"data.text_file.path", 4096};
inline constexpr TextLimit kInnerName{"inner.name", 64};
inline constexpr TextLimit kOuterName{"outer.name", 64};
inline constexpr TextLimit kOuterLrDecay{"outer.lr_decay", 64};
inline constexpr TextLimit kSyncKind{"sync.kind", 64};
inline constexpr TextLimit kCodec{"compression.codec", 64};  // an enum on the wire
inline constexpr TextLimit kIntraRegion{"intra_region", 64};    // an enum on the wire
inline constexpr TextLimit kWorkerPreset{"worker.preset", 64};
inline constexpr TextLimit kCommandArg{"worker.command", 4096};  // each entry
inline constexpr TextLimit kEnvName{"worker.env", 256};          // each name
inline constexpr TextLimit kEnvValue{"worker.env", 4096};        // each value
inline constexpr TextLimit kWorkingDir{"worker.working_dir", 4096};
inline constexpr TextLimit kAdaptiveCodec{"sync.adaptive.codecs", 64};  // each name; enums on the wire

// Every scalar string field the YAML reader reads with FieldReader::Str.
inline constexpr TextLimit kScalarFields[] = {kName,         kModelPreset, kTextPath, kInnerName,    kOuterName,
                                              kOuterLrDecay, kSyncKind,    kCodec,    kIntraRegion, kWorkerPreset,
                                              kWorkingDir};

// Entries of the lists and mappings.
inline constexpr size_t kMaxRegions = 64;       // regions (and region_count)
inline constexpr size_t kMaxCommandArgs = 256;  // worker.command
inline constexpr size_t kMaxEnvEntries = 256;   // worker.env
inline constexpr size_t kMaxAdaptiveCodecs = 7;  // sync.adaptive.codecs: every codec at most once

// Error messages quote at most this many bytes of a bad value.
inline constexpr size_t kQuotedPrefixBytes = 40;

// The limit of the scalar field `field` (a YAML name), or nullptr.
const TextLimit* FindScalarLimit(std::string_view field);

// `v` quoted for an error message: at most kQuotedPrefixBytes, then "..." and
// the full length; control characters and invalid UTF-8 as '?', so a message
// stays short, printable and valid UTF-8 whatever the value was.
std::string ShortQuote(std::string_view v);

using longhaul::IsValidUtf8;
using longhaul::Utf8SequenceLength;

// kInvalidArgument naming `field` when `v` is longer than `max_bytes`, not UTF-8
// or holds a NUL byte.
Status CheckText(std::string_view field, std::string_view v, size_t max_bytes);
inline Status CheckText(const TextLimit& limit, std::string_view v) {
  return CheckText(limit.field, v, limit.max_bytes);
}

}  // namespace longhaul::orchestrator::spec_limits
