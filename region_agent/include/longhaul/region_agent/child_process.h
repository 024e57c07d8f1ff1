// ChildProcess: one process the agent launched (a worker or a link emulator).
//
// The agent supervises its children itself: Poll() reaps without blocking and
// remembers how the child ended, DescribeExit() turns that into the words that
// reach heartbeats and reports ("exited with status 2", "killed by signal 9
// (SIGKILL)"). Children get PR_SET_PDEATHSIG=SIGKILL, so an agent that dies
// (even by SIGKILL) never leaves orphaned workers holding ports. Each child
// leads a session and process group of its own: signals go to the whole group,
// and once the child is gone what is left of its group is killed, so the
// processes a worker started do not outlive it (one that leaves its group with
// setsid escapes this; a cgroup per launch closes that, see LaunchCgroup).
// Destroying a ChildProcess that still runs stops it (SIGTERM, then SIGKILL
// after a grace).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/region_agent/run_as.h"

namespace longhaul::region_agent {

struct SpawnOptions {
  std::filesystem::path program;      // a path, or a bare name looked up on PATH
  std::vector<std::string> args;      // without argv[0]
  std::map<std::string, std::string> env;  // set in the child, over the agent's environment
  std::filesystem::path working_dir;  // empty = the agent's
  std::filesystem::path log_file;     // stdout+stderr appended here; empty = inherit
  bool capture_stdout = false;        // stdout to a pipe read by ReadLine (stderr -> log_file)
  // Instead of log_file: stdout+stderr to this descriptor (the write end of a
  // pipe the caller reads; the caller still owns and closes it).
  int output_fd = -1;
  std::optional<RunAs> run_as;        // switch to this user before exec (no_new_privs set)
  // Open cgroup.procs files: the child moves itself into each before it
  // switches user or execs, so nothing it starts is ever outside them.
  std::vector<int> cgroup_procs_fds;
};

class ChildProcess {
 public:
  static Result<ChildProcess> Spawn(const SpawnOptions& options);

  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  // Reaps without blocking; true once the child has exited (now or before).
  // Before reaping it kills what is left of the child's process group.
  bool Poll();
  bool exited() const { return exit_status_.has_value(); }
  // True when it exited with status 0.
  bool exited_cleanly() const;
  // "exited with status 3" / "killed by signal 9 (SIGKILL)" / "running".
  std::string DescribeExit() const;

  // To the child's whole process group.
  void Signal(int sig) const;
  // SIGKILL to the child's process group while the child is not reaped (Poll
  // does this itself when it finds the child ended).
  void KillGroup() const;
  // SIGTERM to the group, wait up to `grace` for the child to exit, then
  // SIGKILL to the group, reap.
  void Stop(Duration grace = std::chrono::seconds(3));
  // Waits (polling) until the child exits or the deadline passes; true if exited.
  bool WaitExit(Deadline deadline);

  // The last `lines` non-empty lines of a log file, at most `max_bytes` (for
  // error messages about a child that failed: its stderr tail). The file is in
  // a folder the worker can write: it is opened without following a symlink
  // and without blocking (a FIFO), read only if it is a regular file and only
  // its last 64 KiB, and control characters other than tab become '?' (no
  // terminal escapes reach `longhaul status`).
  static std::string LogTail(const std::filesystem::path& log_file, int lines = 8, size_t max_bytes = 1500);

  // One line of the captured stdout (without the newline), by the deadline.
  Result<std::string> ReadLine(Deadline deadline);

 private:
  void Reset();
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string stdout_buffer_;
  std::optional<int> exit_status_;  // raw waitpid status
};

// Opens `path` for appending as the agent opens every log it writes: no link
// followed, no blocking on a FIFO, only a regular file of the agent's with a
// single name (the folder may belong to the workers' user). An error names it.
Result<int> OpenLogFile(const std::filesystem::path& path);

// Directory of the running executable (/proc/self/exe), where sibling binaries
// (longhaul-worker, longhaul-linkem) are installed.
Result<std::filesystem::path> SelfBinaryDir();

}  // namespace longhaul::region_agent
