// CommandPolicy: which of the users' own programs this region's agent runs.
// The agent's operator decides, not the orchestrator (whose users may be
// anyone with a `user` key): command workers are off unless the operator
// allows programs (--allow-command) and, beyond the job's own folder, working
// directories (--allow-working-dir).
//
// A job's argv[0] is resolved the way exec resolves it (a name without '/' is
// looked up on the PATH the worker will have: the job's own PATH if it sets
// one, else the agent's), then symlinks are resolved: it must be one of the
// allowed programs (also resolved), and the worker is started with exactly the
// checked file. A working directory is resolved the same way (relative to the
// agent's own working directory) and must be an allowed one or inside one.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/worker/job_config.h"

namespace longhaul::region_agent {

struct CommandPolicy {
  std::vector<std::filesystem::path> allowed_programs;
  std::vector<std::filesystem::path> allowed_working_dirs;

  // For a job with a command worker: the program to execute (absolute, all
  // symlinks resolved), or kPermissionDenied naming what the policy refused and
  // the flag that would allow it. Jobs of the built-in trainer always pass.
  Result<std::filesystem::path> Check(const worker::JobConfig& job, const std::string& region) const;
};

}  // namespace longhaul::region_agent
