// The receive side of WanEndpoint: validating frames, dispatching chunks to their
// group, reassembly, acks and resend requests. Runs on the I/O thread.
#include <spdlog/spdlog.h>

#include "endpoint_impl.h"
#include "longhaul/proto/frame.h"

namespace longhaul::wan_transport {

void WanEndpoint::Impl::SendControl(const zmq::message_t& id, v1::ChunkControl c) {
  v1::DataFrame frame;
  *frame.mutable_control() = std::move(c);
  std::string bytes = proto::EncodeData(std::move(frame));
  zmq::message_t to(id.data(), id.size());
  try {
    if (router_.send(to, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      router_.send(zmq::buffer(bytes), zmq::send_flags::none);
    }
  } catch (const zmq::error_t& e) {
    spdlog::warn("wan {}: control reply failed: {}", endpoint_, e.what());
  }
}

void WanEndpoint::Impl::DrainRouter() {
  for (int n = 0; n < 1024; ++n) {
    std::vector<zmq::message_t> parts;
    zmq::message_t part;
    if (!router_.recv(part, zmq::recv_flags::dontwait)) return;
    parts.push_back(std::move(part));
    while (parts.back().more()) {
      zmq::message_t next;
      if (!router_.recv(next, zmq::recv_flags::dontwait)) break;
      parts.push_back(std::move(next));
      if (parts.size() > 8) {  // swallow the rest of an absurd message
        while (parts.back().more() && router_.recv(next, zmq::recv_flags::dontwait)) parts.back() = std::move(next);
        break;
      }
    }
    if (parts.size() != 3) {
      Drop("malformed", "expected header+payload frames, got " + std::to_string(parts.size() - 1) + " frames");
      continue;
    }
    auto frame = proto::DecodeData(parts[1].to_string_view());
    if (!frame.ok()) {
      Drop("malformed", frame.status().ToString());
      continue;
    }
    if (!frame->has_chunk()) {
      Drop("malformed", "data frame without a chunk header");
      continue;
    }
    HandleChunk(parts[0], frame->chunk(), parts[2]);
  }
}

void WanEndpoint::Impl::HandleChunk(const zmq::message_t& id, const v1::TensorChunkHeader& h, const zmq::message_t& payload) {
  const bool probe = IsProbe(h);
  if (!probe && h.job_id() != opt_.job_id) {
    return Drop("other job", "job '" + h.job_id() + "', this endpoint serves '" + opt_.job_id + "'");
  }
  if (h.total_bytes() > opt_.max_message_bytes) {
    return Drop("oversized", "transfer of " + std::to_string(h.total_bytes()) + " bytes > max_message_bytes");
  }
  if (h.chunk_count() == 0 || h.chunk_count() > h.total_bytes() + 1) {
    return Drop("malformed", "chunk_count " + std::to_string(h.chunk_count()) + " for " + std::to_string(h.total_bytes()) + " bytes");
  }
  std::span<const std::byte> bytes(static_cast<const std::byte*>(payload.data()), payload.size());
  v1::ChunkControl reply;
  reply.set_transfer_id(h.transfer_id());
  bool send_reply = false;
  {
    std::lock_guard lock(mu_);
    GroupKey key{probe ? std::string() : h.job_id(), h.epoch(), h.round()};
    if (!probe && h.epoch() < newest_epoch_) {
      return Drop("stale epoch", "epoch " + std::to_string(h.epoch()) + " < current " + std::to_string(newest_epoch_));
    }
    if (closed_groups_.count(key)) return Drop("closed group", "round " + std::to_string(h.round()) + " already left");
    auto& stream = groups_[key].streams[{static_cast<int>(h.shard()), h.step()}];
    auto it = stream.find(h.fragment());
    if (it == stream.end()) {
      InTransfer in;
      in.reassembly = std::make_unique<Reassembly>(h.total_bytes(), h.chunk_count(), pool_->Take(h.total_bytes()));
      in.last_progress = std::chrono::steady_clock::now();
      it = stream.emplace(h.fragment(), std::move(in)).first;
    }
    InTransfer& in = it->second;
    if (!in.failed.ok()) return;
    auto outcome = in.reassembly->Add(h, bytes, integrity());
    if (!outcome.ok()) {
      // A malformed first chunk must not leave a phantom transfer behind.
      if (in.reassembly->received_bytes() == 0 && in.resends.empty() && in.reassembly->chunk_count() > 0 &&
          !in.reassembly->complete()) {
        stream.erase(it);
      }
      Drop("malformed", outcome.status().message());
      return;
    }
    if (*outcome == Reassembly::Outcome::kBadChecksum) {
      int tries = ++in.resends[h.chunk_index()];
      spdlog::warn("wan {}: chunk {} of transfer {} from rank {} failed its checksum (attempt {})", endpoint_,
                   h.chunk_index(), h.transfer_id(), h.shard(), tries);
      if (tries > kMaxResends) {
        in.failed = DataLoss("chunk " + std::to_string(h.chunk_index()) + " from rank " + std::to_string(h.shard()) +
                             " failed its checksum " + std::to_string(tries) + " times");
        *reply.mutable_error() = proto::ToWireError(in.failed);
        if (probe) stream.erase(it);  // probes are never received: nothing waits for the failure
        cv_.notify_all();
      } else {
        reply.add_resend_chunks(h.chunk_index());
      }
      send_reply = true;
    } else if (*outcome == Reassembly::Outcome::kAccepted) {
      in.last_progress = std::chrono::steady_clock::now();
      if (in.reassembly->complete()) {
        reply.set_acked_bytes(h.total_bytes());
        send_reply = true;
        if (probe) stream.erase(it);  // probes are measured, never delivered
        cv_.notify_all();
      }
    }
  }
  if (send_reply) SendControl(id, std::move(reply));
}

void WanEndpoint::Impl::RegisterGroup(const GroupKey& key) {
  std::lock_guard lock(mu_);
  newest_epoch_ = std::max(newest_epoch_, std::get<1>(key));
  groups_[key];
  closed_groups_.erase(key);
  // Frames buffered for groups of older epochs can never be received now.
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (std::get<1>(it->first) < newest_epoch_ && !std::get<0>(it->first).empty()) it = groups_.erase(it);
    else ++it;
  }
}

void WanEndpoint::Impl::UnregisterGroup(const GroupKey& key) {
  std::lock_guard lock(mu_);
  groups_.erase(key);
  closed_groups_.insert(key);
  if (closed_groups_.size() > 1024) closed_groups_.erase(closed_groups_.begin());
  // Transfers of this group that were never acked will never be: release their window.
  std::vector<std::shared_ptr<OutTransfer>> left;
  for (const auto& [id, t] : unacked_) {
    if (GroupKey{t->base.job_id(), t->base.epoch(), t->base.round()} == key) left.push_back(t);
  }
  for (const auto& t : left) FinishLocked(t, Aborted("group left before the peer acknowledged"));
  cv_.notify_all();
}

// ---- public face ----

WanEndpoint::WanEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WanEndpoint::~WanEndpoint() = default;

Result<std::unique_ptr<WanEndpoint>> WanEndpoint::Bind(const std::string& bind_address, WanOptions options) {
  KeepMessageMemoryMapped();
  auto impl = std::make_unique<Impl>(std::move(options));
  LONGHAUL_RETURN_IF_ERROR(impl->Start(bind_address));
  return std::unique_ptr<WanEndpoint>(new WanEndpoint(std::move(impl)));
}

std::string WanEndpoint::endpoint() const { return impl_->endpoint_; }
const std::string& WanEndpoint::public_key() const { return impl_->opt_.keys.public_key; }
LinkMatrix WanEndpoint::measurements() const { return impl_->estimator_.Snapshot(); }
uint64_t WanEndpoint::rejected_connections() const { return impl_->zap_ ? impl_->zap_->rejected() : 0; }
uint64_t WanEndpoint::dropped_frames() const { return impl_->dropped_.load(); }

Status WanEndpoint::Flush(Deadline deadline) {
  std::unique_lock lock(impl_->mu_);
  if (!impl_->cv_.wait_until(lock, deadline, [&] { return impl_->unacked_.empty(); })) {
    return DeadlineExceeded(std::to_string(impl_->unacked_.size()) + " transfers (" + std::to_string(impl_->inflight_bytes_) +
                            " bytes) still unacknowledged");
  }
  return Status::Ok();
}

Result<ProbeResult> WanEndpoint::Probe(const PeerSpec& peer, size_t probe_bytes, Deadline deadline) {
  auto send = [&](size_t bytes) -> Result<double> {
    auto t = std::make_shared<OutTransfer>();
    t->peer_endpoint = peer.endpoint;
    t->peer_key = peer.public_key;
    t->SetData(std::make_shared<const std::vector<std::byte>>(bytes));
    t->base.set_kind(v1::CHUNK_KIND_PROBE);
    t->base.set_job_id(impl_->opt_.job_id);
    t->base.set_shard(0xFFFF);  // apart from the lead probes of rank-numbered senders
    t->base.set_transfer_id(impl_->NextTransferId(0xFFFF));
    t->base.set_fragment(static_cast<uint32_t>(t->base.transfer_id()));
    t->base.set_protocol_version(1);
    t->chunks = PlanChunks(bytes, impl_->opt_.chunk_bytes);
    auto began = std::chrono::steady_clock::now();
    LONGHAUL_ASSIGN_OR_RETURN(auto queued, impl_->Enqueue(t, deadline));
    LONGHAUL_RETURN_IF_ERROR(impl_->WaitAcked(queued, deadline).WithContext("probe of " + peer.endpoint));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  };
  ProbeResult r;
  r.rtt_seconds = 1e9;
  for (int i = 0; i < 5; ++i) {
    LONGHAUL_ASSIGN_OR_RETURN(double s, send(1));
    r.rtt_seconds = std::min(r.rtt_seconds, s);
  }
  if (probe_bytes > 0) {
    LONGHAUL_ASSIGN_OR_RETURN(double s, send(probe_bytes));
    double t = std::max(s - r.rtt_seconds, 1e-6);
    r.bandwidth_bytes_per_second = static_cast<double>(probe_bytes) / t;
  }
  impl_->estimator_.SetProbe(peer.endpoint, r.rtt_seconds, r.bandwidth_bytes_per_second);
  impl_->metrics_.Link(peer.endpoint, r.bandwidth_bytes_per_second, r.rtt_seconds);
  return r;
}

}  // namespace longhaul::wan_transport
