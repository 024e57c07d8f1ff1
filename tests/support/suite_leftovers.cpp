// suite_leftovers: the test suite's guard against what it leaves behind.
//
//   suite_leftovers snapshot FILE   (ctest FIXTURES_SETUP, before any test)
//   suite_leftovers check FILE      (ctest FIXTURES_CLEANUP, after every test)
//
// The snapshot records this build's processes and the /tmp/longhaul-* folders
// that exist before the suite (left by someone else: `machine-check --clean`
// removes them); the check fails, naming each one, if the suite left a new
// one, and then kills it or, for its own TempDirs (named with its SuiteTag),
// removes it; folders are only listed when LONGHAUL_KEEP_TEST_DIRS asks to
// keep them. A process is the
// suite's when it runs a program from this build's bin folder or carries this
// build's LONGHAUL_TEST_SUITE marker (ctest puts it in every test's
// environment; whatever a test starts, an agent's Python workers included,
// inherits it). Processes are keyed by pid and start time, so a reused pid is
// not mistaken for an old one.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

const std::string kBinDir = LONGHAUL_BIN_DIR;
// ctest puts this in every test's environment; whatever a test starts inherits it.
const std::string kSuiteMarker = std::string("LONGHAUL_TEST_SUITE=") + LONGHAUL_BUILD_DIR;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Proc {
  pid_t pid = 0;
  std::string key;  // "pid:starttime"
  std::string description;
};

// This build's suite only: another build's suite running beside it (or a
// demo) is none of this check's business, and must never be killed by it.
bool IsSuiteProcess(const fs::path& proc) {
  std::error_code ec;
  const std::string exe = fs::read_symlink(proc / "exe", ec).string();
  if (ec) return false;  // gone, or a zombie (which holds nothing but its pid)
  if (exe.rfind(kBinDir + "/", 0) == 0) return true;
  const std::string env = ReadFile(proc / "environ");
  std::istringstream vars(env);
  for (std::string var; std::getline(vars, var, '\0');)
    if (var == kSuiteMarker) return true;
  return false;
}

std::vector<Proc> ProjectProcesses() {
  std::vector<Proc> out;
  for (const auto& p : longhaul::testing::ListProcesses()) {
    if (p.pid == ::getpid() || !IsSuiteProcess(p.dir)) continue;
    std::string args = ReadFile(p.dir / "cmdline");
    for (char& c : args)
      if (c == '\0') c = ' ';
    if (args.size() > 200) args = args.substr(0, 200) + "...";
    const std::string pid = std::to_string(p.pid);
    out.push_back({p.pid, pid + ":" + p.start_time, "pid " + pid + " (" + p.comm + ") " + args});
  }
  return out;
}

std::vector<std::string> TestFolders() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::temp_directory_path(), ec))
    if (entry.path().filename().string().rfind("longhaul-", 0) == 0) out.push_back(entry.path().string());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "snapshot" && std::string(argv[1]) != "check")) {
    std::cerr << "usage: suite_leftovers snapshot|check FILE\n";
    return 2;
  }
  const std::string mode = argv[1];
  const fs::path file = argv[2];
  const auto procs = ProjectProcesses();
  const auto folders = TestFolders();
  if (mode == "snapshot") {
    std::ofstream out(file, std::ios::trunc);
    for (const auto& p : procs) out << "process " << p.key << "\n";
    for (const auto& f : folders) out << "folder " << f << "\n";
    if (!out) {
      std::cerr << "suite_leftovers: cannot write " << file << "\n";
      return 1;
    }
    if (!procs.empty() || !folders.empty())
      std::cout << "before the suite: " << procs.size() << " project process(es) and " << folders.size()
                << " /tmp/longhaul-* folder(s) left by earlier runs (not this suite's; machine-check --clean)\n";
    return 0;
  }
  std::set<std::string> before;
  {
    std::ifstream in(file);
    if (!in) {
      std::cerr << "suite_leftovers: no snapshot " << file << " (the setup test did not run)\n";
      return 1;
    }
    for (std::string line; std::getline(in, line);) before.insert(line);
  }
  std::vector<std::string> left;
  for (const auto& p : procs) {
    if (before.count("process " + p.key)) continue;
    left.push_back(p.description);
    ::kill(p.pid, SIGKILL);  // reported, then removed: the next run starts clean
  }
  const bool keep = std::getenv("LONGHAUL_KEEP_TEST_DIRS") != nullptr;
  const std::string mine = "longhaul-test-" + longhaul::testing::SuiteTag(LONGHAUL_BUILD_DIR) + "-";
  for (const auto& f : folders) {
    if (before.count("folder " + f)) continue;
    if (keep) {
      std::cout << "kept (LONGHAUL_KEEP_TEST_DIRS): " << f << "\n";
      continue;
    }
    left.push_back(f);
    // Only this suite's own TempDirs are removed: another folder may be in
    // use by someone else (the check still fails, naming it).
    if (fs::path(f).filename().string().rfind(mine, 0) != 0) continue;
    std::error_code ec;
    fs::remove_all(f, ec);
  }
  if (left.empty()) {
    std::cout << "the suite left no process and no /tmp/longhaul-* folder behind\n";
    return 0;
  }
  std::cout << "the suite left " << left.size() << " thing(s) behind (its processes and its own test folders are "
               "now killed and removed):\n";
  for (const auto& l : left) std::cout << "  " << l << "\n";
  return 1;
}
