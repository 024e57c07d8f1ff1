// The endpoint file `longhaul-orchestrator --endpoint-file F` writes once it is
// listening, so tests, the demo and scripts find ports chosen at bind time:
//   control=tcp://127.0.0.1:40123
//   metrics=http://127.0.0.1:40124/metrics
//   public_key=<z85>            (absent with --insecure)
// It is written to F.tmp and renamed, so a reader never sees half a file.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "longhaul/common/status.h"

namespace longhaul::orchestrator {

struct EndpointInfo {
  std::string control;
  std::string metrics;
  std::string public_key;
};

Status WriteEndpointFile(const std::filesystem::path& file, const EndpointInfo& info);
Result<EndpointInfo> ReadEndpointFile(const std::filesystem::path& file);
// Polls until the file exists (bounded by `timeout`).
Result<EndpointInfo> WaitForEndpointFile(const std::filesystem::path& file, std::chrono::milliseconds timeout);

}  // namespace longhaul::orchestrator
