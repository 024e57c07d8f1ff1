// A job's lifecycle state: one enum and one table. The wire (JobStatus.state),
// the state file and the metrics' labels carry the names from this table.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace longhaul::orchestrator {

enum class JobState { kSubmitted, kScheduled, kRunning, kSucceeded, kFailed, kCancelled };

struct JobStateInfo {
  JobState state;
  std::string_view name;
  bool terminal;
};

inline constexpr std::array<JobStateInfo, 6> kJobStates{{
    {JobState::kSubmitted, "submitted", false},
    {JobState::kScheduled, "scheduled", false},
    {JobState::kRunning, "running", false},
    {JobState::kSucceeded, "succeeded", true},
    {JobState::kFailed, "failed", true},
    {JobState::kCancelled, "cancelled", true},
}};

constexpr std::string_view JobStateName(JobState s) { return kJobStates[static_cast<size_t>(s)].name; }
constexpr bool IsTerminal(JobState s) { return kJobStates[static_cast<size_t>(s)].terminal; }

inline std::optional<JobState> ParseJobState(std::string_view name) {
  for (const auto& i : kJobStates)
    if (i.name == name) return i.state;
  return std::nullopt;
}

// For a state name read from the wire (the CLI): unknown names are not terminal.
inline bool IsTerminalJobState(std::string_view name) {
  auto s = ParseJobState(name);
  return s && IsTerminal(*s);
}

}  // namespace longhaul::orchestrator
