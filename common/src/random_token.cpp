#include "longhaul/common/random_token.h"

#include <cstdio>
#include <random>

namespace longhaul {

std::string RandomToken() {
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof(part), "%08x", static_cast<unsigned>(rd()));
    token += part;
  }
  return token;
}

bool TokensEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace longhaul
