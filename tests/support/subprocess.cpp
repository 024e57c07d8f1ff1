#include "support/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

namespace longhaul::testing {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(5);
constexpr auto kReapLimit = std::chrono::seconds(10);  // SIGKILLed processes exit at once; this is slack

int ExitCode(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

// argv[0] as a path to exec: as given when it holds a '/', else found on PATH
// (resolved before fork: execvp is not async-signal-safe).
std::string Executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

void BecomeSubreaper() {
  static std::once_flag once;
  std::call_once(once, [] { ::prctl(PR_SET_CHILD_SUBREAPER, 1); });
}

}  // namespace

Result<Subprocess> Subprocess::Spawn(const std::vector<std::string>& argv, const SubprocessOptions& options) {
  Subprocess p;
  Status s = p.Start(argv, options);
  if (!s.ok()) return s;
  return p;
}

Status Subprocess::Start(const std::vector<std::string>& argv, const SubprocessOptions& options) {
  if (argv.empty()) return InvalidArgument("Subprocess: empty argv");
  if (pgid_ > 0) Kill();
  Close();
  exit_.reset();
  stdout_buffer_.clear();
  log_path_ = options.log_path;
  BecomeSubreaper();

  const std::string exe = Executable(argv[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int log_fd = -1;
  if (!options.log_path.empty()) {
    log_fd = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return Unavailable("cannot open " + options.log_path + ": " + std::strerror(errno));
  }
  int pipe_fds[2] = {-1, -1};
  if (options.capture_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    if (log_fd >= 0) ::close(log_fd);
    return Unavailable(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    if (log_fd >= 0) ::close(log_fd);
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]), ::close(pipe_fds[1]);
    return Unavailable(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the test died before the line above
    ::setpgid(0, 0);
    if (log_fd >= 0) {
      ::dup2(log_fd, STDERR_FILENO);
      if (!options.capture_stdout) ::dup2(log_fd, STDOUT_FILENO);
    }
    if (options.capture_stdout) ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::execv(exe.c_str(), args.data());
    ::_exit(127);
  }
  // Also from the parent: Kill() may run before the child reached setpgid.
  ::setpgid(pid, pid);
  if (log_fd >= 0) ::close(log_fd);
  if (options.capture_stdout) {
    ::close(pipe_fds[1]);
    stdout_fd_ = pipe_fds[0];
  }
  pid_ = pid;
  pgid_ = pid;
  return Status::Ok();
}

Subprocess::Subprocess(Subprocess&& other) noexcept { *this = std::move(other); }

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this == &other) return *this;
  Kill();
  Close();
  pid_ = std::exchange(other.pid_, -1);
  pgid_ = std::exchange(other.pgid_, -1);
  stdout_fd_ = std::exchange(other.stdout_fd_, -1);
  stdout_buffer_ = std::move(other.stdout_buffer_);
  exit_ = std::exchange(other.exit_, std::nullopt);
  log_path_ = std::move(other.log_path_);
  return *this;
}

Subprocess::~Subprocess() {
  Kill();
  Close();
}

void Subprocess::Close() {
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
}

void Subprocess::Reap(int wait_status) {
  exit_ = ExitCode(wait_status);
  pid_ = -1;
}

bool Subprocess::Running() { return pid_ > 0 && !Wait(std::chrono::milliseconds(0)); }

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      Reap(status);
      break;
    }
    if (r < 0 && errno == ECHILD) {  // not ours to wait for any more
      pid_ = -1;
      break;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(kPoll);
  }
  return exit_;
}

void Subprocess::Signal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

std::optional<int> Subprocess::Stop(int signal, std::chrono::milliseconds grace) {
  Signal(signal);
  Wait(grace);
  Kill();
  return exit_;
}

void Subprocess::Kill() {
  if (pgid_ <= 0) return;
  ::kill(-pgid_, SIGKILL);
  // Members re-parented to this (subreaper) process when their parent died are
  // reaped here too; ECHILD means no child of ours is left in the group.
  const auto deadline = Clock::now() + kReapLimit;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(-pgid_, &status, WNOHANG);
    if (r == pid_) Reap(status);
    if (r > 0) continue;
    if (r < 0 || Clock::now() >= deadline) break;
    ::kill(-pgid_, SIGKILL);  // a member forked after the first signal
    std::this_thread::sleep_for(kPoll);
  }
  if (pid_ > 0) {
    std::fprintf(stderr, "Subprocess: pid %d did not die within %lld s of SIGKILL\n", pid_,
                 static_cast<long long>(kReapLimit.count()));
    pid_ = -1;
  }
  pgid_ = -1;
}

bool Subprocess::ReadMore(Clock::time_point deadline) {
  if (stdout_fd_ < 0) return false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char tmp[65536];
    const ssize_t n = ::read(stdout_fd_, tmp, sizeof tmp);
    if (n <= 0) return false;
    stdout_buffer_.append(tmp, static_cast<size_t>(n));
    return true;
  }
}

std::string Subprocess::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (const auto nl = stdout_buffer_.find('\n'); nl != std::string::npos) {
      std::string line = stdout_buffer_.substr(0, nl);
      stdout_buffer_.erase(0, nl + 1);
      return line;
    }
    if (!ReadMore(deadline)) return "";
  }
}

std::string Subprocess::ReadAll(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (ReadMore(deadline)) {
  }
  return std::exchange(stdout_buffer_, std::string());
}

std::string Subprocess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<std::string> Subprocess::WaitForLine(const std::string& needle, std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::istringstream lines(Log());
    for (std::string line; std::getline(lines, line);)
      if (line.find(needle) != std::string::npos) return line;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

int RunCommand(const std::string& shell_command, std::string* output, std::chrono::milliseconds timeout) {
  Subprocess p;
  if (!p.Start({"/bin/sh", "-c", "exec 2>&1; " + shell_command}, {.capture_stdout = true}).ok()) return -1;
  const auto deadline = Clock::now() + timeout;
  output->append(p.ReadAll(timeout));
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  const auto code = p.Wait(std::max(left, std::chrono::milliseconds(0)));
  return code.value_or(-1);  // still running at the deadline: killed by ~Subprocess
}

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::optional<std::string> HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return std::nullopt;
  }
  std::string out;
  char buf[8192];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  const auto body = out.find("\r\n\r\n");
  if (out.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) return std::nullopt;
  return out.substr(body + 4);
}

std::vector<ProcessEntry> ListProcesses() {
  std::vector<ProcessEntry> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // gone meanwhile
    // pid (comm) state ppid ... starttime(22) ...; comm may hold spaces and
    // ')', so the fields after it are read from the last ')'.
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 > line.size()) continue;
    ProcessEntry p;
    p.pid = std::stoi(pid);
    p.dir = e.path();
    p.comm = line.substr(open + 1, close - open - 1);
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i) {
      if (i == 4) p.ppid = std::stoi(field);
      if (i == 22) p.start_time = field;
    }
    if (!p.start_time.empty()) out.push_back(std::move(p));
  }
  return out;
}

std::vector<pid_t> ChildrenNamed(pid_t parent, const std::string& name) {
  std::vector<pid_t> out;
  for (const auto& p : ListProcesses())
    if (p.ppid == parent && p.comm == name.substr(0, 15)) out.push_back(p.pid);  // comm: 15 characters at most
  return out;
}

std::vector<pid_t> Descendants(pid_t root) {
  const std::vector<ProcessEntry> all = ListProcesses();
  std::vector<pid_t> out;
  std::vector<pid_t> parents{root};
  while (!parents.empty()) {
    const pid_t parent = parents.back();
    parents.pop_back();
    for (const auto& p : all) {
      if (p.ppid != parent) continue;
      out.push_back(p.pid);
      parents.push_back(p.pid);
    }
  }
  return out;
}

}  // namespace longhaul::testing
