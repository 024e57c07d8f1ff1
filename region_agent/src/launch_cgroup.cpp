#include "longhaul/region_agent/launch_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace longhaul::region_agent {
namespace fs = std::filesystem;
namespace {

std::string Errno() { return std::strerror(errno); }

Status WriteFile(const fs::path& file, const std::string& text) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot open " + file.string() + ": " + Errno());
  const ssize_t n = ::write(fd, text.data(), text.size());
  const std::string why = Errno();
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Unavailable("cannot write '" + text + "' to " + file.string() + ": " + why);
  return Status::Ok();
}

std::string ReadFile(const fs::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The agent's path in each hierarchy, from /proc/self/cgroup lines
// "ID:CONTROLLERS:PATH" ("0::PATH" is v2).
std::map<std::string, std::string> OwnPaths(const fs::path& self_cgroup) {
  std::map<std::string, std::string> out;
  std::istringstream in(ReadFile(self_cgroup));
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::istringstream controllers(line.substr(a + 1, b - a - 1));
    std::string c;
    if (line.substr(a + 1, b - a - 1).empty()) out[""] = line.substr(b + 1);
    while (std::getline(controllers, c, ',')) out[c] = line.substr(b + 1);
  }
  return out;
}

Status CheckWritable(const fs::path& parent) {
  const fs::path probe = parent / ("longhaul-probe-" + std::to_string(::getpid()));
  if (::mkdir(probe.c_str(), 0755) != 0) return Unavailable("cannot create a cgroup under " + parent.string() + ": " + Errno());
  ::rmdir(probe.c_str());
  return Status::Ok();
}

// Removes `dir` if no process is in it. Processes there may be another agent's
// launch of the same name (agents of two clusters on one host), so they are
// never killed here: the launch fails, naming them.
Status RemoveStale(const fs::path& dir) {
  std::ifstream in(dir / "cgroup.procs");
  std::string pids, p;
  while (in >> p) pids += (pids.empty() ? "" : " ") + p;
  if (!pids.empty()) {
    return Unavailable("cgroup " + dir.string() + " already holds processes " + pids +
                       " (another agent's launch of this name, or one an agent that died left running)");
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT)
    return Unavailable("cannot remove the stale cgroup " + dir.string() + ": " + Errno());
  return Status::Ok();
}

}  // namespace

Result<CgroupRoot> CgroupRoot::Find(const fs::path& mount, const fs::path& self_cgroup) {
  const auto own = OwnPaths(self_cgroup);
  CgroupRoot root;
  std::error_code ec;
  if (fs::exists(mount / "cgroup.controllers", ec) && own.count("")) {
    // v2: <mount><own>/agent holds the agent, launches go beside it.
    root.unified_ = true;
    const fs::path base = mount / fs::path(own.at("")).relative_path();
    const std::string available = ReadFile(base / "cgroup.controllers");
    for (const char* c : {"memory", "pids"}) {
      if (available.find(c) == std::string::npos) {
        return FailedPrecondition("cgroup v2 at " + base.string() + " does not offer the " + c +
                                  " controller (delegate it to the agent: systemd Delegate=yes)");
      }
    }
    LONGHAUL_RETURN_IF_ERROR(CheckWritable(base));
    const fs::path leaf = base / "agent";
    if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) return Unavailable("cannot create " + leaf.string() + ": " + Errno());
    LONGHAUL_RETURN_IF_ERROR(WriteFile(leaf / "cgroup.procs", "0"));
    LONGHAUL_RETURN_IF_ERROR(WriteFile(base / "cgroup.subtree_control", "+memory +pids"));
    root.parents_ = {base};
    return root;
  }
  for (const char* c : {"memory", "pids"}) {
    if (!fs::exists(mount / c / "cgroup.procs", ec) || !own.count(c)) {
      return FailedPrecondition("no cgroup v2 hierarchy at " + mount.string() + " and no v1 " + c + " hierarchy at " +
                                (mount / c).string());
    }
    const fs::path parent = mount / c / fs::path(own.at(c)).relative_path();
    LONGHAUL_RETURN_IF_ERROR(CheckWritable(parent));
    root.parents_.push_back(parent);
  }
  return root;
}

Result<std::unique_ptr<LaunchCgroup>> LaunchCgroup::Create(const CgroupRoot& root, const std::string& name,
                                                           const CgroupLimits& limits) {
  std::unique_ptr<LaunchCgroup> cg(new LaunchCgroup());
  cg->unified_ = root.unified();
  for (const auto& parent : root.parents()) {
    const fs::path dir = parent / name;
    if (::mkdir(dir.c_str(), 0755) != 0) {
      if (errno != EEXIST) return Unavailable("cannot create cgroup " + dir.string() + ": " + Errno());
      // Left by an agent that died without removing it: made afresh if empty.
      LONGHAUL_RETURN_IF_ERROR(RemoveStale(dir));
      if (::mkdir(dir.c_str(), 0755) != 0) return Unavailable("cannot create cgroup " + dir.string() + ": " + Errno());
    }
    cg->dirs_.push_back(dir);  // removed by the destructor from here on
  }
  auto set = [&](const std::string& file, uint64_t value) -> Status {
    for (const auto& dir : cg->dirs_) {
      if (fs::exists(dir / file)) return WriteFile(dir / file, std::to_string(value));
    }
    return FailedPrecondition("no cgroup of " + name + " has " + file);
  };
  if (limits.memory_bytes > 0) {
    LONGHAUL_RETURN_IF_ERROR(set(cg->unified_ ? "memory.max" : "memory.limit_in_bytes", limits.memory_bytes));
    // No way around the limit through swap (where swap is accounted).
    if (cg->unified_ && fs::exists(cg->dirs_.front() / "memory.swap.max")) {
      LONGHAUL_RETURN_IF_ERROR(set("memory.swap.max", 0));
    }
  }
  if (limits.pids > 0) LONGHAUL_RETURN_IF_ERROR(set("pids.max", limits.pids));
  for (const auto& dir : cg->dirs_) {
    const int fd = ::open((dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Unavailable("cannot open " + (dir / "cgroup.procs").string() + ": " + Errno());
    cg->procs_fds_.push_back(fd);
  }
  return cg;
}

std::vector<pid_t> LaunchCgroup::Pids() const {
  std::vector<pid_t> pids;
  if (dirs_.empty()) return pids;
  std::istringstream in(ReadFile(dirs_.front() / "cgroup.procs"));
  pid_t p = 0;
  while (in >> p) pids.push_back(p);
  return pids;
}

bool LaunchCgroup::KillAll() {
  const auto pids = Pids();
  if (pids.empty()) return true;
  if (unified_ && fs::exists(dirs_.front() / "cgroup.kill")) {
    (void)WriteFile(dirs_.front() / "cgroup.kill", "1");
  } else {
    for (pid_t p : pids) ::kill(p, SIGKILL);  // one that forks meanwhile is caught by the next call
  }
  return false;
}

LaunchCgroup::~LaunchCgroup() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!KillAll() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int fd : procs_fds_) ::close(fd);
  for (const auto& dir : dirs_) {
    // A killed process leaves its cgroup as it exits; rmdir succeeds once all have.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (::rmdir(dir.c_str()) != 0 && errno == EBUSY && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace longhaul::region_agent
