#include "longhaul/orchestrator/region_registry.h"

#include <algorithm>

#include <cctype>
#include <chrono>

namespace longhaul::orchestrator {

std::optional<std::string> RegionRegistry::RegisterRefusal(const v1::RegisterRegion& msg, const PeerKey& key) const {
  if (msg.region().empty()) return std::string("region name is empty");
  if (msg.region().size() > 64) return std::string("region name is longer than 64 characters");
  for (char c : msg.region())
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return "region name '" + msg.region() + "' may contain only letters, digits, '-', '_' and '.'";
  const RegionEntry* known = Find(msg.region());
  if (known && !known->agent_key.public_key.empty() && known->agent_key.public_key != key.public_key)
    return "region '" + msg.region() + "' is bound to agent key '" + known->agent_key.name + "', not '" + key.name +
           "'; `longhaul regions remove " + msg.region() + "` releases the name";
  return std::nullopt;
}

bool RegionRegistry::Register(const std::string& identity, const v1::RegisterRegion& msg, const PeerKey& key) {
  RegionEntry& r = regions_[msg.region()];
  const bool restarted = !r.session.empty() && !msg.session_id().empty() && r.session != msg.session_id();
  r.session = msg.session_id();
  r.name = msg.region();
  if (r.agent_key.public_key.empty()) r.agent_key = key;
  r.identity = identity;
  r.capacity = msg.capacity();
  r.data_host = msg.data_host();
  r.last_heard = clock_.Now();
  r.up = true;
  r.healthy = true;
  r.heartbeat_seen = false;
  r.detail.clear();
  r.running_jobs.clear();
  return restarted;
}

Status RegionRegistry::Heartbeat(const std::string& identity, const v1::Heartbeat& msg) {
  auto it = regions_.find(msg.region());
  if (it == regions_.end() || it->second.identity.empty())
    return NotFound("region '" + msg.region() + "' is not registered; register again");
  RegionEntry& r = it->second;
  if (r.identity != identity)
    return NotFound("region '" + msg.region() + "' is registered from another connection; register again");
  r.last_heard = clock_.Now();
  r.up = true;
  r.healthy = msg.healthy();
  r.heartbeat_seen = true;
  r.detail = msg.detail();
  r.running_jobs.assign(msg.running_jobs().begin(), msg.running_jobs().end());
  return Status::Ok();
}

void RegionRegistry::AddKnown(const std::string& name, const v1::Capacity& capacity, const std::string& data_host,
                              const PeerKey& agent_key) {
  if (regions_.count(name)) return;
  RegionEntry& r = regions_[name];
  r.name = name;
  r.agent_key = agent_key;
  r.capacity = capacity;
  r.data_host = data_host;
  r.up = false;
  r.detail = "not heard from since the orchestrator started";
}

int RegionRegistry::MissedHeartbeats(const RegionEntry& r) const {
  if (r.identity.empty()) return timeouts_.heartbeat_misses;
  const auto silent = clock_.Now() - r.last_heard;
  return static_cast<int>(silent / timeouts_.heartbeat_interval);
}

std::vector<std::pair<std::string, std::string>> RegionRegistry::Sweep() {
  std::vector<std::pair<std::string, std::string>> downed;
  for (auto& [name, r] : regions_) {
    if (!r.up) continue;
    const int missed = MissedHeartbeats(r);
    if (missed >= timeouts_.heartbeat_misses) {
      r.up = false;
      r.detail = "missed " + std::to_string(missed) + " heartbeats";
      downed.emplace_back(name, name + " missed " + std::to_string(missed) + " heartbeats (limit " +
                                    std::to_string(timeouts_.heartbeat_misses) + ")");
    }
  }
  return downed;
}

const RegionEntry* RegionRegistry::Find(const std::string& name) const {
  auto it = regions_.find(name);
  return it == regions_.end() ? nullptr : &it->second;
}

bool RegionRegistry::IsUp(const std::string& name) const {
  const RegionEntry* r = Find(name);
  return r && r->up;
}

size_t RegionRegistry::UpCount() const {
  size_t n = 0;
  for (const auto& [_, r] : regions_) n += r.up ? 1 : 0;
  return n;
}

void RegionRegistry::NoteJobEnded(const std::string& region, const std::string& job_id) {
  auto it = regions_.find(region);
  if (it == regions_.end() || !it->second.up) return;
  auto& jobs = it->second.running_jobs;
  if (std::find(jobs.begin(), jobs.end(), job_id) == jobs.end()) jobs.push_back(job_id);
}

std::vector<RegionHealth> RegionRegistry::Health(const std::map<std::string, std::string>& assignments) const {
  std::vector<RegionHealth> out;
  for (const auto& [name, r] : regions_) {
    RegionHealth h;
    h.name = name;
    h.up = r.up;
    h.healthy = r.healthy;
    h.missed_heartbeats = MissedHeartbeats(r);
    h.workers = r.capacity.workers();
    h.detail = r.detail;
    auto a = assignments.find(name);
    if (a != assignments.end()) {
      h.busy_with = a->second;
    } else if (!r.running_jobs.empty()) {
      // A job that ended here is still stopping its workers until the agent's
      // heartbeat stops listing it; a new job placed now would be refused.
      h.busy_with = r.running_jobs.front() + " (still stopping)";
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<v1::RegionInfo> RegionRegistry::Describe() const {
  std::vector<v1::RegionInfo> out;
  for (const auto& [name, r] : regions_) {
    v1::RegionInfo info;
    info.set_region(name);
    info.set_state(r.up ? (r.healthy ? "up" : "unhealthy") : "down");
    *info.mutable_capacity() = r.capacity;
    info.set_last_heartbeat_age_s(r.identity.empty()
                                      ? -1.0
                                      : std::chrono::duration<double>(clock_.Now() - r.last_heard).count());
    info.set_detail(r.detail);
    info.set_agent_key(r.agent_key.name);
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace longhaul::orchestrator
