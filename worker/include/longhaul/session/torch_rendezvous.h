// torch.distributed's rendezvous point (MASTER_ADDR, MASTER_PORT) for a launch
// whose workers may run on different hosts, as in a Slurm step over several
// nodes. Rank 0 binds torch's store there, so the agent's own host is no use
// unless rank 0 runs on it. Rank 0 takes its own address (the agent's data
// host, or with "auto" its address on the route to the agent) and a free port
// on it, and puts "ADDR:PORT" into the launch's store (the agent's, reached
// with the rank's token). Every other rank reads it from there. Each rank also
// names the interface that holds its own address, for GLOO_SOCKET_IFNAME: torch's gloo
// otherwise binds what the host name resolves to, which on many hosts is loopback
// (none when the data host is a name rather than an address).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/session/session_options.h"

namespace longhaul::session {

inline constexpr const char* kTorchMasterStoreKey = "longhaul/torch-master";

struct TorchRendezvous {
  std::string master_addr;
  int master_port = 0;
  std::string gloo_interface;  // of this rank's own address; "" when it is not an address of this host
};

// Rank 0 publishes, the others wait for it up to options.collective_timeout.
// An error names the step (store, own address, interface) that failed.
Result<TorchRendezvous> AgreeTorchRendezvous(const SessionOptions& options);

// "ADDR:PORT" <-> TorchRendezvous's master (an error names the bad value).
std::string MasterToText(const TorchRendezvous& r);
Status MasterFromText(const std::string& text, TorchRendezvous* r);

}  // namespace longhaul::session
