#include "longhaul/orchestrator/membership.h"

#include <algorithm>
#include <map>

#include "longhaul/common/join.h"
#include "longhaul/orchestrator/job_spec.h"

namespace longhaul::orchestrator {
namespace {

std::string WhyNot(const RegionHealth& r, uint32_t workers_needed) {
  if (!r.up) return r.name + " missed " + std::to_string(r.missed_heartbeats) + " heartbeats";
  if (!r.healthy) return r.name + " is unhealthy" + (r.detail.empty() ? "" : " (" + r.detail + ")");
  if (!r.busy_with.empty()) return r.name + " is busy with " + r.busy_with;
  if (r.workers != 0 && r.workers < workers_needed)
    return r.name + " has " + std::to_string(r.workers) + " worker slots, job needs " + std::to_string(workers_needed);
  return "";
}

}  // namespace

JobPlacement PlaceJob(const v1::JobSpec& spec, const std::vector<RegionHealth>& regions) {
  JobPlacement out;
  const uint32_t need = RequiredRegions(spec);
  std::map<std::string, const RegionHealth*> by_name;
  for (const auto& r : regions) by_name[r.name] = &r;
  std::vector<std::string> problems;
  if (spec.regions_size() > 0) {
    for (const auto& name : spec.regions()) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        problems.push_back(name + " has not registered");
        continue;
      }
      std::string why = WhyNot(*it->second, spec.workers_per_region());
      if (why.empty()) out.regions.push_back(name);
      else problems.push_back(why);
    }
  } else {
    for (const auto& [name, r] : by_name) {
      std::string why = WhyNot(*r, spec.workers_per_region());
      if (!why.empty()) problems.push_back(why);
      else if (out.regions.size() < need) out.regions.push_back(name);
    }
  }
  const std::string have = "need " + std::to_string(need) + " regions, have " + std::to_string(out.regions.size()) +
                           " available";
  if (out.regions.size() < need) {
    out.regions.clear();
    out.reason = have + (problems.empty() ? std::string(" (no other region registered)") : ": " + Join(problems, "; "));
    return out;
  }
  out.ok = true;
  out.reason = "placed on " + Join(out.regions);
  return out;
}

std::string PlacementClass(const v1::JobSpec& spec) {
  std::string c = std::to_string(RequiredRegions(spec)) + "/" + std::to_string(spec.workers_per_region()) + "/";
  for (const auto& r : spec.regions()) c += r + ",";
  return c;
}

StartParameters CompareStartParameters(const std::vector<JobMemberView>& members, bool trust_hashes) {
  StartParameters out;
  std::vector<const JobMemberView*> ready;
  for (const auto& m : members)
    if (m.up && m.ready) ready.push_back(&m);
  if (ready.empty()) return out;
  auto holder = std::find_if(ready.begin(), ready.end(), [](const JobMemberView* m) { return m->holds_state; });
  const JobMemberView& reference = holder != ready.end() ? **holder : *ready.front();
  out.reference = reference.region;
  std::vector<std::string> others;
  for (const auto* m : ready) {
    if (m == &reference || !m->holds_state) continue;
    if (trust_hashes) {
      if (m->start_hash.empty() || reference.start_hash.empty()) {
        out.differing.clear();
        return out;
      }
      if (m->start_hash == reference.start_hash) continue;
    }
    out.differing.push_back(m->region);
    others.push_back(m->region + " from " + m->start_hash);
  }
  if (out.differing.empty()) return out;
  const char* receive = out.differing.size() == 1 ? " receives " : " receive ";
  const std::string who = Join(out.differing) + receive + reference.region + "'s at round 1";
  if (!trust_hashes) {
    out.reason = "round 1 failed on disagreeing hashes, so start hashes are not trusted: " + who;
    return out;
  }
  out.reason = "regions start from different parameters: " + reference.region + " from " + reference.start_hash +
               ", " + Join(others, ", ") + "; " + who +
               " (seed the model alike in every region to save the transfer)";
  return out;
}

std::string ChooseCheckpointSource(const std::vector<JobMemberView>& members,
                                   const std::map<std::string, std::string>& checkpoints,
                                   const std::set<std::string>& refused) {
  for (const auto& m : members)
    if (m.holds_state) return "";
  for (const auto& m : members)
    if (m.up && checkpoints.count(m.region) && !refused.count(m.region)) return m.region;
  return "";
}

RoundMembership PlanRoundMembership(const std::vector<JobMemberView>& members, uint32_t min_regions) {
  RoundMembership out;
  std::vector<std::string> problems;
  for (const auto& m : members) {
    if (!m.up) {
      problems.push_back(m.region + " is down (missed " + std::to_string(m.missed_heartbeats) + " heartbeats)");
      continue;
    }
    if (!m.ready) {
      problems.push_back(m.region + " is not ready" + (m.detail.empty() ? "" : " (" + m.detail + ")"));
      continue;
    }
    out.participants.push_back(m.region);
    if (m.holds_state) {
      if (out.bootstrap_region.empty()) out.bootstrap_region = m.region;
    } else {
      out.joining.push_back(m.region);
    }
  }
  const std::string tail = problems.empty() ? "" : ": " + Join(problems, "; ");
  if (out.participants.size() < min_regions) {
    out.reason = "need " + std::to_string(min_regions) + " regions, have " + std::to_string(out.participants.size()) +
                 " ready" + tail;
    out.participants.clear();
    out.joining.clear();
    out.bootstrap_region.clear();
    return out;
  }
  if (out.bootstrap_region.empty()) {
    out.reason = "no ready region holds the last committed parameters" + tail;
    out.participants.clear();
    out.joining.clear();
    return out;
  }
  if (out.joining.empty()) out.bootstrap_region.clear();
  out.ok = true;
  out.reason = std::to_string(out.participants.size()) + " participants: " + Join(out.participants) +
               (out.joining.empty() ? "" : "; joining " + Join(out.joining) + " from " + out.bootstrap_region) + tail;
  return out;
}

}  // namespace longhaul::orchestrator
