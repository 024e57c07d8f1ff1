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

// A worker's own address: `wan_host` as the agent gave it, or with "auto" the
// one on this host's route to `agent_endpoint` (a region spread over hosts).
Result<std::string> WorkerHost(const std::string& wan_host, const std::string& agent_endpoint);

// A TCP port nobody listens on right now on any address of this host (for
// torch.distributed's store, which binds every address: rank 0 binds it a
// moment later; until then the kernel may still hand it to another socket,
// a small window).
Result<int> FreeTcpPort();

// The name of this host's network interface that holds IPv4 `address` ("lo",
// "eth0"): what torch's GLOO_SOCKET_IFNAME wants. kNotFound when none does.
Result<std::string> InterfaceWithAddress(const std::string& address);

}  // namespace longhaul::session
