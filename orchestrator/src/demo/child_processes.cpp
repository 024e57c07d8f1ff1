#include "child_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace longhaul::orchestrator {

Result<pid_t> ChildProcesses::Start(const std::string& name, const std::vector<std::string>& argv,
                                    const std::string& log_file, bool detached) {
  if (argv.empty()) return InvalidArgument("no command for " + name);
  if (::access(argv[0].c_str(), X_OK) != 0)
    return NotFound("cannot run " + name + ": '" + argv[0] + "' is not an executable (" + std::strerror(errno) + ")");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Internal("fork for " + name + ": " + std::strerror(errno));
  if (pid == 0) {
    if (detached) {
      ::setsid();  // its own session: no terminal, no parent-death signal, found again by `longhaul down`
      const int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) {
        ::dup2(null, STDIN_FILENO);
        ::close(null);
      }
    } else {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(127);
      ::setpgid(0, 0);
    }
    const int fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  children_.push_back({name, pid, true});
  return pid;
}

std::string ChildProcesses::Exited() {
  for (auto& c : children_) {
    if (!c.running) continue;
    int status = 0;
    if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
      c.running = false;
      return c.name + (WIFEXITED(status) ? " exited with code " + std::to_string(WEXITSTATUS(status))
                                         : " was killed by signal " + std::to_string(WTERMSIG(status)));
    }
  }
  return "";
}

std::vector<std::pair<std::string, pid_t>> ChildProcesses::Release() {
  std::vector<std::pair<std::string, pid_t>> out;
  for (const auto& c : children_)
    if (c.running) out.emplace_back(c.name, c.pid);
  children_.clear();
  return out;
}

void ChildProcesses::StopAll(std::chrono::milliseconds grace) {
  // Agents first (they stop their workers and links), then everything else.
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& c : children_)
      if (c.running) ::kill(pass == 0 ? c.pid : -c.pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace / 2;
    while (std::chrono::steady_clock::now() < deadline) {
      bool any = false;
      for (auto& c : children_) {
        if (!c.running) continue;
        int status = 0;
        if (::waitpid(c.pid, &status, WNOHANG) == c.pid) c.running = false;
        else any = true;
      }
      if (!any) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  for (auto& c : children_) {
    ::kill(-c.pid, SIGKILL);  // whole group: workers and links the agent started
    if (c.running) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
      c.running = false;
    }
  }
  children_.clear();
}

}  // namespace longhaul::orchestrator
