#include "longhaul/common/checksum.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>

namespace longhaul {

uint64_t Checksum64(const void* data, size_t size) { return XXH3_64bits(data, size); }

std::string ParameterHash(std::span<const float> params) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(Checksum64(params.data(), params.size_bytes())));
  return buf;
}

bool IsParameterHash(std::string_view s) {
  return s.size() == 16 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace longhaul
