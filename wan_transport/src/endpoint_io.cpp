// The WanEndpoint I/O thread: listener setup, the poll loop, paced chunk sending
// over K connections per peer, and acks/resend requests coming back.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>

#include "endpoint_impl.h"
#include "longhaul/proto/frame.h"

namespace longhaul::wan_transport {

namespace {

// What one connection may queue inside ZeroMQ ahead of the I/O thread: 16
// chunks of the default 1 MiB (at least 2 chunks). Beyond it ZeroMQ stops
// reading that connection and TCP pushes back on its sender, instead of holding
// whatever arrives faster than the I/O thread checks and copies it in freshly
// faulted heap.
constexpr size_t kReceiveQueueBytes = size_t{16} << 20;

int ReceiveQueueChunks(size_t chunk_bytes) {
  return static_cast<int>(std::clamp<size_t>(kReceiveQueueBytes / chunk_bytes, 2, 4096));
}

int IoThreads(const WanOptions& o) {
  if (o.io_threads > 0) return std::min(o.io_threads, 64);  // ZMQ_AFFINITY is a 64-bit mask
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 2u, 4u));
}

}  // namespace

WanEndpoint::Impl::Impl(WanOptions options)
    : opt_(std::move(options)),
      metrics_(opt_.metrics),
      pool_(BufferPool::Create(opt_.buffer_cache_bytes)),
      io_threads_(IoThreads(opt_)),
      ctx_(io_threads_),
      router_(ctx_, zmq::socket_type::router),
      wake_rx_(ctx_, zmq::socket_type::pair), wake_tx_(ctx_, zmq::socket_type::pair) {}

WanEndpoint::Impl::~Impl() {
  stop_ = true;
  Wake();
  if (io_.joinable()) io_.join();
  conns_.clear();
  router_.close();
  wake_rx_.close();
  wake_tx_.close();
  zap_.reset();
}

Status WanEndpoint::Impl::Start(const std::string& bind_address) {
  if (opt_.chunk_bytes == 0 || opt_.chunk_bytes > (size_t{256} << 20)) {
    return InvalidArgument("chunk_bytes must be in (0, 256 MiB], got " + std::to_string(opt_.chunk_bytes));
  }
  if (opt_.encryption) {
    LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(opt_.keys.public_key, "WanOptions.keys.public_key"));
    LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(opt_.keys.secret_key, "WanOptions.keys.secret_key"));
    if (opt_.allowlist.size() == 0 && !opt_.admit_group_peers) {
      return InvalidArgument("WanOptions.allowlist is empty and admit_group_peers is off: no peer could connect");
    }
    const auto admit_wait = opt_.admit_group_peers
                                ? std::chrono::duration_cast<std::chrono::milliseconds>(opt_.timeouts.collective)
                                : std::chrono::milliseconds(0);
    LONGHAUL_ASSIGN_OR_RETURN(zap_, ZapAuthenticator::Start(ctx_, opt_.allowlist, admit_wait));
  }
  try {
    router_.set(zmq::sockopt::linger, 0);
    // Oversized frames make libzmq drop the connection before we ever see them.
    router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(std::max(opt_.chunk_bytes, size_t{16} << 20) + (64 << 10)));
    router_.set(zmq::sockopt::rcvhwm, ReceiveQueueChunks(opt_.chunk_bytes));
    if (opt_.encryption) MakeCurveServer(router_, opt_.keys);
    // A held handshake (admit_group_peers) must outlast its admission wait.
    if (opt_.admit_group_peers) {
      router_.set(zmq::sockopt::handshake_ivl,
                  static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(opt_.timeouts.collective).count()) + 5000);
    }
    router_.bind("tcp://" + bind_address);
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    std::string wake = "inproc://wan-wake-" + std::to_string(reinterpret_cast<uintptr_t>(this));
    wake_rx_.bind(wake);
    wake_tx_.connect(wake);
  } catch (const zmq::error_t& e) {
    return Unavailable("cannot listen on tcp://" + bind_address + ": " + e.what());
  }
  last_refill_ = std::chrono::steady_clock::now();
  io_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void WanEndpoint::Impl::Wake() {
  std::lock_guard lock(wake_mu_);
  try {
    wake_tx_.send(zmq::message_t(), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
  }
}

void WanEndpoint::Impl::Drop(const std::string& reason, const std::string& detail) {
  ++dropped_;
  metrics_.FrameDropped(reason);
  spdlog::warn("wan {}: dropped frame ({}): {}", endpoint_, reason, detail);
}

int WanEndpoint::Impl::ConnectionsFor(const OutTransfer& t) {
  if (t.connections > 0) return t.connections;
  if (opt_.connections_per_peer > 0) return opt_.connections_per_peer;
  LinkEstimate e = estimator_.Get(t.peer_endpoint);
  return ConnectionsForBdp(e.bytes_per_second, e.rtt_seconds);
}

// A peer's connections open on its first send; a later group that asks for
// more adds them (none is closed: chunks may be in flight on each).
WanEndpoint::Impl::PeerConn& WanEndpoint::Impl::Conn(const OutTransfer& t) {
  auto it = conns_.find(t.peer_endpoint);
  if (it != conns_.end() && (t.connections <= 0 || it->second.dealers.size() >= static_cast<size_t>(t.connections)))
    return it->second;
  const size_t k = static_cast<size_t>(std::max(1, ConnectionsFor(t)));
  PeerConn& c = conns_[t.peer_endpoint];
  while (c.dealers.size() < k) {
    zmq::socket_t s(ctx_, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::sndhwm, 64);
    s.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(proto::kMaxDataHeaderBytes));
    // Dealt to the I/O threads in turn: without it ZeroMQ picked by load and
    // one thread ran 3x the other's CURVE work for a 4-connection link.
    s.set(zmq::sockopt::affinity, uint64_t{1} << (dealers_made_++ % static_cast<uint64_t>(io_threads_)));
    if (opt_.encryption) MakeCurveClient(s, opt_.keys, t.peer_key);
    s.connect(t.peer_endpoint);
    c.dealers.push_back(std::move(s));
    c.used.push_back(false);
  }
  metrics_.Connections(t.peer_endpoint, c.dealers.size());
  return c;
}

bool WanEndpoint::Impl::SendChunk(OutTransfer& t, uint32_t index) {
  PeerConn& c = Conn(t);
  const ChunkSpan& span = t.chunks[index];
  v1::DataFrame frame;
  v1::TensorChunkHeader* h = frame.mutable_chunk();
  *h = t.base;
  std::span<const std::byte> payload(t.data->data() + span.offset, span.length);
  FillChunkHeader(span, t.size(), static_cast<uint32_t>(t.chunks.size()), payload, h, integrity());
  std::string header = proto::EncodeData(std::move(frame));
  for (size_t attempt = 0; attempt < c.dealers.size(); ++attempt) {
    const size_t d = c.rr++ % c.dealers.size();
    zmq::socket_t& s = c.dealers[d];
    // Taken before the send: ZeroMQ's I/O thread may put the bytes on the wire
    // before this thread runs again, and a round trip must not read short.
    const SteadyTime sent_at = std::chrono::steady_clock::now();
    if (!s.send(zmq::buffer(header), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) continue;
    if (!c.used[d]) {
      c.used[d] = true;
      if (index == 0) t.opened_connection = true;
    }
    // Zero copy: the message references the retained transfer buffer, which it keeps alive.
    auto* keep = new std::shared_ptr<const std::vector<std::byte>>(t.data);
    zmq::message_t body(const_cast<std::byte*>(payload.data()), payload.size(),
                        [](void*, void* hint) { delete static_cast<std::shared_ptr<const std::vector<std::byte>>*>(hint); },
                        keep);
    s.send(body, zmq::send_flags::none);  // the rest of a multipart message always goes
    if (t.start == SteadyTime{}) t.start = sent_at;
    tokens_ -= static_cast<double>(span.length);
    return true;
  }
  return false;  // every connection is full; try again later
}

int WanEndpoint::Impl::PumpSends() {
  {
    std::lock_guard lock(mu_);
    while (!submitted_.empty()) {
      active_.push_back(std::move(submitted_.front()));
      submitted_.pop_front();
    }
  }
  double rate = opt_.pacing_bytes_per_second;
  // A peer whose connections are full waits; transfers to the other peers go on.
  std::set<std::string> full;
  size_t passed = 0;  // transfers put back in a row because their peer is full
  for (int budget = 256; budget > 0 && passed < active_.size(); --budget) {
    if (rate > 0) {
      auto now = std::chrono::steady_clock::now();
      double burst = std::max(static_cast<double>(opt_.chunk_bytes), rate * 0.01);
      tokens_ = std::min(burst, tokens_ + rate * std::chrono::duration<double>(now - last_refill_).count());
      last_refill_ = now;
      if (tokens_ < 0) return std::max(1, static_cast<int>(-tokens_ / rate * 1000));
    }
    std::shared_ptr<OutTransfer> t = active_.front();
    active_.pop_front();
    if (t->done) continue;
    bool has_resend = !t->resend.empty();
    if (!has_resend && t->next_chunk >= t->chunks.size()) continue;  // all sent; waits for ack
    uint32_t index = has_resend ? t->resend.front() : static_cast<uint32_t>(t->next_chunk);
    if (full.count(t->peer_endpoint) > 0 || !SendChunk(*t, index)) {
      full.insert(t->peer_endpoint);
      active_.push_back(t);
      ++passed;
      continue;
    }
    passed = 0;
    if (has_resend) t->resend.pop_front();
    else ++t->next_chunk;
    active_.push_back(t);  // round-robin among transfers
  }
  if (active_.empty()) return -1;
  return passed >= active_.size() ? 1 : 0;  // every transfer waits on a full peer: poll briefly
}

namespace {
double Seconds(SteadyTime t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }
}  // namespace

void WanEndpoint::Impl::FinishLocked(const std::shared_ptr<OutTransfer>& t, Status s) {
  if (t->done) return;
  const bool failed = !s.ok();
  t->done = true;
  t->result = std::move(s);
  inflight_bytes_ -= t->size();
  unacked_.erase(t->base.transfer_id());
  if (failed && t->period != 0 && !t->is_lead) {
    estimator_.Done(t->peer_endpoint, t->period, t->size(), false, Seconds(std::chrono::steady_clock::now()));
  }
  if (t->lead) FinishLocked(t->lead, Aborted("the transfer it leads has ended"));  // no-op once acked
}

void WanEndpoint::Impl::Finish(const std::shared_ptr<OutTransfer>& t, Status s) {
  std::lock_guard lock(mu_);
  FinishLocked(t, std::move(s));
  cv_.notify_all();
}

void WanEndpoint::Impl::HandleControl(const v1::ChunkControl& c, const std::string& peer) {
  std::shared_ptr<OutTransfer> t;
  {
    std::lock_guard lock(mu_);
    auto it = unacked_.find(c.transfer_id());
    if (it == unacked_.end()) return;  // late duplicate ack
    t = it->second;
  }
  if (t->peer_endpoint != peer) return Drop("control from wrong peer", peer);
  if (c.has_error() && c.error().code() != 0) {
    Finish(t, proto::FromWireError(c.error()).WithContext("peer " + peer + " failed transfer " + std::to_string(c.transfer_id())));
    return;
  }
  for (uint32_t i : c.resend_chunks()) {
    if (i >= t->chunks.size()) return Drop("bad resend index", peer);
    t->resend.push_back(i);
  }
  if (!c.resend_chunks().empty()) {
    active_.push_back(t);
    return;
  }
  if (c.acked_bytes() == t->size()) {
    const SteadyTime now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - t->start).count();
    // Under mu_ and only while not done: a group left meanwhile (UnregisterGroup)
    // has counted the transfer out of its period already.
    std::lock_guard lock(mu_);
    if (t->done) return;
    if (t->period != 0) {  // not an explicit probe: Probe() measures those itself
      if (t->is_lead || t->marker) {
        estimator_.MarkerAcked(peer, t->period, Seconds(t->start), Seconds(now), t->opened_connection);
      } else if (t->size() < LinkEstimator::kRttSampleMaxBytes && !t->opened_connection) {
        estimator_.AddRtt(peer, secs);
      }
      if (!t->is_lead) {
        estimator_.Done(peer, t->period, t->marker ? 0 : t->size(), true, Seconds(now));
        LinkEstimate e = estimator_.Get(peer);
        metrics_.Link(peer, e.bytes_per_second, e.rtt_seconds);
        metrics_.TransferDone(secs);
      }
    }
    t->data.reset();  // this thread alone sends chunks; an acked transfer sends none again
    FinishLocked(t, Status::Ok());
    cv_.notify_all();
  }
}

void WanEndpoint::Impl::DrainDealer(zmq::socket_t& s, const std::string& peer) {
  for (int n = 0; n < 1024; ++n) {
    zmq::message_t msg;
    if (!s.recv(msg, zmq::recv_flags::dontwait)) return;
    bool extra = msg.more();
    while (msg.more()) {  // discard unexpected extra parts
      zmq::message_t rest;
      if (!s.recv(rest, zmq::recv_flags::dontwait)) break;
      if (!rest.more()) break;
    }
    if (extra) {
      Drop("malformed control", peer + ": multipart control frame");
      continue;
    }
    auto frame = proto::DecodeData(msg.to_string_view());
    if (!frame.ok() || !frame->has_control()) {
      Drop("malformed control", peer + ": " + (frame.ok() ? "not a ChunkControl" : frame.status().ToString()));
      continue;
    }
    HandleControl(frame->control(), peer);
  }
}

void WanEndpoint::Impl::Loop() {
  std::vector<zmq::pollitem_t> items;
  std::vector<std::pair<zmq::socket_t*, std::string>> dealers;
  while (!stop_) {
    int wait_ms = PumpSends();
    items.clear();
    dealers.clear();
    items.push_back({router_.handle(), 0, ZMQ_POLLIN, 0});
    items.push_back({wake_rx_.handle(), 0, ZMQ_POLLIN, 0});
    for (auto& [peer, conn] : conns_) {
      for (auto& s : conn.dealers) {
        items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
        dealers.emplace_back(&s, peer);
      }
    }
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(wait_ms < 0 ? 100 : wait_ms));
      if (items[0].revents & ZMQ_POLLIN) DrainRouter();
      if (items[1].revents & ZMQ_POLLIN) {
        zmq::message_t m;
        while (wake_rx_.recv(m, zmq::recv_flags::dontwait)) {
        }
      }
      for (size_t i = 0; i < dealers.size(); ++i) {
        if (items[i + 2].revents & ZMQ_POLLIN) DrainDealer(*dealers[i].first, dealers[i].second);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("wan {}: I/O loop: {}", endpoint_, e.what());
    }
  }
}

std::shared_ptr<OutTransfer> WanEndpoint::Impl::LeadProbeFor(const OutTransfer& t) {
  static const auto kOneByte = std::make_shared<const std::vector<std::byte>>(1);
  auto lead = std::make_shared<OutTransfer>();
  lead->peer_endpoint = t.peer_endpoint;
  lead->peer_key = t.peer_key;
  lead->connections = t.connections;
  lead->SetData(kOneByte);
  lead->period = t.period;
  lead->is_lead = true;
  // The receiver acks and drops probes (endpoint_rx.cpp), never delivers them;
  // the sender's rank keeps its probes apart from other senders'.
  lead->base.set_protocol_version(1);
  lead->base.set_kind(v1::CHUNK_KIND_PROBE);
  lead->base.set_job_id(opt_.job_id);
  lead->base.set_shard(t.base.shard());
  lead->base.set_transfer_id(NextTransferId(static_cast<int>(t.base.shard())));
  lead->base.set_fragment(static_cast<uint32_t>(lead->base.transfer_id()));
  lead->chunks = PlanChunks(1, opt_.chunk_bytes);
  return lead;
}

Result<std::shared_ptr<OutTransfer>> WanEndpoint::Impl::Enqueue(std::shared_ptr<OutTransfer> t, Deadline deadline) {
  {
    std::unique_lock lock(mu_);
    // One message larger than the window may go when nothing else is in flight.
    // Probes belong to no round: only round transfers are cancelled.
    const bool probe = IsProbe(t->base);
    auto cancelled = [&] { return !probe && Cancelled(t->base.epoch()); };
    bool ok = cv_.wait_until(lock, deadline, [&] {
      return cancelled() || inflight_bytes_ == 0 || inflight_bytes_ + t->size() <= opt_.max_inflight_bytes;
    });
    if (cancelled()) return CancelledError("send to " + t->peer_endpoint);
    if (!ok) {
      return DeadlineExceeded("send to " + t->peer_endpoint + ": " + std::to_string(inflight_bytes_) +
                              " bytes still unacknowledged (max_inflight_bytes " + std::to_string(opt_.max_inflight_bytes) + ")");
    }
    if (!probe) {
      const LinkEstimator::Ticket ticket = estimator_.Queued(t->peer_endpoint);
      t->period = ticket.period;
      if (ticket.opens && t->size() < LinkEstimator::kRttSampleMaxBytes) t->marker = true;
      if (ticket.opens && !t->marker) {
        t->lead = LeadProbeFor(*t);
        inflight_bytes_ += t->lead->size();
        unacked_[t->lead->base.transfer_id()] = t->lead;
        submitted_.push_back(t->lead);
      }
    }
    inflight_bytes_ += t->size();
    unacked_[t->base.transfer_id()] = t;
    submitted_.push_back(t);
  }
  metrics_.BytesSent(t->peer_endpoint, static_cast<double>(t->size()));
  Wake();
  return t;
}

Status WanEndpoint::Impl::WaitAcked(const std::shared_ptr<OutTransfer>& t, Deadline deadline) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return t->done.load(); })) {
    return DeadlineExceeded("no acknowledgement from " + t->peer_endpoint + " for transfer " + std::to_string(t->base.transfer_id()));
  }
  return t->result;
}

Status WanEndpoint::Impl::Flush(Deadline deadline) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return unacked_.empty(); })) {
    return DeadlineExceeded(std::to_string(unacked_.size()) + " transfers (" + std::to_string(inflight_bytes_) +
                            " bytes) still unacknowledged");
  }
  return Status::Ok();
}

Result<LinkEstimate> WanEndpoint::Impl::Probe(const PeerSpec& peer, size_t probe_bytes, Deadline deadline) {
  auto send = [&](size_t bytes) -> Result<double> {
    auto t = std::make_shared<OutTransfer>();
    t->peer_endpoint = peer.endpoint;
    t->peer_key = peer.public_key;
    t->SetData(std::make_shared<const std::vector<std::byte>>(bytes));
    t->base.set_kind(v1::CHUNK_KIND_PROBE);
    t->base.set_job_id(opt_.job_id);
    t->base.set_shard(0xFFFF);  // apart from the lead probes of rank-numbered senders
    t->base.set_transfer_id(NextTransferId(0xFFFF));
    t->base.set_fragment(static_cast<uint32_t>(t->base.transfer_id()));
    t->base.set_protocol_version(1);
    t->chunks = PlanChunks(bytes, opt_.chunk_bytes);
    auto began = std::chrono::steady_clock::now();
    LONGHAUL_ASSIGN_OR_RETURN(auto queued, Enqueue(t, deadline));
    LONGHAUL_RETURN_IF_ERROR(WaitAcked(queued, deadline).WithContext("probe of " + peer.endpoint));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  };
  LinkEstimate r;
  r.rtt_seconds = 1e9;
  for (int i = 0; i < 5; ++i) {
    LONGHAUL_ASSIGN_OR_RETURN(double s, send(1));
    r.rtt_seconds = std::min(r.rtt_seconds, s);
  }
  if (probe_bytes > 0) {
    LONGHAUL_ASSIGN_OR_RETURN(double s, send(probe_bytes));
    double t = std::max(s - r.rtt_seconds, 1e-6);
    r.bytes_per_second = static_cast<double>(probe_bytes) / t;
  }
  estimator_.SetProbe(peer.endpoint, r.rtt_seconds, r.bytes_per_second);
  metrics_.Link(peer.endpoint, r.bytes_per_second, r.rtt_seconds);
  return r;
}

}  // namespace longhaul::wan_transport
