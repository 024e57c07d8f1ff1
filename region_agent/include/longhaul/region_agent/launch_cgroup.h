// LaunchCgroup: one cgroup per launch of a job's workers, with a memory and a
// process-count limit. Every worker moves itself into it before it switches
// user or execs (SpawnOptions::cgroup_procs_fds), so everything the job's
// program starts is inside, also a process that left its process group with
// setsid; KillAll() ends them all and the cgroup is removed.
//
// cgroup v2 (one unified hierarchy at /sys/fs/cgroup): launches are children
// of the agent's own cgroup, which must be delegated to it (systemd:
// Delegate=yes); the agent first moves itself into a leaf "agent" child, as
// v2 allows no processes beside controlled children. cgroup v1: the memory and
// pids hierarchies each get a child of the agent's cgroup there.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "longhaul/common/status.h"

namespace longhaul::region_agent {

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // 0 = no limit
  uint64_t pids = 0;          // 0 = no limit
  bool any() const { return memory_bytes > 0 || pids > 0; }
};

// Where this agent makes its launches' cgroups, found once at start.
class CgroupRoot {
 public:
  // Finds the hierarchy (v2, else v1 memory + pids) and the agent's own place
  // in it, checks it can create a child there, and (v2) moves the agent into a
  // leaf and enables the memory and pids controllers for its children. An
  // error says what is missing ("no cgroup v2 or v1 memory/pids hierarchy",
  // "cannot create ... : permission denied").
  static Result<CgroupRoot> Find(const std::filesystem::path& mount = "/sys/fs/cgroup",
                                 const std::filesystem::path& self_cgroup = "/proc/self/cgroup");
  bool unified() const { return unified_; }
  // One folder per hierarchy the launches go under.
  const std::vector<std::filesystem::path>& parents() const { return parents_; }

 private:
  bool unified_ = false;
  std::vector<std::filesystem::path> parents_;
};

class LaunchCgroup {
 public:
  // Creates <parent>/<name> in every hierarchy with the limits set.
  static Result<std::unique_ptr<LaunchCgroup>> Create(const CgroupRoot& root, const std::string& name,
                                                      const CgroupLimits& limits);
  ~LaunchCgroup();  // KillAll(), then the folders are removed
  LaunchCgroup(const LaunchCgroup&) = delete;
  LaunchCgroup& operator=(const LaunchCgroup&) = delete;

  // cgroup.procs of each hierarchy, open for writing: a child writes "0" to
  // each to move itself in.
  const std::vector<int>& procs_fds() const { return procs_fds_; }
  // The processes inside now.
  std::vector<pid_t> Pids() const;
  // SIGKILL to every process inside (cgroup.kill where there is one); true
  // when none is left. Does not wait: call again until true.
  bool KillAll();
  const std::vector<std::filesystem::path>& dirs() const { return dirs_; }

 private:
  LaunchCgroup() = default;
  bool unified_ = false;
  std::vector<std::filesystem::path> dirs_;
  std::vector<int> procs_fds_;
};

}  // namespace longhaul::region_agent
