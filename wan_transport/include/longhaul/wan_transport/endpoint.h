// WanEndpoint: one worker's WAN data-plane listener, and the per-round groups
// (CollectiveLinks) built on it.
//
// Bind() starts one ROUTER listener (CURVE server + ZAP allowlist unless
// encryption is explicitly off) and one I/O thread that owns every socket. Join()
// builds a CollectiveLink for one round: peers in ring order, each reached over
// K parallel DEALER connections (CURVE clients) to its listener.
//
// Wire use of TensorChunkHeader (two ZMQ frames: proto::EncodeData(header), payload):
//   job_id/round/epoch  the group; other jobs and stale epochs are dropped and logged
//   shard               sender rank      step  tag      fragment  per-(sender, tag) sequence
//   transfer_id         sender-unique id (rank << 40 | counter)
// The receiver answers every completed transfer with ChunkControl{acked_bytes}, a
// bad checksum with ChunkControl{resend_chunks} (at most kMaxResends per chunk,
// then the transfer fails with kDataLoss), and a malformed frame with nothing.
// Unacked bytes count as in flight: Send blocks (up to its deadline) while more
// than max_inflight_bytes are unacknowledged. Pacing is a token bucket per endpoint.
// Transfers go out a chunk at a time in turn; one whose peer's connections are
// full waits while the others go on. A receiving connection queues at most 16 MiB
// of chunks inside ZeroMQ ahead of the I/O thread; beyond that TCP pushes back.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/sync_policies/link.h"
#include "longhaul/wan_transport/curve.h"
#include "longhaul/wan_transport/link_matrix.h"

namespace prometheus {
class Registry;
}

namespace longhaul::wan_transport {

inline constexpr int kMaxResends = 3;

struct WanOptions {
  std::string job_id;                 // frames of other jobs are dropped
  CurveKeyPair keys;                  // required when encryption is on
  Allowlist allowlist;                // client keys admitted by our listener
  // Also admit the public keys of each joined group's peers (Join's GroupSpec
  // comes from the authenticated control plane: the per-launch keys of the
  // round's participants). The allowlist may then start empty; a peer that
  // connects before our Join is held in its handshake for up to
  // timeouts.collective (see ZapAuthenticator).
  bool admit_group_peers = false;
  bool encryption = true;             // off only by this explicit flag
  int connections_per_peer = 0;       // 0 = from the measured bandwidth-delay product (default 4)
  // ZeroMQ I/O threads: each runs CURVE (encrypt, decrypt) for the connections
  // it owns, and the connections to peers are dealt to them in turn, so one
  // link's encryption uses several cores. 0 = the machine's hardware threads,
  // at least 2 and at most 4; at most 64.
  int io_threads = 0;
  size_t chunk_bytes = size_t{1} << 20;
  size_t max_inflight_bytes = size_t{64} << 20;
  size_t max_message_bytes = size_t{4} << 30;  // larger announced transfers are rejected
  double pacing_bytes_per_second = 0;          // 0 = unpaced
  size_t buffer_cache_bytes = size_t{512} << 20;  // finished transfer buffers kept for reuse
  Timeouts timeouts;                  // link_io: a transfer with no progress for this long fails
  prometheus::Registry* metrics = nullptr;
};

struct PeerSpec {
  std::string endpoint;    // "tcp://host:port" from the peer's WanEndpoint::endpoint()
  std::string public_key;  // the peer listener's CURVE public key (Z85)
};

struct GroupSpec {
  std::string job_id;
  uint32_t round = 0;
  uint64_t epoch = 0;
  int rank = 0;
  std::vector<PeerSpec> peers;  // ring order, including this rank (its entry is unused)
  // Parallel connections to each peer for this group's sends (the scheduler's
  // choice for the round); 0 = WanOptions::connections_per_peer. Connections
  // are kept per peer across groups and only ever added.
  int connections_per_peer = 0;
  // No call on the group's link waits past this (the round's deadline); a
  // call's own earlier deadline still applies.
  Deadline deadline = Deadline::max();
};

class WanEndpoint {
 public:
  // bind_address "host:port" (port 0 = any free port).
  static Result<std::unique_ptr<WanEndpoint>> Bind(const std::string& bind_address, WanOptions options);
  ~WanEndpoint();

  std::string endpoint() const;        // "tcp://127.0.0.1:PORT"
  const std::string& public_key() const;

  // A link for one round. The endpoint must outlive the link.
  Result<std::unique_ptr<sync_policies::CollectiveLink>> Join(const GroupSpec& spec);

  // Ends every group of epoch <= `epoch` now: a Recv or a send blocked in it
  // returns kAborted at once, and such an epoch can no longer be joined. For a
  // round the orchestrator aborted (a region died): the survivors stop waiting
  // on the dead peer instead of running into their deadline.
  void CancelThrough(uint64_t epoch);

  // Active probe: RTT from small round trips, bandwidth from timing probe_bytes.
  Result<LinkEstimate> Probe(const PeerSpec& peer, size_t probe_bytes, Deadline deadline);

  // Waits until every transfer sent so far is acknowledged (or failed/abandoned).
  Status Flush(Deadline deadline);

  // Per-peer bandwidth/RTT (probes and passive estimates from acked transfers).
  LinkMatrix measurements() const;
  uint64_t rejected_connections() const;
  uint64_t dropped_frames() const;  // malformed, stale, foreign

 private:
  class Impl;  // wan_transport/src/endpoint_impl.h; group links see only its GroupTransport side
  explicit WanEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Connections per link from the bandwidth-delay product, the one formula (the
// transport's own choice and the orchestrator's scheduler both use it): enough
// windows of window_bytes in flight to cover bandwidth * rtt, in
// [1, max_connections]; `unmeasured` while bandwidth or RTT is unknown.
int ConnectionsForBdp(double bandwidth_bytes_per_second, double rtt_seconds, size_t window_bytes = size_t{4} << 20,
                      int max_connections = 16, int unmeasured = 4);

}  // namespace longhaul::wan_transport
