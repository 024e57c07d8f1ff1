#include "longhaul/region_agent/child_process.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <poll.h>
#include <signal.h>
#include <grp.h>

#include "longhaul/common/printable_text.h"
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <cerrno>
#include <deque>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

namespace longhaul::region_agent {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// A file the agent made and nobody linked elsewhere: regular, ours, one name.
bool IsOwnPlainFile(const struct stat& st) { return S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && st.st_nlink == 1; }

// A bare program name is looked up on PATH (as execvp would), before fork.
Result<std::filesystem::path> ResolveProgram(const std::filesystem::path& program,
                                             const std::map<std::string, std::string>& env) {
  const std::string name = program.string();
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) != 0) return NotFound(Errno("cannot execute " + name));
    return program;
  }
  std::string path;
  if (auto it = env.find("PATH"); it != env.end()) {
    path = it->second;
  } else if (const char* p = std::getenv("PATH")) {
    path = p;
  }
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t end = std::min(path.find(':', begin), path.size());
    const std::string dir = path.substr(begin, end - begin);
    const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return NotFound("cannot execute '" + name + "': not found on PATH");
}

}  // namespace

Result<int> OpenLogFile(const std::filesystem::path& path) {
  // The log's folder may belong to the workers' user: no link is followed and
  // only a regular file of ours with one name is written (a FIFO would block,
  // a symbolic or hard link could point anywhere).
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) return Unavailable(Errno("cannot open log file " + path.string()));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !IsOwnPlainFile(st)) {
    ::close(fd);
    return Unavailable("log file " + path.string() + " is not a regular file of the agent's with a single name: not written");
  }
  ::fcntl(fd, F_SETFL, O_WRONLY | O_APPEND);  // blocking writes from here on
  return fd;
}

Result<ChildProcess> ChildProcess::Spawn(const SpawnOptions& options) {
  auto program = ResolveProgram(options.program, options.env);
  if (!program.ok()) return program.status();
  if (!options.working_dir.empty() && !std::filesystem::is_directory(options.working_dir)) {
    return NotFound("working directory " + options.working_dir.string() + " does not exist");
  }
  // Everything the child needs is prepared before fork: after fork in a
  // multi-threaded process only async-signal-safe calls are allowed.
  std::vector<std::string> argv_storage;
  argv_storage.push_back(options.program.string());
  argv_storage.insert(argv_storage.end(), options.args.begin(), options.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (!options.env.count(entry.substr(0, entry.find('=')))) env_storage.push_back(entry);
  }
  for (const auto& [k, v] : options.env) env_storage.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string exe = program->string();
  const std::string cwd = options.working_dir.string();

  int log_fd = -1;
  if (options.output_fd >= 0) {
    log_fd = ::fcntl(options.output_fd, F_DUPFD_CLOEXEC, 0);
    if (log_fd < 0) return Unavailable(Errno("dup of the output descriptor"));
  } else if (!options.log_file.empty()) {
    LONGHAUL_ASSIGN_OR_RETURN(log_fd, OpenLogFile(options.log_file));
  }
  int pipe_fds[2] = {-1, -1};
  if (options.capture_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    if (log_fd >= 0) ::close(log_fd);
    return Unavailable(Errno("pipe"));
  }
  // The child reports a failed step before exec (which step, errno) on this
  // close-on-exec pipe; a successful exec closes it with nothing written.
  int err_fds[2] = {-1, -1};
  if (::pipe2(err_fds, O_CLOEXEC) != 0) {
    if (log_fd >= 0) ::close(log_fd);
    if (pipe_fds[0] >= 0) { ::close(pipe_fds[0]); ::close(pipe_fds[1]); }
    return Unavailable(Errno("pipe"));
  }
  // The child starts clean: stdin from /dev/null (never the agent's terminal),
  // default signal handling and no blocked signals (the agent ignores SIGPIPE).
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigset_t no_signals;
  sigemptyset(&no_signals);
  const bool switch_user = options.run_as.has_value();
  const uid_t uid = switch_user ? options.run_as->uid : 0;
  const gid_t gid = switch_user ? options.run_as->gid : 0;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    if (pipe_fds[0] >= 0) { ::close(pipe_fds[0]); ::close(pipe_fds[1]); }
    ::close(err_fds[0]);
    ::close(err_fds[1]);
    if (null_fd >= 0) ::close(null_fd);
    return Unavailable(Errno("fork"));
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here on.
    auto fail = [&](int step) {
      const int report[2] = {step, errno};
      [[maybe_unused]] auto n = ::write(err_fds[1], report, sizeof(report));
      ::_exit(126);
    };
    if (::setsid() < 0) fail(1);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::sigaction(SIGPIPE, &default_action, nullptr);
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);
    for (int fd : options.cgroup_procs_fds) {
      if (::write(fd, "0", 1) != 1) fail(2);
    }
    if (switch_user && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) fail(3);
    if (switch_user && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(4);
    // After the user switch, which clears the parent-death signal.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // parent already gone
    if (log_fd >= 0) {
      ::dup2(log_fd, STDERR_FILENO);
      if (!options.capture_stdout) ::dup2(log_fd, STDOUT_FILENO);
    }
    if (options.capture_stdout) ::dup2(pipe_fds[1], STDOUT_FILENO);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) fail(5);
    ::execve(exe.c_str(), argv.data(), envp.data());
    fail(6);
  }
  if (log_fd >= 0) ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  ::close(err_fds[1]);
  int report[2] = {0, 0};
  ssize_t got = 0;
  do {
    got = ::read(err_fds[0], report, sizeof(report));
  } while (got < 0 && errno == EINTR);
  ::close(err_fds[0]);
  if (got == static_cast<ssize_t>(sizeof(report))) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (pipe_fds[0] >= 0) { ::close(pipe_fds[0]); ::close(pipe_fds[1]); }
    static constexpr const char* kSteps[] = {"", "setsid", "joining the launch's cgroup", "switching to user",
                                             "setting no_new_privs", "changing to the working directory", "exec"};
    std::string what = kSteps[report[0] >= 1 && report[0] <= 6 ? report[0] : 6];
    if (report[0] == 3) what += " " + options.run_as->spec;
    if (report[0] == 5) what += " " + cwd;
    if (report[0] == 6) what += " " + exe;
    return Unavailable("starting " + options.program.string() + ": " + what + " failed: " + std::strerror(report[1]));
  }
  ChildProcess child;
  child.pid_ = pid;
  if (options.capture_stdout) {
    ::close(pipe_fds[1]);
    child.stdout_fd_ = pipe_fds[0];
  }
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept { *this = std::move(other); }

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Reset();
    pid_ = other.pid_;
    stdout_fd_ = other.stdout_fd_;
    stdout_buffer_ = std::move(other.stdout_buffer_);
    exit_status_ = other.exit_status_;
    other.pid_ = -1;
    other.stdout_fd_ = -1;
    other.exit_status_.reset();
  }
  return *this;
}

ChildProcess::~ChildProcess() { Reset(); }

void ChildProcess::Reset() {
  if (pid_ > 0 && !Poll()) Stop();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
  pid_ = -1;
}

bool ChildProcess::Poll() {
  if (exit_status_) return true;
  if (pid_ <= 0) return false;
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno != ECHILD) return false;
    exit_status_ = 0;  // reaped elsewhere; treat as gone
    return true;
  }
  if (info.si_pid != pid_) return false;  // still running
  // The child has ended but is not reaped: its pid, and so its group's id,
  // cannot be taken by a new process yet. Whatever it started dies now.
  KillGroup();
  int status = 0;
  exit_status_ = ::waitpid(pid_, &status, 0) == pid_ ? status : 0;
  return true;
}

bool ChildProcess::exited_cleanly() const {
  return exit_status_ && WIFEXITED(*exit_status_) && WEXITSTATUS(*exit_status_) == 0;
}

std::string ChildProcess::DescribeExit() const {
  if (!exit_status_) return "running";
  const int s = *exit_status_;
  if (WIFEXITED(s)) return "exited with status " + std::to_string(WEXITSTATUS(s));
  if (WIFSIGNALED(s)) {
    const int sig = WTERMSIG(s);
    const char* abbrev = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "");
  }
  return "ended with wait status " + std::to_string(s);
}

void ChildProcess::Signal(int sig) const {
  if (pid_ > 0 && !exit_status_) ::kill(-pid_, sig);
}

void ChildProcess::KillGroup() const {
  // Only while the child is not reaped (its pid keeps the group's id taken).
  if (pid_ > 0 && !exit_status_) ::kill(-pid_, SIGKILL);
}

bool ChildProcess::WaitExit(Deadline deadline) {
  while (!Poll()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void ChildProcess::Stop(Duration grace) {
  if (pid_ <= 0 || Poll()) return;  // Poll kills the group of a child that ended
  Signal(SIGTERM);
  if (WaitExit(DeadlineAfter(grace))) return;
  KillGroup();
  WaitExit(DeadlineAfter(std::chrono::seconds(10)));  // SIGKILL: at once, short of a stuck kernel call
}

Result<std::string> ChildProcess::ReadLine(Deadline deadline) {
  if (stdout_fd_ < 0) return FailedPrecondition("stdout of pid " + std::to_string(pid_) + " is not captured");
  for (;;) {
    const auto nl = stdout_buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = stdout_buffer_.substr(0, nl);
      stdout_buffer_.erase(0, nl + 1);
      return line;
    }
    const auto left = Remaining(deadline);
    if (left.count() == 0) {
      return DeadlineExceeded("no line on stdout of pid " + std::to_string(pid_) + " in time");
    }
    pollfd pfd{stdout_fd_, POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) return Unavailable(Errno("poll"));
    if (r <= 0) continue;
    char buf[512];
    const ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n == 0) {
      Poll();
      return Unavailable("pid " + std::to_string(pid_) + " closed stdout (" + DescribeExit() + ")");
    }
    if (n < 0 && errno != EINTR && errno != EAGAIN) return Unavailable(Errno("read"));
    if (n > 0) stdout_buffer_.append(buf, static_cast<size_t>(n));
  }
}

Result<std::filesystem::path> SelfBinaryDir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Internal("cannot read /proc/self/exe: " + ec.message());
  return exe.parent_path();
}

std::string ChildProcess::LogTail(const std::filesystem::path& log_file, int lines, size_t max_bytes) {
  // Not "(" + name + ...: GCC 12 at -O3 warns falsely (-Wrestrict) on that.
  auto note = [&](const char* what) {
    std::string s(1, '(');
    s.append(log_file.filename().string()).append(what);
    return s;
  };
  const int fd = ::open(log_file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno == ELOOP ? note(" is a symbolic link: not read)") : std::string();
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !IsOwnPlainFile(st)) {
    ::close(fd);
    return note(" is not a regular file of the agent's with a single name: not read)");
  }
  constexpr off_t kWindow = 64 * 1024;
  const off_t from = st.st_size > kWindow ? st.st_size - kWindow : 0;
  std::string text(static_cast<size_t>(st.st_size - from), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::pread(fd, text.data() + got, text.size() - got, from + static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  text = PrintableTail(text, text.size());
  std::deque<std::string> last;
  std::istringstream in(text);
  std::string line;
  bool first = from > 0;  // the window's first line may be cut: dropped
  while (std::getline(in, line)) {
    if (std::exchange(first, false) || line.empty()) continue;
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += (out.empty() ? "" : "\n") + l;
  if (out.size() > max_bytes) out = "..." + out.substr(out.size() - max_bytes);
  return out;
}

}  // namespace longhaul::region_agent
