// Text a program we do not trust wrote (a worker's output, the message of its
// failed report), made safe to put on someone's terminal, into a state file
// and into a protobuf string field: control characters other than newline and
// tab, invalid UTF-8 and a character the cut split become '?', and at most the
// last `max_bytes` bytes are kept ("..." marks a cut).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace longhaul {

// The most of a worker's output that travels to and is kept for a job's owner.
inline constexpr size_t kMaxWorkerOutputBytes = 8192;

std::string PrintableTail(std::string_view text, size_t max_bytes);

}  // namespace longhaul
