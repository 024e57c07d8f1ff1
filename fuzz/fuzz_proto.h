// Helpers of the targets that link protobuf (longhaul_proto and above).
#pragma once

#include <google/protobuf/stubs/logging.h>

#include "fuzz_support.h"

namespace longhaul::fuzz {

// Protobuf logs every string field with invalid UTF-8 it parses or writes.
inline void SilenceProtobufLogs() { google::protobuf::SetLogHandler(nullptr); }

// LLVMFuzzerInitialize of the targets that parse protobuf: no logs, ours or protobuf's.
inline int InitializeQuietly() {
  SilenceLogs();
  SilenceProtobufLogs();
  return 0;
}

}  // namespace longhaul::fuzz
