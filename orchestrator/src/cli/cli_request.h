// One request to the orchestrator with the CLI context's endpoint, keys and
// deadline (cli_commands.cpp), for commands in other files.
#pragma once

#include "longhaul/common/status.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator {

Result<v1::ControlMessage> CliRequest(const CliContext& ctx, v1::ControlMessage req);

}  // namespace longhaul::orchestrator
