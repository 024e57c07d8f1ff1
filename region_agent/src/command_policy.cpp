#include "longhaul/region_agent/command_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace longhaul::region_agent {
namespace {

namespace fs = std::filesystem;

// The file exec would run for `name` with this PATH, or "".
fs::path Lookup(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) return fs::absolute(name);
  std::istringstream dirs(path_var);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return fs::absolute(candidate);
  }
  return {};
}

// Symlinks resolved; "" when the file does not exist.
fs::path Resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::canonical(p, ec);
  return ec ? fs::path() : r;
}

bool Inside(const fs::path& dir, const fs::path& under) {
  auto d = dir.begin(), u = under.begin();
  for (; d != dir.end(); ++d, ++u) {
    if (u == under.end() || *d != *u) return false;
  }
  return true;
}

}  // namespace

Result<fs::path> CommandPolicy::Check(const worker::JobConfig& job, const std::string& region) const {
  if (!job.command) return fs::path();
  const auto& cmd = *job.command;
  const std::string& name = cmd.argv.front();
  if (allowed_programs.empty()) {
    return PermissionDenied("region " + region + " runs no user programs: its agent allows none (the operator "
                            "allows one with longhaul-agent --allow-command PATH)");
  }
  std::string path_var;
  if (auto it = cmd.env.find("PATH"); it != cmd.env.end()) {
    path_var = it->second;
  } else if (const char* p = std::getenv("PATH")) {
    path_var = p;
  }
  const fs::path program = Resolved(Lookup(name, path_var));
  if (program.empty()) return PermissionDenied("worker.command[0] '" + name.substr(0, 256) + "' is not a program on region " + region);
  bool allowed = false;
  for (const auto& a : allowed_programs) allowed = allowed || Resolved(a) == program;
  if (!allowed) {
    return PermissionDenied("worker.command[0] '" + name.substr(0, 256) + "' (" + program.string() +
                            ") is not a program region " + region + "'s agent allows (--allow-command)");
  }
  if (!cmd.working_dir.empty()) {
    const fs::path dir = Resolved(cmd.working_dir);
    if (dir.empty()) {
      return PermissionDenied("worker.working_dir '" + cmd.working_dir.substr(0, 256) + "' does not exist on region " +
                              region);
    }
    bool inside = false;
    for (const auto& a : allowed_working_dirs) {
      const fs::path allowed_dir = Resolved(a);
      inside = inside || (!allowed_dir.empty() && Inside(allowed_dir, dir));
    }
    if (!inside) {
      return PermissionDenied("worker.working_dir '" + cmd.working_dir.substr(0, 256) + "' (" + dir.string() +
                              ") is outside the folders region " + region + "'s agent allows (--allow-working-dir); "
                              "leave it out to run in the job's folder");
    }
  }
  return program;
}

}  // namespace longhaul::region_agent
