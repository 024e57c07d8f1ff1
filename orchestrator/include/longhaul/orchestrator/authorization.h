// Who may send what on the control plane (DESIGN.md "Roles"): a pure decision
// with its reason. Region messages (register, heartbeat, job ready/rejected,
// round and link reports, job facts) need an `agent` key, and one bound to
// regions may speak only for those; CLI requests need a `user` key. A CLI user's
// key could otherwise register a region under an existing name and take its
// job assignments.
#pragma once

#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::orchestrator {

// `role` null: the server runs without roles (--insecure); everything passes.
// kPermissionDenied naming the key, its role and the message otherwise.
Status AuthorizeControl(const v1::ControlMessage& msg, const wan_transport::KeyRole* role);

}  // namespace longhaul::orchestrator
