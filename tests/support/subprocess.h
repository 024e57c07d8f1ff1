// Test support: the one way tests and benchmarks start real processes.
//
// Nothing a test starts outlives it:
// - every child asks the kernel to SIGKILL it when the test process dies
//   (PR_SET_PDEATHSIG, checked against a parent that died before it was set),
//   so a test killed by ctest's timeout or by hand takes its children along;
// - every child leads its own process group, and Kill() SIGKILLs the whole
//   group (an agent with its workers and link emulators) and reaps each member;
// - the test process is a child subreaper (PR_SET_CHILD_SUBREAPER): when an
//   agent dies its workers are re-parented here, not to PID 1 (which does not
//   reap on these machines), so Kill() can reap them too.
// Every wait is bounded; a Subprocess still running at destruction is killed
// with its group. The parent may have threads: the child only calls
// async-signal-safe functions between fork and exec.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "longhaul/common/status.h"

namespace longhaul::testing {

struct SubprocessOptions {
  // stderr, and stdout unless captured, are appended to this file (a restarted
  // process keeps its predecessor's log); "" = inherited from the test.
  std::string log_path;
  bool capture_stdout = false;  // stdout through a pipe, read with ReadLine()
};

class Subprocess {
 public:
  Subprocess() = default;
  // Starts argv (argv[0] is a path, or a name looked up on PATH).
  static Result<Subprocess> Spawn(const std::vector<std::string>& argv, const SubprocessOptions& options = {});
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  ~Subprocess();

  // Starts argv in this (stopped or never started) object: a test restarts an
  // orchestrator or agent in the same slot.
  Status Start(const std::vector<std::string>& argv, const SubprocessOptions& options = {});

  pid_t pid() const { return pid_; }
  bool Running();
  // Waits up to `timeout` for the process to exit: its exit code, 128 + the
  // signal that killed it, or nullopt while it still runs.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // Sends `signal` to the process alone (its children see only what it does).
  void Signal(int signal);
  // Sends `signal`, waits up to `grace` for an orderly exit, then kills what
  // is left of the group; returns Wait()'s result for the process.
  std::optional<int> Stop(int signal, std::chrono::milliseconds grace = std::chrono::seconds(10));
  // SIGKILL to the whole process group; reaps every member (bounded).
  void Kill();

  // The next line of captured stdout; "" at EOF or when `timeout` passes.
  std::string ReadLine(std::chrono::milliseconds timeout);
  // The rest of captured stdout, up to EOF or until `timeout` passes.
  std::string ReadAll(std::chrono::milliseconds timeout);
  // Reads the log until a line containing `needle` appears; returns that line.
  std::optional<std::string> WaitForLine(const std::string& needle, std::chrono::milliseconds timeout) const;
  std::string Log() const;

 private:
  void Reap(int wait_status);
  void Close();
  // Appends what captured stdout has by `deadline`; false at EOF or the deadline.
  bool ReadMore(std::chrono::steady_clock::time_point deadline);

  pid_t pid_ = -1;   // the process; -1 once reaped
  pid_t pgid_ = -1;  // its group; -1 once every member is reaped
  int stdout_fd_ = -1;
  std::string stdout_buffer_;
  std::optional<int> exit_;
  std::string log_path_;
};

// Runs `shell_command` with /bin/sh through Subprocess; stdout and stderr are
// appended to `output`. The exit code, or -1 when it could not start or did
// not finish within `timeout` (then it is killed).
int RunCommand(const std::string& shell_command, std::string* output,
               std::chrono::milliseconds timeout = std::chrono::minutes(2));

// A running process as /proc/<pid>/stat describes it.
struct ProcessEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::string comm;        // the kernel's name: at most 15 characters
  std::string start_time;  // clock ticks after boot: with pid, names the process uniquely
  std::filesystem::path dir;  // /proc/<pid>
};
std::vector<ProcessEntry> ListProcesses();

// Direct children of `parent` whose executable is named `name` (the name is
// cut to comm's 15 characters).
std::vector<pid_t> ChildrenNamed(pid_t parent, const std::string& name);
// Every process below `root`: its children, theirs, and so on.
std::vector<pid_t> Descendants(pid_t root);

// A TCP port on 127.0.0.1 nobody listens on right now (for a server a test
// starts with a fixed port: Prometheus, Slurm's daemons).
int FreeLoopbackPort();

// Plain HTTP/1.0 GET on 127.0.0.1; returns the body or nullopt on failure.
std::optional<std::string> HttpGet(int port, const std::string& path);

}  // namespace longhaul::testing
