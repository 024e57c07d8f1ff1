#include "process_manifest.h"

#include <dirent.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace longhaul::orchestrator {
namespace {

namespace fs = std::filesystem;

// The processes in any of `sessions` (the recorded ones included), as entries.
std::vector<ManifestEntry> SessionMembers(const std::vector<pid_t>& sessions) {
  std::vector<ManifestEntry> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* d = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(d->d_name, &end, 10);
    if (end == d->d_name || *end != '\0' || pid <= 0) continue;
    auto st = ReadProcStat(static_cast<pid_t>(pid));
    if (!st || st->state == 'Z') continue;
    for (pid_t s : sessions) {
      if (st->session == s) {
        out.push_back({static_cast<pid_t>(pid), st->start_time, "session " + std::to_string(s)});
        break;
      }
    }
  }
  ::closedir(proc);
  return out;
}

}  // namespace

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // "PID (COMM) STATE PPID PGRP SESSION ... STARTTIME(22) ...": COMM may hold
  // spaces and parentheses, so the fields are counted from the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::vector<std::string> f;
  for (std::string x; fields >> x;) f.push_back(x);
  if (f.size() < 20) return std::nullopt;
  ProcStat st;
  st.state = f[0].empty() ? '?' : f[0][0];
  st.session = static_cast<pid_t>(std::strtol(f[3].c_str(), nullptr, 10));
  st.start_time = std::strtoull(f[19].c_str(), nullptr, 10);
  return st;
}

std::optional<ManifestEntry> EntryFor(pid_t pid, std::string name) {
  auto st = ReadProcStat(pid);
  if (!st || st->state == 'Z') return std::nullopt;
  return ManifestEntry{pid, st->start_time, std::move(name)};
}

bool IsRunning(const ManifestEntry& e) {
  auto st = ReadProcStat(e.pid);
  return st && st->state != 'Z' && st->start_time == e.start_time;
}

Status WriteManifest(const fs::path& file, const std::vector<ManifestEntry>& entries) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& e : entries) out << e.pid << " " << e.start_time << " " << e.name << "\n";
    out.flush();
    if (!out) return Internal("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) return Internal("cannot rename " + tmp.string() + " to " + file.string() + ": " + ec.message());
  return Status::Ok();
}

Result<std::vector<ManifestEntry>> ReadManifest(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return NotFound(file.string() + " does not exist");
  std::vector<ManifestEntry> entries;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    std::istringstream fields(line);
    ManifestEntry e;
    long long pid = 0;
    if (!(fields >> pid >> e.start_time) || pid <= 0 || pid > (1ll << 22)) {
      return InvalidArgument(file.string() + " line " + std::to_string(n) + ": expected 'PID START_TIME NAME', got '" +
                             line.substr(0, 80) + "'");
    }
    e.pid = static_cast<pid_t>(pid);
    std::getline(fields >> std::ws, e.name);
    entries.push_back(std::move(e));
  }
  return entries;
}

int StopManifest(const std::vector<ManifestEntry>& entries, std::chrono::milliseconds grace) {
  std::vector<ManifestEntry> ours;
  std::vector<pid_t> sessions;
  for (const auto& e : entries) {
    if (!IsRunning(e)) continue;  // gone, or its pid now belongs to someone else
    ours.push_back(e);
    // A recorded process leads its own session (setsid at start): everything in
    // it is its own (workers, links).
    if (auto st = ReadProcStat(e.pid); st && st->session == e.pid) sessions.push_back(e.pid);
  }
  // Noted before anything is signalled: a worker whose agent has exited is
  // still in the agent's session, and still ours.
  for (auto& m : SessionMembers(sessions)) {
    bool known = false;
    for (const auto& e : ours) known = known || e.pid == m.pid;
    if (!known) ours.push_back(std::move(m));
  }
  for (const auto& e : entries)
    if (IsRunning(e)) ::kill(e.pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  auto any_running = [&] {
    for (const auto& e : ours)
      if (IsRunning(e)) return true;
    return false;
  };
  while (any_running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int killed = 0;
  for (const auto& e : ours) {
    if (!IsRunning(e)) continue;
    ::kill(e.pid, SIGKILL);
    ++killed;
  }
  return killed;
}

}  // namespace longhaul::orchestrator
