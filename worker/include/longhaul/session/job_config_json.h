// The job as a worker program sees it, as JSON: what the job spec says (H,
// codec, outer optimizer, inner optimizer settings, data, seed, rounds) and
// where this worker stands (region, rank, world size). The Python SDK's
// lh.job_config() and the C ABI's lh_session_job_config_json return this.
#pragma once

#include <string>

#include "longhaul/common/status.h"
#include "longhaul/worker/job_config.h"
#include "longhaul/session/session_options.h"

namespace longhaul::session {

std::string JobConfigJson(const worker::JobConfig& config, const SessionOptions& options);

// Reads the assignment named by the environment (no sockets, no group): a
// script may read its job before it builds its model.
Result<std::string> JobConfigJsonFromEnvironment();

}  // namespace longhaul::session
