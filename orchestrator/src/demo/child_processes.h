// ChildProcesses: processes the demo starts, each in its own process group with
// output to a log file, all stopped (SIGTERM, then SIGKILL after a grace period)
// when the set is destroyed. PR_SET_PDEATHSIG makes the kernel stop them even if
// the demo itself is killed with SIGKILL. Detached ones (`longhaul up`) lead
// their own session instead, outlive the parent, and are handed over with
// Release().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "longhaul/common/status.h"

namespace longhaul::orchestrator {

class ChildProcesses {
 public:
  ChildProcesses() = default;
  ~ChildProcesses() { StopAll(std::chrono::seconds(5)); }
  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;

  Result<pid_t> Start(const std::string& name, const std::vector<std::string>& argv, const std::string& log_file,
                      bool detached = false);
  // Forgets every child without stopping it: (name, pid) of those running.
  std::vector<std::pair<std::string, pid_t>> Release();
  // Name of a child that has exited (with its status), or empty.
  std::string Exited();
  void StopAll(std::chrono::milliseconds grace);

 private:
  struct Child {
    std::string name;
    pid_t pid;
    bool running;
  };
  std::vector<Child> children_;
};

}  // namespace longhaul::orchestrator
