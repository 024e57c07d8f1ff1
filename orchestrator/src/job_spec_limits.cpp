// Size and encoding checks of job spec strings (see job_spec_limits.h).
#include "job_spec_limits.h"

#include <algorithm>

namespace longhaul::orchestrator::spec_limits {

const TextLimit* FindScalarLimit(std::string_view field) {
  for (const TextLimit& l : kScalarFields)
    if (l.field == field) return &l;
  return nullptr;
}

std::string ShortQuote(std::string_view v) {
  std::string out = "'";
  size_t i = 0;
  while (i < v.size()) {
    const size_t n = Utf8SequenceLength(v.substr(i));
    if (i + std::max<size_t>(n, 1) > kQuotedPrefixBytes) break;
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (n == 0 || c < 0x20 || c == 0x7f) {
      out += '?';
      i += 1;
    } else {
      out.append(v.substr(i, n));
      i += n;
    }
  }
  out += i < v.size() ? "...' (" + std::to_string(v.size()) + " bytes)" : "'";
  return out;
}

Status CheckText(std::string_view field, std::string_view v, size_t max_bytes) {
  const std::string name = "field '" + std::string(field) + "' ";
  if (v.size() > max_bytes)
    return InvalidArgument(name + "must be at most " + std::to_string(max_bytes) + " bytes, got " + ShortQuote(v));
  if (!IsValidUtf8(v)) return InvalidArgument(name + "must be valid UTF-8, got " + ShortQuote(v));
  if (v.find('\0') != std::string_view::npos)
    return InvalidArgument(name + "must not contain a NUL byte, got " + ShortQuote(v));
  return Status::Ok();
}

}  // namespace longhaul::orchestrator::spec_limits
