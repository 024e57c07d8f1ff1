// Which address of this host a worker binds on when its agent says "auto"
// (LONGHAUL_WAN_HOST=auto: a region spread over several hosts, each worker on
// its own): the source address the kernel picks for packets to the agent.
#pragma once

#include <string>

#include "longhaul/common/status.h"

namespace longhaul::session {

inline constexpr const char* kAutoHost = "auto";

// "tcp://HOST:PORT" (HOST an IPv4 address or a name) -> this host's IPv4
// address on the route to HOST. No packet is sent (a UDP socket is connected,
// then asked for its local address). An error names the endpoint.
Result<std::string> LocalAddressToward(const std::string& endpoint);

}  // namespace longhaul::session
