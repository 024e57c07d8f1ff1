// RunAs: the OS identity an agent's workers run under (`--run-as USER[:GROUP]`),
// so a job's program cannot read the agent's key or work root, nor signal the
// agent. The child drops every supplementary group, sets the group, then the
// user, and sets no_new_privs before exec (ChildProcess::Spawn); the agent
// hands each job folder and launch folder to that user (HandOver).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "longhaul/common/status.h"

namespace longhaul::region_agent {

struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string spec;  // as the operator wrote it, for messages
};

// "alice", "alice:workers", "65534", "65534:65534": names are looked up in the
// user and group databases; the group defaults to the user's primary group.
// Root (uid or gid 0) is refused: running workers "as root" isolates nothing.
Result<RunAs> ParseRunAs(const std::string& spec);

// Ok when this process may switch to another user (it runs as root).
Status CheckCanSwitchUser(const RunAs& who);

// Gives a path the agent created to the workers' user: owner uid:gid, and
// `mode`. Does not follow a symbolic link at `path`.
Status HandOver(const std::filesystem::path& path, const RunAs& who, mode_t mode);

}  // namespace longhaul::region_agent
