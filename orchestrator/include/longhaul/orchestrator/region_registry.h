// RegionRegistry: the regions the orchestrator knows, with heartbeat liveness.
//
// A region is `up` while its last heartbeat (or registration) is younger than
// heartbeat_interval * heartbeat_misses; the control loop calls Sweep() on every
// tick to mark silent regions down. Each region is bound to the ZeroMQ routing
// identity it registered from, so replies reach the right agent and a second
// agent claiming the same name is visible. A region name is also bound to the
// agent key that first registered it (persisted by the orchestrator): another
// key cannot take the name over until `longhaul regions remove` releases it.
// Time comes from an injected Clock.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "longhaul/common/clock.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/orchestrator/membership.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator {

// The CURVE key a control message came with: its Z85 public key and its name in
// the roles file. Both empty when the orchestrator runs --insecure.
struct PeerKey {
  std::string public_key;
  std::string name;
  bool admin = false;  // an admin key, or a server without roles (everything allowed)
};

struct RegionEntry {
  std::string name;
  PeerKey agent_key;     // the key the name is bound to; empty = unbound
  std::string identity;  // ZeroMQ routing id of the agent's DEALER
  std::string session;   // the agent process's RegisterRegion.session_id ("" = not known)
  v1::Capacity capacity;
  std::string data_host;
  Clock::TimePoint last_heard{};
  bool up = false;
  bool healthy = true;
  bool heartbeat_seen = false;  // at least one heartbeat since registering
  std::string detail;
  std::vector<std::string> running_jobs;
};

class RegionRegistry {
 public:
  RegionRegistry(const Clock& clock, Timeouts timeouts) : clock_(clock), timeouts_(timeouts) {}

  // Why `key` may not register `msg.region()` (a bad name, or a name bound to
  // another key); nullopt when it may. Changes nothing.
  std::optional<std::string> RegisterRefusal(const v1::RegisterRegion& msg, const PeerKey& key) const;
  // Registers (or re-registers: agent restart, orchestrator restart) a region
  // that RegisterRefusal admitted, binding an unbound name to `key`.
  // Returns true when the region was registered by another agent process
  // before (both session ids known and different): that agent restarted.
  bool Register(const std::string& identity, const v1::RegisterRegion& msg, const PeerKey& key);
  // kNotFound when the region is unknown or was registered from another identity.
  Status Heartbeat(const std::string& identity, const v1::Heartbeat& msg);
  // A region known from the state file but not heard from since this start.
  void AddKnown(const std::string& name, const v1::Capacity& capacity, const std::string& data_host,
                const PeerKey& agent_key);
  // Forgets a region (and its key binding).
  void Remove(const std::string& name) { regions_.erase(name); }

  // A job just ended in `region`: it counts as still running there (busy) until
  // the agent's next heartbeat says what it runs. A job shorter than a heartbeat
  // interval was never listed, and the region was handed a new job while the
  // agent was still stopping the old one's workers (and refused it).
  void NoteJobEnded(const std::string& region, const std::string& job_id);

  // Marks regions down that missed too many heartbeats; returns them with reasons.
  std::vector<std::pair<std::string, std::string>> Sweep();

  const RegionEntry* Find(const std::string& name) const;
  bool IsUp(const std::string& name) const;
  int MissedHeartbeats(const RegionEntry& r) const;
  // Health of every region; busy_with comes from `assignments` (region -> job).
  std::vector<RegionHealth> Health(const std::map<std::string, std::string>& assignments) const;
  std::vector<v1::RegionInfo> Describe() const;
  const std::map<std::string, RegionEntry>& regions() const { return regions_; }
  size_t UpCount() const;

 private:
  const Clock& clock_;
  Timeouts timeouts_;
  std::map<std::string, RegionEntry> regions_;
};

}  // namespace longhaul::orchestrator
