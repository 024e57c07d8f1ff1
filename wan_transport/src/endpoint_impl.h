// Private state of WanEndpoint: the I/O loop and send side (endpoint_io.cpp),
// the receive side (endpoint_rx.cpp) and the group side (endpoint_groups.cpp).
// Group links (wan_group.cpp) see only the GroupTransport interface; WanEndpoint
// forwards to the public operations below.
//
// Threading: only the I/O thread touches zmq sockets (except wake_tx_, which
// callers use under wake_mu_). Everything else is guarded by mu_; callers wait on cv_.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include <zmq.hpp>

#include "buffer_pool.h"
#include "group_transport.h"
#include "longhaul/wan_transport/chunking.h"
#include "longhaul/wan_transport/endpoint.h"
#include "wan_metrics.h"

namespace longhaul::wan_transport {

using SteadyTime = std::chrono::steady_clock::time_point;
// Probes (TensorChunkHeader.kind PROBE) reassemble under this group, apart
// from every round's: an empty job id, which no job has.
inline bool IsProbe(const v1::TensorChunkHeader& h) { return h.kind() == v1::CHUNK_KIND_PROBE; }

// One outgoing transfer, kept until the receiver acknowledges it.
struct OutTransfer {
  std::string peer_endpoint;
  std::string peer_key;
  int connections = 0;  // 0 = the endpoint's default
  // The bytes, shared with zero-copy zmq messages; released by the I/O thread
  // when the transfer is acknowledged, so that the buffer is back in the pool
  // before a sender woken by the ack asks for the next one.
  std::shared_ptr<const std::vector<std::byte>> data;
  uint64_t bytes = 0;  // data's size, kept after data is released
  v1::TensorChunkHeader base;                          // group/tag/sequence fields filled
  std::vector<ChunkSpan> chunks;
  size_t next_chunk = 0;
  std::deque<uint32_t> resend;
  SteadyTime start{};
  // Link measurement (link_matrix.h): the busy period it belongs to (0: none,
  // an explicit probe), whether its own ack marks the period's start, and the
  // 1-byte lead probe queued ahead of it when a larger transfer opens a period.
  uint64_t period = 0;
  bool marker = false;
  bool is_lead = false;
  bool opened_connection = false;  // its first chunk waited for a connection's handshakes: no round trip
  std::shared_ptr<OutTransfer> lead;
  std::atomic<bool> done{false};
  Status result;
  void SetData(std::shared_ptr<const std::vector<std::byte>> d) {
    bytes = d->size();
    data = std::move(d);
  }
  uint64_t size() const { return bytes; }
};

// One incoming transfer being reassembled.
struct InTransfer {
  std::unique_ptr<Reassembly> reassembly;
  std::map<uint32_t, int> resends;  // chunk -> times re-requested
  SteadyTime last_progress{};
  Status failed;  // not ok: the transfer is dead (Recv returns this)
};

// Incoming state of one group (job, epoch, round), created by the first frame or by Join.
struct GroupRx {
  // (sender rank, tag) -> sequence -> transfer
  std::map<std::pair<int, uint32_t>, std::map<uint32_t, InTransfer>> streams;
  std::map<std::pair<int, uint32_t>, uint32_t> next;  // (sender rank, tag) -> sequence the link receives next
};

class WanEndpoint::Impl final : public GroupTransport {
 public:
  explicit Impl(WanOptions options);
  ~Impl() override;
  Status Start(const std::string& bind_address);

  // ---- what WanEndpoint forwards to (same meaning as there) ----
  const std::string& endpoint() const { return endpoint_; }
  const WanOptions& options() const { return opt_; }
  LinkMatrix measurements() const { return estimator_.Snapshot(); }
  uint64_t rejected_connections() const { return zap_ ? zap_->rejected() : 0; }
  uint64_t dropped_frames() const { return dropped_.load(); }
  void CancelThrough(uint64_t epoch);
  // The endpoint-side checks of Join (cancelled or older epoch) and the
  // admission of the group's peer keys; the spec's own fields are checked by Join.
  Status PrepareJoin(const GroupSpec& spec);
  Status Flush(Deadline deadline);
  Result<LinkEstimate> Probe(const PeerSpec& peer, size_t probe_bytes, Deadline deadline);

  // ---- GroupTransport (endpoint_groups.cpp) ----
  void OpenGroup(const GroupKey& key) override;
  void CloseGroup(const GroupKey& key) override;
  std::vector<std::byte> TakeBuffer(size_t n) override { return pool_->Take(n); }
  void RecycleBuffer(std::vector<std::byte>&& buffer) override { pool_->Give(std::move(buffer)); }
  size_t max_message_bytes() const override { return opt_.max_message_bytes; }
  Status SendMessage(const GroupSpec& spec, int peer, uint32_t tag, uint32_t sequence, std::vector<std::byte>&& data,
                     Deadline deadline) override;
  Result<std::vector<std::byte>> ReceiveMessage(const GroupSpec& spec, int peer, uint32_t tag,
                                                Deadline deadline) override;

 private:
  // Queues a transfer (blocks for backpressure until deadline), behind a lead
  // probe when it opens a busy period on its link and is not small.
  Result<std::shared_ptr<OutTransfer>> Enqueue(std::shared_ptr<OutTransfer> t, Deadline deadline);
  // Waits until the transfer is acked (or fails, or the deadline passes).
  Status WaitAcked(const std::shared_ptr<OutTransfer>& t, Deadline deadline);
  uint64_t NextTransferId(int rank) { return (uint64_t(rank) << 40) | (++transfer_counter_ & ((uint64_t{1} << 40) - 1)); }
  void Wake();
  // Ends a transfer (and its lead probe) with mu_ held; the caller notifies cv_.
  void FinishLocked(const std::shared_ptr<OutTransfer>& t, Status s);
  // What guards chunk payloads on this endpoint's links (see Integrity).
  Integrity integrity() const { return opt_.encryption ? Integrity::kAuthenticatedLink : Integrity::kChecksum; }

  WanOptions opt_;
  WanMetrics metrics_;
  LinkEstimator estimator_;
  std::shared_ptr<BufferPool> pool_;  // transfer and reassembly buffers, reused
  std::string endpoint_;
  std::atomic<uint64_t> dropped_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<GroupKey, GroupRx> groups_;  // guarded by mu_
  std::set<GroupKey> closed_groups_;    // frames for these are dropped
  uint64_t newest_epoch_ = 0;           // frames with an older epoch are stale
  std::optional<uint64_t> cancelled_through_;  // groups of this epoch and older are cancelled
  bool Cancelled(uint64_t epoch) const { return cancelled_through_ && epoch <= *cancelled_through_; }
  Status CancelledError(const std::string& what) const {
    return Aborted(what + ": epoch " + std::to_string(*cancelled_through_) + " and older were cancelled (round aborted)");
  }
  uint64_t inflight_bytes_ = 0;
  std::deque<std::shared_ptr<OutTransfer>> submitted_;              // new, for the I/O thread
  std::map<uint64_t, std::shared_ptr<OutTransfer>> unacked_;       // by transfer_id

  const int io_threads_;  // see WanOptions::io_threads
  zmq::context_t ctx_;
  std::unique_ptr<ZapAuthenticator> zap_;

  struct PeerConn {
    std::vector<zmq::socket_t> dealers;
    std::vector<bool> used;  // per dealer: has sent (its connection is set up)
    size_t rr = 0;
  };
  int ConnectionsFor(const OutTransfer& t);
  void Loop();
  void DrainRouter();
  void HandleChunk(const zmq::message_t& id, const v1::TensorChunkHeader& h, const zmq::message_t& payload);
  void DrainDealer(zmq::socket_t& s, const std::string& peer);
  void HandleControl(const v1::ChunkControl& c, const std::string& peer);
  void SendControl(const zmq::message_t& id, v1::ChunkControl c);
  PeerConn& Conn(const OutTransfer& t);
  // Sends what pacing and socket buffers allow, passing over transfers whose
  // peer's connections are all full; returns ms until pacing allows more or a
  // full peer is worth trying again (0 = now, -1 = nothing left to send).
  int PumpSends();
  bool SendChunk(OutTransfer& t, uint32_t index);
  void Drop(const std::string& reason, const std::string& detail);
  void Finish(const std::shared_ptr<OutTransfer>& t, Status s);
  std::shared_ptr<OutTransfer> LeadProbeFor(const OutTransfer& t);

  zmq::socket_t router_;
  zmq::socket_t wake_rx_, wake_tx_;
  std::mutex wake_mu_;
  std::map<std::string, PeerConn> conns_;          // I/O thread only
  uint64_t dealers_made_ = 0;                      // I/O thread only: the next dealer's ZeroMQ I/O thread
  std::deque<std::shared_ptr<OutTransfer>> active_;  // I/O thread only: still has chunks to send
  double tokens_ = 0;
  SteadyTime last_refill_{};
  std::atomic<uint64_t> transfer_counter_{0};
  std::atomic<bool> stop_{false};
  std::thread io_;
};

}  // namespace longhaul::wan_transport
