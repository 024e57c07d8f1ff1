// Membership decisions as pure functions with reasons (torchft's quorum_compute):
// which regions a new job gets, and who takes part in the next attempt of a
// round. Inputs are plain values, so tests drive them without clocks or sockets;
// the reason string reaches logs, events and `longhaul status` verbatim.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator {

// What the registry knows about one region at decision time.
struct RegionHealth {
  std::string name;
  bool up = false;             // heartbeating within heartbeat_misses intervals
  bool healthy = false;        // the agent itself reports healthy
  int missed_heartbeats = 0;
  uint32_t workers = 0;        // capacity
  std::string busy_with;       // job id the region runs, empty when free
  std::string detail;
};

struct JobPlacement {
  bool ok = false;
  std::vector<std::string> regions;  // in job region_index order
  std::string reason;
};

// Regions for a job that is waiting to start: its named regions, or the first
// region_count healthy free regions (by name, deterministic).
JobPlacement PlaceJob(const v1::JobSpec& spec, const std::vector<RegionHealth>& regions);
// What PlaceJob reads of a spec: specs of one class get the same answer on the
// same regions.
std::string PlacementClass(const v1::JobSpec& spec);

// One region of a running job, as the round planner sees it.
struct JobMemberView {
  std::string region;
  bool up = false;
  bool ready = false;        // workers up, endpoint known
  bool holds_state = false;  // holds theta of the last committed round
  int missed_heartbeats = 0;
  std::string detail;
  std::string start_hash;    // of the parameters its workers started from ("" = not reported)
};

struct RoundMembership {
  bool ok = false;
  std::vector<std::string> participants;  // includes joining regions, job index order
  std::vector<std::string> joining;       // ready regions without state: bootstrapped this round
  std::string bootstrap_region;           // a participant holding state
  std::string reason;
};

// Participants of the next round attempt: every up+ready member; those without
// state join through `bootstrap_region`. Needs at least `min_regions` and at
// least one member holding state.
RoundMembership PlanRoundMembership(const std::vector<JobMemberView>& members, uint32_t min_regions);

// Before the first commit every region should start from the same theta(0):
// the built-in trainer seeds it from the job, a user's script seeds its model
// itself. The reference is the first up+ready member (job order) that holds
// state, as PlanRoundMembership's bootstrap region is; when none does (every
// holder was lost after a round 1 that bootstrapped others), the first up+ready
// member is: before a commit any region's start will do, and the caller
// counts the reference as holding state. Every
// other up+ready member holding state whose start hash differs from the
// reference's is `differing`: it holds no state, so PlanRoundMembership has it
// receive the reference's parameters at round 1, as it would a region that
// rejoins (DDP's broadcast from rank 0, across regions). Members without state
// join whatever their hash. When a member that is up and ready reported no hash
// (an agent from before the hash), nothing is compared. `trust_hashes` false
// (round 1 already failed on disagreeing hashes, so a start hash no longer says
// what a region holds): every other member holding state differs.
struct StartParameters {
  std::string reference;               // "" when no member is up and ready
  std::vector<std::string> differing;  // job order
  std::string reason;                  // names the hashes and who receives whose; "" when none differs
};
StartParameters CompareStartParameters(const std::vector<JobMemberView>& members, bool trust_hashes = true);

// When no member holds the last committed parameters: the member to restore
// them from its own checkpoint of that round (`checkpoints`: region -> path; a
// region reads only the file it wrote), or "" when none can (a member holds
// state, or none that is up has a checkpoint not refused before). Job order.
std::string ChooseCheckpointSource(const std::vector<JobMemberView>& members,
                                   const std::map<std::string, std::string>& checkpoints,
                                   const std::set<std::string>& refused);

}  // namespace longhaul::orchestrator
