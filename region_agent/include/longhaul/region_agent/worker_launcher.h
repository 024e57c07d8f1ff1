// WorkerLauncher: how a region's workers are started, watched and ended.
//
// `local` forks each worker on the agent's machine (one ChildProcess per
// rank). `slurm` hands the whole launch to the cluster's scheduler: one srun
// with one task per worker, shaped by --nodes / --ntasks-per-node (on the
// agent's own host unless the workers can reach it from others: --data-host
// auto and a --worker-bind that is not loopback), each task
// started through longhaul-task, which turns Slurm's task numbers into the
// worker's rank, torchrun's variables (MASTER_ADDR agreed through the
// agent's store: rank 0 may be on any node) and its own hello token. Every
// task's output comes back through srun (--label) into the agent's
// worker-<rank>.log files (LabelledOutput). The agent watches srun (it exits when the step ends: a task that fails ends the step,
// --kill-on-bad-exit), ends it with SIGTERM (srun passes it to every task) and
// scancel, and asks squeue for Slurm's own words (state and reason) when a
// launch fails or never starts.
//
// Either way the agent sees a list of LaunchedProcess: one per worker
// (local), or the one srun that carries them all (slurm); RegionJob handles a
// failure of any of them the same way (the region fails the round, the
// orchestrator assigns the job again, a new launch rejoins).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/region_agent/child_process.h"
#include "longhaul/session/session_options.h"

namespace longhaul::region_agent {

enum class LauncherKind { kLocal, kSlurm };

// One row per kind: its name on the command line and in messages.
struct LauncherKindInfo {
  LauncherKind kind;
  std::string_view name;
};
inline constexpr LauncherKindInfo kLauncherKinds[] = {
    {LauncherKind::kLocal, "local"},
    {LauncherKind::kSlurm, "slurm"},
};
std::string_view LauncherKindName(LauncherKind kind);
// "slurm" -> kSlurm; anything else is an error listing the names.
Result<LauncherKind> ParseLauncherKind(std::string_view name);

// How the agent asks Slurm for a launch's resources (srun's own options).
struct SlurmOptions {
  int nodes = 1;                // --nodes
  int ntasks_per_node = 0;      // --ntasks-per-node; 0 = Slurm spreads the tasks
  std::string partition;        // --partition; empty = the cluster's default
  std::string account;          // --account; empty = none
  std::string time_limit;       // --time (Slurm's syntax, "30", "2:00:00"); empty = the partition's
  // Set by the agent per launch (!AgentOptions::workers_may_be_remote()):
  // workers must run on its own host: srun --nodelist=<this host>.
  bool this_host_only = true;
  // Names the first bad field.
  Status Validate() const;
};

struct LauncherOptions {
  LauncherKind kind = LauncherKind::kLocal;
  SlurmOptions slurm;
  Status Validate() const;
};

// A process the agent watches for a launch.
struct LaunchedProcess {
  ChildProcess child;
  std::string name;  // "worker 1 (pid 42)" / "srun of workers 0-3 (pid 42, slurm job longhaul-eu-j1-launch-3)"
  int rank = -1;     // the worker it runs; -1 when it carries every worker of the launch
};

// A launch's log files in its folder: each worker's output (however it was
// launched) and srun's own messages.
inline std::filesystem::path WorkerLogPath(const std::filesystem::path& dir, int rank) {
  return dir / ("worker-" + std::to_string(rank) + ".log");
}
inline std::filesystem::path SrunLogPath(const std::filesystem::path& dir) { return dir / "srun.log"; }

struct LaunchRequest {
  int workers = 0;
  // Unique per launch (the Slurm job name; scancel and squeue find it by it).
  std::string name;
  // How the local launcher starts `rank` (program, environment, log file).
  std::function<SpawnOptions(int rank)> spawn;
  std::filesystem::path task_binary;  // longhaul-task (slurm)
  std::filesystem::path log_dir;      // worker-<rank>.log of each task's output, srun's own srun.log
};

class WorkerLauncher {
 public:
  virtual ~WorkerLauncher() = default;
  virtual LauncherKind kind() const = 0;
  // Starts every worker of the launch.
  virtual Result<std::vector<LaunchedProcess>> Start(const LaunchRequest& request) = 0;
  // The scheduler's view of the launch, for a failure message
  // ("slurm job 12 PENDING (Resources)"); empty where there is none.
  virtual std::string SchedulerState() = 0;
  // Ends whatever the scheduler still runs for the launch (bounded, idempotent).
  virtual void Cancel() = 0;
  // Once the launch's processes have exited: waits (up to `deadline`) until
  // what they printed is in their log files (srun's forwarded output is
  // written by a thread of the launcher's).
  virtual void FinishOutput(Deadline /*deadline*/) {}
  // Once ended: the scheduler's own words on why, from the launch's output
  // ("error: n1: task 1: Killed; STEP 3.0 ON n0 CANCELLED AT ... DUE TO
  // PREEMPTION"); "" where there are none.
  virtual std::string ExitReason() const { return ""; }
};

std::unique_ptr<WorkerLauncher> MakeWorkerLauncher(const LauncherOptions& options);

// The variables that differ between the tasks of a step: longhaul-task sets
// them (SlurmTaskEnvironment, in this order), so the slurm launcher leaves
// them out of the environment every task shares.
inline constexpr const char* kPerTaskVariables[] = {session::kRankVariable, "RANK",       "WORLD_SIZE",
                                                    "LOCAL_RANK",           "LOCAL_WORLD_SIZE",
                                                    session::kWorkerTokenVariable};

// What longhaul-task sets before it executes a worker under srun
// (kPerTaskVariables), from the variables srun gave the task (SLURM_PROCID,
// SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE, SLURM_NTASKS) and
// LONGHAUL_WORKER_TOKENS (one hello token per rank, comma-separated, set by
// the agent). `get` reads one variable (nullopt when unset). An error names
// the variable.
Result<std::vector<std::pair<std::string, std::string>>> SlurmTaskEnvironment(
    const std::function<std::optional<std::string>(const std::string&)>& get);
inline constexpr const char* kWorkerTokensVariable = "LONGHAUL_WORKER_TOKENS";

}  // namespace longhaul::region_agent
