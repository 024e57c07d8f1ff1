// Who may send what on the control plane (DESIGN.md "Roles"): a pure decision
// with its reason. Region messages (register, heartbeat, job ready/rejected,
// round and link reports, job facts) need an `agent` key, and one bound to
// regions may speak only for those; CLI requests need a `user` or `admin` key,
// and removing a region an `admin` key. A CLI user's key could otherwise
// register a region under an existing name and take its job assignments. Who
// may cancel a job (its owner or an admin) is AuthorizeJobControl's question.
#pragma once

#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::orchestrator {

// `role` null: the server runs without roles (--insecure); everything passes.
// kPermissionDenied naming the key, its role and the message otherwise.
Status AuthorizeControl(const v1::ControlMessage& msg, const wan_transport::KeyRole* role);

struct PeerKey;
// The job's owner or an admin (a job from before owners were recorded: anyone):
// who may cancel it and see its workers' output.
bool ManagesJob(const PeerKey& owner, const PeerKey& caller);
// Cancelling job `job_id` owned by `owner` (the submitter's key; empty: a job
// from before owners were recorded, anyone's): the owner or an admin.
Status AuthorizeJobControl(const std::string& job_id, const PeerKey& owner, const PeerKey& caller);

}  // namespace longhaul::orchestrator
