// Test support: a real single-host Slurm cluster (Debian's slurm-wlm and
// munge, installed by deploy/install-deps.sh) in a folder of the test's own.
//
// Start() writes a private munge key and slurm.conf (free ports, by default one
// node: this host at 127.0.0.1 with `cpus` CPUs; or the given nodes, each
// slurmd in a network namespace of its own; proctrack/linuxproc, task/none,
// EnforcePartLimits=ALL so a request the cluster can never satisfy is refused
// at once; partitions `debug`, the default, and `urgent`, whose jobs pre-empt
// debug's: PreemptType=preempt/partition_prio, PreemptMode=CANCEL), starts munged, slurmctld and slurmd as the test's children in the
// foreground, waits (bounded) until the node is idle, and sets SLURM_CONF in
// the test's environment, so srun/squeue/scancel and every process the test
// starts (an agent) use this cluster. The destructor cancels every job, waits
// (bounded) until none is left, stops the daemons and removes SLURM_CONF.
// Needs root (slurmd runs job steps as their users).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "support/subprocess.h"

namespace longhaul::testing {

// One node of the cluster: its slurmd runs inside `netns` ("" = here).
struct SlurmNode {
  std::string name;
  std::string address;
  std::string netns;
  // Folders of this host the node does not share: its slurmd (and every task
  // it starts) sees an empty tmpfs over each, in a mount namespace of its own,
  // as a node without a shared filesystem would.
  std::vector<std::filesystem::path> private_dirs = {};
};

class SlurmCluster {
 public:
  // Why a cluster cannot run here ("" when it can): not root, or a daemon missing.
  static std::string Unavailable();
  // `controller_address`: where slurmctld is reached (every node must reach it).
  static Result<std::unique_ptr<SlurmCluster>> Start(const std::filesystem::path& dir, int cpus,
                                                     std::vector<SlurmNode> nodes = {},
                                                     const std::string& controller_address = "127.0.0.1");
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // Runs a shell command against this cluster; its output (stdout and stderr)
  // and exit code.
  int Run(const std::string& shell_command, std::string* output) const;
  // squeue's "%i %T" for the job with this name ("" when there is none),
  // every state (a job that just ended is listed too).
  std::string JobState(const std::string& job_name) const;

 private:
  SlurmCluster() = default;
  std::filesystem::path dir_;
  std::filesystem::path conf_;
  Subprocess munged_;
  Subprocess slurmctld_;
  std::vector<Subprocess> slurmds_;
};

}  // namespace longhaul::testing
