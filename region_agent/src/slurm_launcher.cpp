#include "slurm_launcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include <sstream>

#include "longhaul/common/printable_text.h"
#include "longhaul/session/session_options.h"

namespace longhaul::region_agent {
namespace {

// How long the agent waits for squeue or scancel (it waits in its event loop).
constexpr auto kToolTimeout = std::chrono::seconds(5);

// Runs a Slurm command, returns its first line of output ("" when it printed
// none); an error names the command and how it ended.
Result<std::string> RunTool(const std::filesystem::path& program, std::vector<std::string> args) {
  SpawnOptions spawn;
  spawn.program = program;
  spawn.args = std::move(args);
  spawn.capture_stdout = true;
  auto child = ChildProcess::Spawn(spawn);
  if (!child.ok()) return child.status().WithContext("running " + program.string());
  const Deadline deadline = DeadlineAfter(kToolTimeout);
  auto line = child->ReadLine(deadline);
  if (!child->WaitExit(deadline)) {
    child->Stop(std::chrono::milliseconds(200));
    return DeadlineExceeded(program.string() + " did not finish within " + std::to_string(kToolTimeout.count()) + " s");
  }
  if (!child->exited_cleanly()) return Unavailable(program.string() + " " + child->DescribeExit());
  return line.ok() ? *line : std::string();
}

}  // namespace

std::vector<std::string> SlurmLauncher::SrunArgs(const LaunchRequest& request) const {
  std::vector<std::string> args = {
      "--job-name=" + request.name,
      "--nodes=" + std::to_string(options_.nodes),
      "--ntasks=" + std::to_string(request.workers),
      // One task that fails ends the step (and srun, which the agent watches):
      // the region fails its round as it does when a local worker dies.
      "--kill-on-bad-exit=1",
      // Every task's output comes back to srun, each line labelled with its
      // task; the agent writes it where a local worker's goes (LabelledOutput),
      // so nothing is written on the nodes.
      "--label",
  };
  // Workers that must be local run on the agent's own host (a node of the
  // cluster), or Slurm says why they cannot.
  char host[256] = {};
  if (options_.this_host_only && ::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') {
    std::string name(host);
    args.push_back("--nodelist=" + name.substr(0, name.find('.')));
  }
  if (options_.ntasks_per_node > 0) args.push_back("--ntasks-per-node=" + std::to_string(options_.ntasks_per_node));
  if (!options_.partition.empty()) args.push_back("--partition=" + options_.partition);
  if (!options_.account.empty()) args.push_back("--account=" + options_.account);
  if (!options_.time_limit.empty()) args.push_back("--time=" + options_.time_limit);
  return args;
}

Result<std::vector<LaunchedProcess>> SlurmLauncher::Start(const LaunchRequest& request) {
  if (request.workers < 1) return InvalidArgument("a slurm launch needs at least one worker");
  if (!job_name_.empty()) return FailedPrecondition("slurm launcher: " + job_name_ + " already started");
  // Every task gets rank 0's environment without what differs per rank;
  // longhaul-task sets that from the task's Slurm variables and the token list.
  SpawnOptions spawn = request.spawn(0);
  std::string tokens;
  for (int rank = 0; rank < request.workers; ++rank) {
    const auto env = rank == 0 ? spawn.env : request.spawn(rank).env;
    const auto it = env.find(session::kWorkerTokenVariable);
    tokens += (rank == 0 ? "" : ",") + (it == env.end() ? std::string() : it->second);
  }
  for (const char* per_task : kPerTaskVariables) spawn.env.erase(per_task);
  spawn.env[kWorkerTokensVariable] = tokens;
  std::vector<std::string> args = SrunArgs(request);
  args.push_back(request.task_binary.string());
  args.push_back("--");
  args.push_back(spawn.program.string());
  args.insert(args.end(), spawn.args.begin(), spawn.args.end());
  spawn.program = "srun";
  spawn.args = std::move(args);
  int pipe_fds[2] = {-1, -1};
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Unavailable("pipe for srun's output: " + std::string(std::strerror(errno)));
  spawn.output_fd = pipe_fds[1];
  auto child = ChildProcess::Spawn(spawn);
  ::close(pipe_fds[1]);  // srun holds the only write end now
  if (!child.ok()) {
    ::close(pipe_fds[0]);
    return child.status().WithContext("starting srun for " + request.name);
  }
  // srun's own messages (allocation, which task failed) go to srun.log.
  LONGHAUL_ASSIGN_OR_RETURN(output_, LabelledOutput::Start(pipe_fds[0], request.log_dir, request.workers));
  job_name_ = request.name;
  LaunchedProcess p{std::move(*child), "", -1};
  p.name = "srun of workers 0-" + std::to_string(request.workers - 1) + " (pid " + std::to_string(p.child.pid()) +
           ", slurm job " + request.name + ")";
  std::vector<LaunchedProcess> out;
  out.push_back(std::move(p));
  return out;
}

std::string SlurmLauncher::SchedulerState() {
  if (job_name_.empty()) return "";
  // Every state, so a job that just ended is still listed (for MinJobAge).
  auto line = RunTool("squeue", {"--noheader", "--states=all", "--name=" + job_name_, "--format=%i %T %r"});
  if (!line.ok()) return "squeue: " + line.status().message();
  if (line->empty()) return "";  // never allocated (srun says why) or long gone
  std::string id;
  std::string state;
  std::string reason;
  std::istringstream in(*line);
  in >> id >> state;
  std::getline(in >> std::ws, reason);
  std::string out = "slurm job " + id + " " + state;
  if (!reason.empty() && reason != "None") out += " (" + reason + ")";
  return PrintableTail(out, 300);
}

void SlurmLauncher::FinishOutput(Deadline deadline) {
  if (output_ && !output_->WaitDrained(deadline)) spdlog::warn("srun's output for {} still open", job_name_);
}

void SlurmLauncher::Cancel() {
  if (job_name_.empty() || cancelled_) return;
  cancelled_ = true;
  auto done = RunTool("scancel", {"--quiet", "--name=" + job_name_});
  if (!done.ok()) spdlog::warn("scancel of slurm job {}: {}", job_name_, done.status().message());
}

}  // namespace longhaul::region_agent
