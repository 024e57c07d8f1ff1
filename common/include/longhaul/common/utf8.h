// UTF-8 checks for text that crosses a trust boundary (protobuf string
// fields must hold valid UTF-8: a message with an invalid one does not parse).
#pragma once

#include <cstddef>
#include <string_view>

namespace longhaul {

// Length of the valid UTF-8 sequence at the start of `s` (1-4), or 0 if it is
// not one (overlong forms, surrogates and code points above U+10FFFF are not).
size_t Utf8SequenceLength(std::string_view s);
bool IsValidUtf8(std::string_view s);

}  // namespace longhaul
