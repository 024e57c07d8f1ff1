// AgentLink: a worker's control connection to its agent, as the Session sees
// it. The real one is AgentChannel (ZeroMQ, its own I/O thread); tests drive a
// Session through a fake and play the agent and orchestrator themselves.
//
// Every message from the agent is shown to the link's watcher first (on the
// link's thread, at once: the Session cancels its WAN exchange there when an
// ABORT or STOP arrives), then queued for Next().
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::session {

class AgentLink {
 public:
  using Watcher = std::function<void(const v1::ControlMessage&)>;
  virtual ~AgentLink() = default;
  virtual void Send(v1::ControlMessage msg) = 0;
  // The next message from the agent, waiting until `deadline`; nullopt on timeout.
  virtual std::optional<v1::ControlMessage> Next(Deadline deadline) = 0;
};

// Connects a link whose messages go to `watcher` first.
using AgentLinkFactory = std::function<Result<std::unique_ptr<AgentLink>>(AgentLink::Watcher watcher)>;

}  // namespace longhaul::session
