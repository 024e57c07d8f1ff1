// The processes `longhaul up` leaves running, recorded so that `longhaul down`
// stops exactly them: each by pid *and* start time (a pid the kernel has since
// given to another process is left alone), together with whatever runs in
// their sessions (the agents' workers and link emulators).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "longhaul/common/status.h"

namespace longhaul::orchestrator {

struct ManifestEntry {
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat field 22 (clock ticks since boot)
  std::string name;         // "orchestrator", "agent eu-west"
  bool operator==(const ManifestEntry&) const = default;
};

// What /proc says of a process; nullopt when there is no such process.
struct ProcStat {
  char state = '?';  // 'Z': exited, not yet reaped
  pid_t session = 0;
  uint64_t start_time = 0;
};
std::optional<ProcStat> ReadProcStat(pid_t pid);

// The entry for a process running now (nullopt if it is already gone).
std::optional<ManifestEntry> EntryFor(pid_t pid, std::string name);
// Alive (not a zombie) and still the process the entry recorded.
bool IsRunning(const ManifestEntry& e);

// One line per process: "PID START_TIME NAME". Written to a temporary file and
// renamed: a reader never sees half a manifest.
Status WriteManifest(const std::filesystem::path& file, const std::vector<ManifestEntry>& entries);
// kNotFound when the file does not exist; kInvalidArgument naming the file and
// line for a malformed one.
Result<std::vector<ManifestEntry>> ReadManifest(const std::filesystem::path& file);

// SIGTERM to every running entry (in order), then waits up to `grace` for them
// and every process in their sessions to end; SIGKILLs what is left. Returns
// how many processes had to be killed.
int StopManifest(const std::vector<ManifestEntry>& entries, std::chrono::milliseconds grace);

}  // namespace longhaul::orchestrator
