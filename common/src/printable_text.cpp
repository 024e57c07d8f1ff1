#include "longhaul/common/printable_text.h"

namespace longhaul {

std::string PrintableTail(std::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  std::string out(cut ? "..." : "");
  for (char c : cut ? text.substr(text.size() - max_bytes) : text) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f ? '?' : c);
  }
  return out;
}

}  // namespace longhaul
