#include "longhaul/orchestrator/authorization.h"

#include <algorithm>

#include "job_spec_limits.h"
#include "longhaul/orchestrator/region_registry.h"
#include "longhaul/proto/frame.h"

namespace longhaul::orchestrator {
namespace {

// The region a region-protocol message speaks for; nullptr for CLI requests.
const std::string* RegionOf(const v1::ControlMessage& m) {
  switch (m.body_case()) {
    case v1::ControlMessage::kRegisterRegion: return &m.register_region().region();
    case v1::ControlMessage::kHeartbeat: return &m.heartbeat().region();
    case v1::ControlMessage::kJobReady: return &m.job_ready().region();
    case v1::ControlMessage::kJobRejected: return &m.job_rejected().region();
    case v1::ControlMessage::kRoundReport: return &m.round_report().region();
    case v1::ControlMessage::kLinkReport: return &m.link_report().region();
    case v1::ControlMessage::kJobFacts: return &m.job_facts().region();
    default: return nullptr;
  }
}

}  // namespace

Status AuthorizeControl(const v1::ControlMessage& msg, const wan_transport::KeyRole* role) {
  if (role == nullptr) return Status::Ok();
  const std::string what(proto::BodyName(msg));
  const std::string* region = RegionOf(msg);
  const bool agent = role->kind == wan_transport::KeyRole::Kind::kAgent;
  if (region != nullptr) {
    if (!agent) {
      const char* kind = role->kind == wan_transport::KeyRole::Kind::kAdmin ? "an admin" : "a user";
      return PermissionDenied("key '" + role->name + "' is " + kind + " key; " + what + " needs an agent key");
    }
    if (!role->regions.empty() && std::find(role->regions.begin(), role->regions.end(), *region) == role->regions.end()) {
      return PermissionDenied("agent key '" + role->name + "' may not speak for region " +
                              spec_limits::ShortQuote(*region) + " (" + what + ")");
    }
    return Status::Ok();
  }
  if (agent) return PermissionDenied("key '" + role->name + "' is an agent key; " + what + " needs a user key");
  if (msg.has_remove_region() && role->kind != wan_transport::KeyRole::Kind::kAdmin)
    return PermissionDenied("key '" + role->name + "' is a user key; " + what + " needs an admin key");
  return Status::Ok();
}

bool ManagesJob(const PeerKey& owner, const PeerKey& caller) {
  return caller.admin || owner.public_key.empty() || owner.public_key == caller.public_key;
}

Status AuthorizeJobControl(const std::string& job_id, const PeerKey& owner, const PeerKey& caller) {
  if (ManagesJob(owner, caller)) return Status::Ok();
  return PermissionDenied(job_id + " belongs to key '" + owner.name + "'; only its owner or an admin key (here: '" +
                          caller.name + "') may cancel it");
}

}  // namespace longhaul::orchestrator
