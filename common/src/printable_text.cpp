#include "longhaul/common/printable_text.h"

#include "longhaul/common/utf8.h"

namespace longhaul {
namespace {

// A UTF-8 sequence a terminal acts on: C1 controls (U+0080..U+009F, e.g. CSI
// U+009B) and the bidirectional overrides and isolates that reorder what is
// shown (U+202A..U+202E, U+2066..U+2069).
bool IsTerminalControl(std::string_view seq) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(seq[i]); };
  if (seq.size() == 2) return b(0) == 0xc2 && b(1) <= 0x9f;
  if (seq.size() == 3 && b(0) == 0xe2 && b(1) == 0x80) return b(2) >= 0xaa && b(2) <= 0xae;
  if (seq.size() == 3 && b(0) == 0xe2 && b(1) == 0x81) return b(2) >= 0xa6 && b(2) <= 0xa9;
  return false;
}

}  // namespace

std::string PrintableTail(std::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  std::string out(cut ? "..." : "");
  const std::string_view tail = cut ? text.substr(text.size() - max_bytes) : text;
  for (size_t i = 0; i < tail.size();) {
    const size_t n = Utf8SequenceLength(tail.substr(i));
    const auto u = static_cast<unsigned char>(tail[i]);
    if (n == 0 || (u < 0x20 && u != '\n' && u != '\t') || u == 0x7f || IsTerminalControl(tail.substr(i, n))) {
      out.push_back('?');  // a control character, invalid UTF-8 or a character the cut split
      ++i;
    } else {
      out.append(tail.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace longhaul
