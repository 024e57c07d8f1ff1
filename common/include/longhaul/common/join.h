// Join: the strings with a separator between them ("a, b, c").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace longhaul {

inline std::string Join(const std::vector<std::string>& parts, std::string_view separator = ", ") {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) s += separator;
    s += parts[i];
  }
  return s;
}

}  // namespace longhaul
