// Helpers of the targets that link protobuf (longhaul_proto and above).
#pragma once

#include <google/protobuf/stubs/logging.h>

#include "fuzz_support.h"

namespace longhaul::fuzz {

// Protobuf logs every string field with invalid UTF-8 it parses or writes.
inline void SilenceProtobufLogs() { google::protobuf::SetLogHandler(nullptr); }

}  // namespace longhaul::fuzz
