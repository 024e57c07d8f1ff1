#include "longhaul/common/checksum.h"

#include <xxhash.h>

#include <cstdio>

namespace longhaul {

uint64_t Checksum64(const void* data, size_t size) { return XXH3_64bits(data, size); }

std::string ParameterHash(std::span<const float> params) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(Checksum64(params.data(), params.size_bytes())));
  return buf;
}

}  // namespace longhaul
