// Limits of the CLI's requests other than the job spec (job_spec_limits.h):
// checked by the orchestrator at the edge, documented in control.proto.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace longhaul::orchestrator::request_limits {

inline constexpr size_t kMaxIdempotencyKeyBytes = 128;

// [A-Za-z0-9._:-], 1 to kMaxIdempotencyKeyBytes characters.
constexpr bool IsValidIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxIdempotencyKeyBytes) return false;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// `longhaul jobs` pages: entries per page and bytes per page.
inline constexpr uint32_t kDefaultPageSize = 100;
inline constexpr uint32_t kMaxPageSize = 1000;
inline constexpr size_t kMaxPageBytes = size_t{1} << 20;
inline constexpr size_t kMaxPageTokenBytes = 64;

}  // namespace longhaul::orchestrator::request_limits
