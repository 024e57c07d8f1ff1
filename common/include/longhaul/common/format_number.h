// FormatNumber: one number through a printf format ("%.2f", 1.25 -> "1.25").
#pragma once

#include <cstdio>
#include <string>

namespace longhaul {

inline std::string FormatNumber(const char* format, double x) {
  char b[64];
  std::snprintf(b, sizeof(b), format, x);
  return b;
}

}  // namespace longhaul
