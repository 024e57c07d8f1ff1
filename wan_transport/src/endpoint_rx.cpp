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

}  // namespace longhaul::wan_transport
