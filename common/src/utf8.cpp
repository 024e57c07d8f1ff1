#include "longhaul/common/utf8.h"

namespace longhaul {

size_t Utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  if (byte(0) < 0x80) return 1;
  // Lead byte range -> sequence length and the allowed range of the second byte
  // (RFC 3629, Table 3-7 of the Unicode standard); later bytes are 0x80..0xbf.
  struct Lead {
    unsigned char first, last;
    size_t length;
    unsigned char second_lo, second_hi;
  };
  static constexpr Lead kLeads[] = {
      {0xc2, 0xdf, 2, 0x80, 0xbf}, {0xe0, 0xe0, 3, 0xa0, 0xbf},  // no overlong 3-byte forms
      {0xe1, 0xec, 3, 0x80, 0xbf}, {0xed, 0xed, 3, 0x80, 0x9f},  // no UTF-16 surrogates
      {0xee, 0xef, 3, 0x80, 0xbf}, {0xf0, 0xf0, 4, 0x90, 0xbf},  // no overlong 4-byte forms
      {0xf1, 0xf3, 4, 0x80, 0xbf}, {0xf4, 0xf4, 4, 0x80, 0x8f},  // nothing above U+10FFFF
  };
  for (const Lead& l : kLeads) {
    if (byte(0) < l.first || byte(0) > l.last) continue;
    if (s.size() < l.length || byte(1) < l.second_lo || byte(1) > l.second_hi) return 0;
    for (size_t i = 2; i < l.length; ++i)
      if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
    return l.length;
  }
  return 0;  // a continuation byte, 0xc0, 0xc1 or 0xf5..0xff
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace longhaul
