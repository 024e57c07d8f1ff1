// Timeouts on the wire (v1::Timeouts): the orchestrator owns the hierarchy and
// sends it with every registration reply and assignment.
#pragma once

#include "longhaul/common/timeouts.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::proto {

v1::Timeouts TimeoutsToWire(const Timeouts& t);
// The timeouts a message carries, validated (Timeouts::Validate); `what` names
// the message in errors ("assignment timeouts: ...").
Result<Timeouts> TimeoutsFromWire(const v1::Timeouts& w, const std::string& what);

}  // namespace longhaul::proto
