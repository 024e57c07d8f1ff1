// Names of environment variables a job's worker command may set (worker.env).
//
// The agent sets torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT and every LONGHAUL_* variable for each worker
// (worker/include/longhaul/session/session_options.h lists them);
// a job overriding one would join the wrong rendezvous. One rule, used where a
// spec is validated (the CLI and orchestrator) and where it is launched (the agent).
#pragma once

#include <string_view>

namespace longhaul {

// [A-Za-z_][A-Za-z0-9_]*
bool IsEnvironmentName(std::string_view name);
// Set by the agent: not for a job to set.
bool IsReservedEnvironmentName(std::string_view name);
// Changes how a program is loaded or interpreted before its own code runs (the
// dynamic loader's LD_*, GCONV_PATH, PYTHONSTARTUP/PYTHONHOME/PYTHONINSPECT,
// BASH_ENV/ENV, PERL5OPT, NODE_OPTIONS...): refused in a job's environment, so
// a job runs the program it names and nothing else.
bool IsLoaderEnvironmentName(std::string_view name);

}  // namespace longhaul
