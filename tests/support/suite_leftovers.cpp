// suite_leftovers: the test suite's guard against what it leaves behind.
//
//   suite_leftovers snapshot FILE   (ctest FIXTURES_SETUP, before any test)
//   suite_leftovers check FILE      (ctest FIXTURES_CLEANUP, after every test)
//
// The snapshot records the project's processes and /tmp/longhaul-* folders
// that exist before the suite (left by someone else: `machine-check --clean`
// removes them); the check fails, naming each one, if the suite left a new
// one, and then kills and removes it (the next run starts clean). A project
// process is one running a longhaul binary or anything from the
// build's bin folder, a worker an agent started (LONGHAUL_AGENT_ENDPOINT or
// LONGHAUL_ASSIGNMENT in its environment), anything a test started (ctest puts
// LONGHAUL_TEST_SUITE in every test's environment, and children inherit it), or
// an unreaped longhaul zombie. Processes are keyed by pid and start time, so a
// reused pid is not mistaken for an old one.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const std::string kBinDir = LONGHAUL_BIN_DIR;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Proc {
  pid_t pid = 0;
  std::string key;  // "pid:starttime"
  std::string description;
};

// comm, state and start time from /proc/<pid>/stat (comm may hold spaces and ')').
bool ParseStat(const std::string& stat, std::string* comm, char* state, std::string* start_time) {
  const size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 > stat.size()) return false;
  *comm = stat.substr(open + 1, close - open - 1);
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  rest >> *state;
  for (int i = 4; i <= 22 && rest >> field; ++i)  // field 22 is starttime
    if (i == 22) *start_time = field;
  return !start_time->empty();
}

bool IsProjectProcess(const fs::path& proc, const std::string& comm, char state) {
  if (state == 'Z') return comm.rfind("longhaul", 0) == 0;  // an unreaped longhaul process
  std::error_code ec;
  const std::string exe = fs::read_symlink(proc / "exe", ec).string();
  if (ec) return false;
  const std::string name = fs::path(exe).filename().string();
  if (name == "longhaul" || name.rfind("longhaul-", 0) == 0) return true;
  if (exe.rfind(kBinDir + "/", 0) == 0) return true;
  const std::string env = ReadFile(proc / "environ");
  std::istringstream vars(env);
  for (std::string var; std::getline(vars, var, '\0');)
    if (var.rfind("LONGHAUL_AGENT_ENDPOINT=", 0) == 0 || var.rfind("LONGHAUL_ASSIGNMENT=", 0) == 0 ||
        var.rfind("LONGHAUL_TEST_SUITE=", 0) == 0)
      return true;
  return false;
}

std::vector<Proc> ProjectProcesses() {
  std::vector<Proc> out;
  const std::string self = std::to_string(::getpid());
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
    std::string comm, start;
    char state = '?';
    if (!ParseStat(ReadFile(entry.path() / "stat"), &comm, &state, &start)) continue;
    if (!IsProjectProcess(entry.path(), comm, state)) continue;
    std::string args = ReadFile(entry.path() / "cmdline");
    for (char& c : args)
      if (c == '\0') c = ' ';
    if (args.size() > 200) args = args.substr(0, 200) + "...";
    out.push_back({static_cast<pid_t>(std::stoi(pid)), pid + ":" + start, "pid " + pid + " (" + comm + (state == 'Z' ? ", zombie" : "") + ") " + args});
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
  for (const auto& f : folders) {
    if (before.count("folder " + f)) continue;
    left.push_back(f);
    std::error_code ec;
    fs::remove_all(f, ec);
  }
  if (left.empty()) {
    std::cout << "the suite left no process and no /tmp/longhaul-* folder behind\n";
    return 0;
  }
  std::cout << "the suite left " << left.size() << " thing(s) behind (now killed and removed):\n";
  for (const auto& l : left) std::cout << "  " << l << "\n";
  return 1;
}
