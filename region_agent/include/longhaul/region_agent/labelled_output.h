// LabelledOutput: a Slurm step's output as the agent's log files. srun
// --label forwards every task's stdout and stderr to srun, from whatever node
// the task runs on, each line prefixed with the task's number ("1: loss 2.3",
// " 12: ..." with padding). A thread reads srun's output and appends each
// task's lines, without the label, to <dir>/worker-<task>.log, the file a local
// worker writes; srun's own lines ("srun: error: ...") go to <dir>/srun.log,
// and so do slurmstepd's notices, which arrive as a task's stderr ("***
// STEP 3.0 ON n0 CANCELLED AT ... DUE TO PREEMPTION ***"; they stay in that
// task's log too). Nothing is written on the nodes, so no folder needs to be
// shared with them. What Slurm said last is kept for the launch's failure.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"

namespace longhaul::region_agent {

// "  3: text" -> {3, "text"}; nullopt for a line without a task label.
std::optional<std::pair<int, std::string_view>> SplitTaskLabel(std::string_view line);

class LabelledOutput {
 public:
  // Reads `read_fd` (taken over) until every writer has closed it; lines of
  // tasks [0, tasks) go to their worker log, all else to srun.log.
  static Result<std::unique_ptr<LabelledOutput>> Start(int read_fd, std::filesystem::path dir, int tasks);
  ~LabelledOutput();  // stops reading (what was read is written)
  LabelledOutput(const LabelledOutput&) = delete;
  LabelledOutput& operator=(const LabelledOutput&) = delete;

  // Waits until the writers are gone and every line read is in its file;
  // false if the deadline came first.
  bool WaitDrained(Deadline deadline);

  // Slurm's own last words in this output: srun's last error ("error: n1: task
  // 1: Killed") and slurmstepd's last notice ("STEP 3.0 ON n0 CANCELLED AT ...
  // DUE TO PREEMPTION"), joined by "; "; "" when there were none.
  std::string SlurmReason() const;

 private:
  LabelledOutput() = default;
  void Run();
  void Write(std::string_view line);  // one whole line, with its newline
  void Append(int task, std::string_view text);  // to worker-<task>.log, or srun.log for -1

  int fd_ = -1;
  std::filesystem::path dir_;
  int tasks_ = 0;
  std::map<int, int> files_;  // task (-1 = srun) -> open log; the reader thread's alone
  std::optional<int> continues_;  // the last piece written had no newline: its line's task
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  bool drained_ = false;      // under mu_
  std::condition_variable drained_cv_;
  std::string srun_error_;    // under mu_
  std::string step_notice_;   // under mu_
  std::thread reader_;
};

}  // namespace longhaul::region_agent
