// WanPort: a worker's end of the WAN data plane, as the round needs it: one
// listener bound for the life of the job (its endpoint is advertised in
// JobReady), and per round a group of this worker's peers (worker i of every
// participating region, ring order) as a sync_policies::CollectiveLink.
// The ZeroMQ implementation is wan_transport's; tests may use an in-process one.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/sync_policies/link.h"
#include "longhaul/sync_policies/link_estimate.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::worker {

struct WanPeer {
  std::string region;
  std::string endpoint;    // tcp://host:port
  std::string public_key;  // its launch's CURVE key (Z85): dialled as server key, admitted as client
};

class WanPort {
 public:
  virtual ~WanPort() = default;
  // "tcp://host:port" peers connect to.
  virtual std::string endpoint() const = 0;
  // The round's group: `peers` in ring order (own entry included at `rank`),
  // `connections_per_peer` parallel connections to each (0 = the port's own
  // choice from the bandwidth-delay product).
  virtual Result<std::unique_ptr<sync_policies::CollectiveLink>> Join(const std::vector<WanPeer>& peers, int rank,
                                                                      uint32_t round, uint64_t epoch,
                                                                      int connections_per_peer, Deadline deadline) = 0;
  // Ends the groups of epoch <= `epoch` now (their blocked sends and receives
  // return kAborted): the orchestrator aborted that round.
  virtual void CancelThrough(uint64_t epoch) = 0;
  // Passive estimates from real transfers so far, by peer endpoint.
  virtual std::map<std::string, sync_policies::LinkEstimate> measurements() const = 0;
};

// CURVE on the data plane: the listener is a CURVE server with this launch's
// key pair (made by the agent for this launch only). It admits only the keys
// of the peers of the groups it joined (ZAP); those keys, like the peers'
// endpoints, come from the orchestrator with each round's START.
struct WanPortOptions {
  std::string job_id;
  std::string host = "127.0.0.1";
  bool insecure = false;
  wan_transport::CurveKeyPair keys;  // this launch's key pair (unless insecure)
  Duration link_io{std::chrono::seconds(10)};
  Duration collective{std::chrono::seconds(60)};  // how long a peer may wait to be admitted
};

// Binds a ZeroMQ (CURVE unless insecure) WAN listener on host:0.
Result<std::unique_ptr<WanPort>> BindWanPort(const WanPortOptions& options);

}  // namespace longhaul::worker
