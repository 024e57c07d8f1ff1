#include "longhaul/orchestrator/region_netns.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>

extern char** environ;

namespace longhaul::orchestrator {
namespace {

// Runs one iproute2 command: its output (stdout and stderr), or an error with it.
Result<std::string> Ip(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; rc == 0 && (n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0;) err.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  if (rc != 0) return Unavailable("cannot run '" + line + "': " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!err.empty() && err.back() == '\n') err.pop_back();
    return Unavailable("'" + line + "' failed: " + err.substr(0, 300));
  }
  return err;
}

// Runs one iproute2 command that must succeed.
Status Must(const std::vector<std::string>& argv) { return Ip(argv).status(); }

std::vector<std::string> Tbf(const std::vector<std::string>& prefix, const std::string& dev, double rate_mbit) {
  // Burst: 4 ms at the rate, at least 64 KiB (tbf needs rate / HZ at least).
  const long burst = std::max(65536L, std::lround(rate_mbit * 1e6 / 8 * 0.004));
  std::vector<std::string> argv = prefix;
  argv.insert(argv.end(), {"tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                           std::to_string(std::lround(rate_mbit * 1000)) + "kbit", "burst", std::to_string(burst),
                           "latency", "100ms"});
  return argv;
}

// Held while a run picks its subnet and puts it on its bridge, so two runs at
// the same time (the demo and a test) never take the same one.
class SubnetLock {
 public:
  SubnetLock() : fd_(::open("/run/lock/longhaul-netns.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) {
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~SubnetLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  SubnetLock(const SubnetLock&) = delete;
  SubnetLock& operator=(const SubnetLock&) = delete;

 private:
  int fd_;
};

}  // namespace

Result<std::unique_ptr<RegionNetworks>> RegionNetworks::Create(const std::vector<LocalRegion>& regions) {
  if (::geteuid() != 0) return FailedPrecondition("regions in network namespaces need root (ip netns, tc)");
  if (regions.empty() || regions.size() > 200) return InvalidArgument("network namespaces for 1 to 200 regions");
  std::unique_ptr<RegionNetworks> n(new RegionNetworks());
  const std::string tag = std::to_string(::getpid() % 100000);
  // One /24 of 10.231.0.0/16 per run that no interface here has an address in
  // (another run's bridge); the bridge is .1, region i is .(10 + i).
  std::optional<SubnetLock> lock(std::in_place);
  std::string subnet;
  for (int i = 0; i < 250 && subnet.empty(); ++i) {
    const std::string candidate = "10.231." + std::to_string((::getpid() + i) % 250) + ".";
    auto used = Ip({"ip", "-o", "-4", "addr", "show", "to", candidate + "0/24"});
    if (used.ok() && used->empty()) subnet = candidate;
  }
  if (subnet.empty()) return Unavailable("no free /24 in 10.231.0.0/16 for the regions' network");
  n->bridge_ = "lhbr" + tag;
  n->host_address_ = subnet + "1";
  // What an earlier run with the same tag may have left.
  (void)Ip({"ip", "link", "del", n->bridge_});
  for (size_t i = 0; i < regions.size(); ++i) {
    const std::string ns = "longhaul-" + tag + "-" + std::to_string(i);
    (void)Ip({"ip", "netns", "del", ns});
    (void)Ip({"ip", "link", "del", "lh" + tag + "h" + std::to_string(i)});
  }
  LONGHAUL_RETURN_IF_ERROR(Must({"ip", "link", "add", n->bridge_, "type", "bridge"}));
  LONGHAUL_RETURN_IF_ERROR(Must({"ip", "addr", "add", n->host_address_ + "/24", "dev", n->bridge_}));
  lock.reset();  // the subnet is visibly taken now
  LONGHAUL_RETURN_IF_ERROR(Must({"ip", "link", "set", n->bridge_, "up"}));
  for (size_t i = 0; i < regions.size(); ++i) {
    const std::string ns = "longhaul-" + tag + "-" + std::to_string(i);
    const std::string host_side = "lh" + tag + "h" + std::to_string(i);
    const std::string ns_side = "lh" + tag + "n" + std::to_string(i);
    const std::string address = subnet + std::to_string(10 + i);
    LONGHAUL_RETURN_IF_ERROR(Must({"ip", "netns", "add", ns}));
    n->namespaces_.push_back(ns);  // deleted by the destructor from here on
    n->addresses_.push_back(address);
    n->host_sides_.push_back(host_side);
    LONGHAUL_RETURN_IF_ERROR(Must({"ip", "link", "add", host_side, "type", "veth", "peer", "name", ns_side}));
    LONGHAUL_RETURN_IF_ERROR(Must({"ip", "link", "set", ns_side, "netns", ns}));
    LONGHAUL_RETURN_IF_ERROR(Must({"ip", "link", "set", host_side, "master", n->bridge_}));
    LONGHAUL_RETURN_IF_ERROR(Must({"ip", "link", "set", host_side, "up"}));
    LONGHAUL_RETURN_IF_ERROR(Must({"ip", "-n", ns, "addr", "add", address + "/24", "dev", ns_side}));
    LONGHAUL_RETURN_IF_ERROR(Must({"ip", "-n", ns, "link", "set", ns_side, "up"}));
    LONGHAUL_RETURN_IF_ERROR(Must({"ip", "-n", ns, "link", "set", "lo", "up"}));
    // The rest of this host (its other addresses) through the bridge.
    LONGHAUL_RETURN_IF_ERROR(Must({"ip", "-n", ns, "route", "add", "default", "via", n->host_address_}));
    if (regions[i].rate_mbit > 0) {
      LONGHAUL_RETURN_IF_ERROR(Must(Tbf({"ip", "netns", "exec", ns}, ns_side, regions[i].rate_mbit)));  // uplink
      LONGHAUL_RETURN_IF_ERROR(Must(Tbf({}, host_side, regions[i].rate_mbit)));                        // downlink
    }
  }
  return n;
}

RegionNetworks::~RegionNetworks() {
  // A namespace's veth end goes with it, and its peer with that.
  for (const auto& ns : namespaces_) (void)Ip({"ip", "netns", "del", ns});
  (void)Ip({"ip", "link", "del", bridge_});
}

Status RegionNetworks::SetConnected(size_t region, bool connected) const {
  if (region >= host_sides_.size()) return InvalidArgument("no region " + std::to_string(region) + " in this network");
  return Must({"ip", "link", "set", host_sides_[region], connected ? "up" : "down"});
}

std::vector<std::string> RegionNetworks::Inside(size_t region, const std::vector<std::string>& argv) const {
  // A path: the caller may exec without a PATH lookup.
  const char* ip = ::access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/sbin/ip";
  std::vector<std::string> out = {ip, "netns", "exec", namespaces_.at(region)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace longhaul::orchestrator
