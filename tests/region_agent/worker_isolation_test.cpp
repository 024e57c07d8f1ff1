// What keeps a job's program apart from its agent: the --run-as user (parsed,
// switched to before exec, no supplementary groups, no_new_privs) and a process
// group per child that dies with it.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <cerrno>
#include <optional>
#include <thread>

#include "longhaul/region_agent/child_process.h"
#include "longhaul/region_agent/launch_cgroup.h"
#include "longhaul/region_agent/run_as.h"
#include "support/skip.h"
#include "support/temp_dir.h"

using namespace longhaul;
using namespace longhaul::region_agent;
using longhaul::testing::SkipUnlessRoot;
using longhaul::testing::TempDir;
using namespace std::chrono_literals;

namespace {

// "R" (running), "S", "Z" (zombie: dead, not yet reaped), or "" (gone).
std::string ProcessState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? "" : text.substr(paren + 2, 1);
}

bool Dead(pid_t pid) {
  const auto s = ProcessState(pid);
  return s.empty() || s == "Z";
}

bool WaitDead(pid_t pid, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!Dead(pid)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);  // polling /proc, bounded
  }
  return true;
}

}  // namespace

TEST_CASE("region_agent: --run-as takes USER or USER:GROUP by name or number and refuses root", "[run_as]") {
  auto nobody = ParseRunAs("nobody");
  REQUIRE(nobody.ok());
  CHECK(nobody->uid == 65534);
  CHECK(nobody->gid == 65534);  // the user's primary group
  auto numeric = ParseRunAs("65534:65534");
  REQUIRE(numeric.ok());
  CHECK(numeric->uid == 65534);
  auto named_group = ParseRunAs("nobody:nogroup");
  REQUIRE(named_group.ok());
  CHECK(named_group->gid == 65534);
  auto unknown_uid = ParseRunAs("4000000:4000000");  // no user entry: both given, accepted
  REQUIRE(unknown_uid.ok());
  CHECK(unknown_uid->uid == 4000000);

  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {"root", "names root"},
           {"0:65534", "names root"},
           {"nobody:root", "names root"},
           {"no-such-user-xyz", "no user named 'no-such-user-xyz'"},
           {"nobody:no-such-group-xyz", "no group named 'no-such-group-xyz'"},
           {"4000000", "has no user entry"},
           {"", "must be USER or USER:GROUP"},
           {"nobody:", "must be USER or USER:GROUP"},
           {":nogroup", "must be USER or USER:GROUP"}}) {
    INFO(spec);
    auto r = ParseRunAs(spec);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(says) != std::string::npos);
  }
}

TEST_CASE("region_agent: a child's process group dies with it, so what it started does not outlive it", "[run_as]") {
  SpawnOptions o;
  o.program = "/bin/sh";
  o.args = {"-c", "sleep 300 & echo $!; exec sleep 300"};
  o.capture_stdout = true;
  auto child = ChildProcess::Spawn(o);
  REQUIRE(child.ok());
  auto line = child->ReadLine(DeadlineAfter(10s));
  REQUIRE(line.ok());
  const pid_t grandchild = std::stoi(*line);
  CHECK(::getpgid(grandchild) == child->pid());  // the child leads its own group
  CHECK(::getsid(child->pid()) == child->pid());
  REQUIRE_FALSE(Dead(grandchild));
  child->Stop(2s);
  CHECK(WaitDead(grandchild, 10s));
}

TEST_CASE("region_agent: a child that exits takes its process group down as it is reaped", "[run_as]") {
  SpawnOptions o;
  o.program = "/bin/sh";
  o.args = {"-c", "sleep 300 & echo $!; exit 3"};
  o.capture_stdout = true;
  auto child = ChildProcess::Spawn(o);
  REQUIRE(child.ok());
  auto line = child->ReadLine(DeadlineAfter(10s));
  REQUIRE(line.ok());
  const pid_t grandchild = std::stoi(*line);
  REQUIRE(child->WaitExit(DeadlineAfter(10s)));  // Poll found it ended, killed its group, reaped it
  CHECK(child->DescribeExit() == "exited with status 3");
  CHECK(WaitDead(grandchild, 10s));
}

TEST_CASE("region_agent: a child started with run_as has that user, no supplementary groups and no_new_privs",
          "[run_as]") {
  SkipUnlessRoot("switching users");
  auto who = ParseRunAs("nobody:nogroup");
  REQUIRE(who.ok());
  SpawnOptions o;
  o.program = "/bin/cat";
  o.args = {"/proc/self/status"};
  o.capture_stdout = true;
  o.run_as = *who;
  auto child = ChildProcess::Spawn(o);
  REQUIRE(child.ok());
  std::map<std::string, std::string> status;
  for (;;) {
    auto line = child->ReadLine(DeadlineAfter(10s));
    if (!line.ok()) break;  // end of output
    const auto colon = line->find(':');
    if (colon != std::string::npos) status[line->substr(0, colon)] = line->substr(colon + 1);
  }
  REQUIRE(child->WaitExit(DeadlineAfter(10s)));
  CHECK(status["Uid"] == "\t65534\t65534\t65534\t65534");
  CHECK(status["Gid"] == "\t65534\t65534\t65534\t65534");
  CHECK(status["Groups"].find_first_not_of(" \t") == std::string::npos);
  CHECK(status["NoNewPrivs"] == "\t1");

  // A program the agent may run but that user may not: the exec error names it.
  const TempDir tmp("run-as-exec");
  const auto script = tmp.path() / "private.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  ::chmod(script.c_str(), 0700);
  o.program = script;
  o.args = {};
  o.capture_stdout = false;
  auto refused = ChildProcess::Spawn(o);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("exec " + script.string() + " failed: Permission denied") !=
        std::string::npos);
}

TEST_CASE("region_agent: HandOver gives a folder to the workers' user without following a link", "[run_as]") {
  SkipUnlessRoot("changing owners");
  auto who = ParseRunAs("nobody:nogroup");
  REQUIRE(who.ok());
  const TempDir tmp("hand-over");
  const auto job = tmp.path() / "job";
  std::filesystem::create_directory(job);
  REQUIRE(HandOver(job, *who, 0700).ok());
  struct stat st {};
  REQUIRE(::stat(job.c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  CHECK(st.st_gid == 65534);
  CHECK((st.st_mode & 07777) == 0700);
  const auto target = tmp.path() / "agent-secret";
  std::ofstream(target) << "secret";
  ::chmod(target.c_str(), 0600);
  std::filesystem::create_symlink(target, tmp.path() / "link");
  CHECK_FALSE(HandOver(tmp.path() / "link", *who, 0600).ok());
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK(st.st_uid == 0);  // the link's target is untouched
}

namespace {

// The cgroup root; the case is skipped where it is not root.
CgroupRoot TestCgroupRoot() {
  SkipUnlessRoot("cgroups");
  auto root = CgroupRoot::Find();
  REQUIRE(root.ok());  // as root on Linux with cgroups mounted this must work
  return *root;
}

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("region_agent: a launch cgroup holds its limits and ends a process that left its process group",
          "[run_as][cgroup]") {
  const CgroupRoot root = TestCgroupRoot();
  const std::string name = "longhaul-test-" + std::to_string(::getpid()) + "-escape";
  auto cg = LaunchCgroup::Create(root, name, {64u << 20, 16});
  REQUIRE(cg.ok());
  const auto dirs = (*cg)->dirs();
  std::string memory, pids;
  for (const auto& d : dirs) {
    for (const char* f : {"memory.max", "memory.limit_in_bytes"}) {
      if (std::filesystem::exists(d / f)) memory = Slurp(d / f);
    }
    if (std::filesystem::exists(d / "pids.max")) pids = Slurp(d / "pids.max");
  }
  CHECK(memory == std::to_string(64u << 20) + "\n");
  CHECK(pids == "16\n");

  SpawnOptions o;
  o.program = "/bin/sh";
  o.args = {"-c", "setsid sleep 300 & echo $!; exec sleep 300"};
  o.capture_stdout = true;
  o.cgroup_procs_fds = (*cg)->procs_fds();
  auto child = ChildProcess::Spawn(o);
  REQUIRE(child.ok());
  auto line = child->ReadLine(DeadlineAfter(10s));
  REQUIRE(line.ok());
  const pid_t escaped = std::stoi(*line);
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (::getsid(escaped) != escaped && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(10ms);  // polling until setsid ran, bounded
  }
  REQUIRE(::getsid(escaped) == escaped);  // out of the child's session and group
  const auto inside = (*cg)->Pids();
  CHECK(std::find(inside.begin(), inside.end(), child->pid()) != inside.end());
  CHECK(std::find(inside.begin(), inside.end(), escaped) != inside.end());
  child->Stop(2s);
  CHECK_FALSE(Dead(escaped));  // the process group did not reach it...
  (*cg)->KillAll();
  CHECK(WaitDead(escaped, 10s));  // ...the cgroup does
  cg->reset();
  for (const auto& d : dirs) CHECK_FALSE(std::filesystem::exists(d));
}

TEST_CASE("region_agent: a launch cgroup caps the number of processes", "[run_as][cgroup]") {
  const CgroupRoot root = TestCgroupRoot();
  auto cg = LaunchCgroup::Create(root, "longhaul-test-" + std::to_string(::getpid()) + "-pids", {0, 4});
  REQUIRE(cg.ok());
  // A program that forks until the cgroup refuses, says how far it got and
  // stays (a shell would exit at the refused fork, taking its group along).
  SpawnOptions o;
  o.program = "/usr/bin/python3";
  o.args = {"-c",
            "import os, time\n"
            "n = 0\n"
            "for _ in range(8):\n"
            "    try:\n"
            "        pid = os.fork()\n"
            "    except OSError as e:\n"
            "        print('refused', e.errno, flush=True)\n"
            "        break\n"
            "    if pid == 0:\n"
            "        time.sleep(300)\n"
            "        os._exit(0)\n"
            "    n += 1\n"
            "print(n, flush=True)\n"
            "time.sleep(300)\n"};
  o.capture_stdout = true;
  o.cgroup_procs_fds = (*cg)->procs_fds();
  auto child = ChildProcess::Spawn(o);
  REQUIRE(child.ok());
  auto refused = child->ReadLine(DeadlineAfter(20s));
  REQUIRE(refused.ok());
  CHECK(*refused == "refused " + std::to_string(EAGAIN));
  auto forked = child->ReadLine(DeadlineAfter(20s));
  REQUIRE(forked.ok());
  CHECK(std::stoi(*forked) <= 3);  // the program and its children: at most 4
  CHECK((*cg)->Pids().size() <= 4);
  child->Stop(2s);
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!(*cg)->KillAll() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(10ms);  // polling until the killed processes have left, bounded
  }
  CHECK((*cg)->Pids().empty());
}

TEST_CASE("region_agent: a worker's log that is a hard link elsewhere is neither written nor read", "[run_as]") {
  const TempDir tmp("log-hardlink");
  std::ofstream(tmp.path() / "secret") << "not for the job\n";
  std::filesystem::create_hard_link(tmp.path() / "secret", tmp.path() / "worker-0.log");
  SpawnOptions o;
  o.program = "/bin/true";
  o.log_file = tmp.path() / "worker-0.log";
  auto child = ChildProcess::Spawn(o);
  REQUIRE_FALSE(child.ok());
  CHECK_THAT(child.status().message(), Catch::Contains("not a regular file of the agent's with a single name"));
  CHECK(Slurp(tmp.path() / "secret") == "not for the job\n");
}

TEST_CASE("region_agent: an empty launch cgroup left by an agent that died is made afresh, one with processes "
          "is refused",
          "[run_as][cgroup]") {
  const CgroupRoot root = TestCgroupRoot();
  const std::string name = "longhaul-test-" + std::to_string(::getpid()) + "-stale";
  // What a SIGKILLed agent leaves: the cgroup, its launch's process still in it
  // (`dead` is not destroyed while the next launch of its name is made).
  auto dead = LaunchCgroup::Create(root, name, {0, 16});
  REQUIRE(dead.ok());
  SpawnOptions o;
  o.program = "/bin/sh";
  o.args = {"-c", "exec sleep 300"};
  o.cgroup_procs_fds = (*dead)->procs_fds();
  auto orphan = ChildProcess::Spawn(o);
  REQUIRE(orphan.ok());
  const auto dirs = (*dead)->dirs();
  // A process is in it: maybe another agent's, never killed; the launch fails, naming it.
  auto busy = LaunchCgroup::Create(root, name, {0, 16});
  REQUIRE_FALSE(busy.ok());
  CHECK_THAT(busy.status().message(), Catch::Contains("already holds processes " + std::to_string(orphan->pid())));
  CHECK_FALSE(Dead(orphan->pid()));
  // Once it is empty the next launch of that name makes it afresh.
  orphan->Stop(2s);  // ended and reaped
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!(*dead)->Pids().empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(10ms);  // the cgroup lets go of the killed process, bounded
  }
  auto fresh = LaunchCgroup::Create(root, name, {0, 16});
  REQUIRE(fresh.ok());
  CHECK((*fresh)->Pids().empty());
  fresh->reset();
  for (const auto& d : dirs) CHECK_FALSE(std::filesystem::exists(d));
  dead->reset();  // its folders are gone already
}
