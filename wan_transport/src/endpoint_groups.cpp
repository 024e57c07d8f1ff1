// The group side of WanEndpoint::Impl (its GroupTransport): groups opened and
// closed by their links, a group's messages queued as transfers, the next
// message of a (peer, tag) stream waited for in sequence, and cancellation of
// whole epochs.
#include <spdlog/spdlog.h>

#include "endpoint_impl.h"

namespace longhaul::wan_transport {

void WanEndpoint::Impl::OpenGroup(const GroupKey& key) {
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

void WanEndpoint::Impl::CloseGroup(const GroupKey& key) {
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

Status WanEndpoint::Impl::SendMessage(const GroupSpec& spec, int peer, uint32_t tag, uint32_t sequence,
                                      std::vector<std::byte>&& data, Deadline deadline) {
  const size_t size = data.size();
  auto t = std::make_shared<OutTransfer>();
  t->peer_endpoint = spec.peers[peer].endpoint;
  t->peer_key = spec.peers[peer].public_key;
  t->connections = spec.connections_per_peer;
  t->SetData(pool_->Share(std::move(data)));
  v1::TensorChunkHeader& b = t->base;
  b.set_protocol_version(1);
  b.set_job_id(spec.job_id);
  b.set_round(spec.round);
  b.set_epoch(spec.epoch);
  b.set_shard(static_cast<uint32_t>(spec.rank));
  b.set_step(tag);
  b.set_fragment(sequence);
  b.set_transfer_id(NextTransferId(spec.rank));
  t->chunks = PlanChunks(size, opt_.chunk_bytes);
  auto queued = Enqueue(std::move(t), deadline);
  if (!queued.ok()) return queued.status().WithContext("rank " + std::to_string(peer));
  return Status::Ok();
}

Result<std::vector<std::byte>> WanEndpoint::Impl::ReceiveMessage(const GroupSpec& spec, int peer, uint32_t tag,
                                                                 Deadline deadline) {
  const std::string who = "rank " + std::to_string(peer) + " (" + spec.peers[peer].endpoint + ")";
  const auto link_io = opt_.timeouts.link_io;
  const GroupKey key = KeyOf(spec);
  std::unique_lock lock(mu_);
  while (true) {
    if (Cancelled(spec.epoch)) return CancelledError("waiting for tag " + std::to_string(tag) + " from " + who);
    GroupRx& group = groups_[key];
    uint32_t& seq = group.next[{peer, tag}];
    auto& stream = group.streams[{peer, tag}];
    auto it = stream.find(seq);
    auto now = std::chrono::steady_clock::now();
    Deadline wake = deadline;
    if (it != stream.end()) {
      InTransfer& in = it->second;
      if (!in.failed.ok()) {
        Status s = in.failed.WithContext("receiving tag " + std::to_string(tag) + " from " + who);
        stream.erase(it);
        ++seq;
        return s;
      }
      if (in.reassembly->complete()) {
        std::vector<std::byte> out = in.reassembly->TakeBuffer();
        stream.erase(it);
        ++seq;
        return out;
      }
      // A transfer that started but stopped making progress: the peer died or stalled.
      if (now - in.last_progress >= link_io) {
        Status s = Unavailable(who + " stopped sending mid-transfer: " + std::to_string(in.reassembly->received_bytes()) +
                               " of " + std::to_string(in.reassembly->total_bytes()) + " bytes after " +
                               std::to_string(link_io.count()) + " ms without progress");
        stream.erase(it);
        ++seq;
        return s;
      }
      wake = std::min(deadline, in.last_progress + link_io);
    }
    if (now >= deadline) {
      std::string progress = it == stream.end() ? "nothing received" :
          std::to_string(it->second.reassembly->received_bytes()) + " of " + std::to_string(it->second.reassembly->total_bytes()) + " bytes received";
      return DeadlineExceeded("waiting for tag " + std::to_string(tag) + " from " + who + ": " + progress);
    }
    cv_.wait_until(lock, std::min(wake, now + std::chrono::milliseconds(200)));
  }
}

void WanEndpoint::Impl::CancelThrough(uint64_t epoch) {
  {
    std::lock_guard lock(mu_);
    if (cancelled_through_ && *cancelled_through_ >= epoch) return;
    cancelled_through_ = epoch;
  }
  spdlog::info("wan {}: groups of epoch <= {} cancelled", endpoint_, epoch);
  cv_.notify_all();
}

Status WanEndpoint::Impl::PrepareJoin(const GroupSpec& spec) {
  if (opt_.admit_group_peers && zap_) {
    std::vector<std::string> keys;
    for (size_t i = 0; i < spec.peers.size(); ++i) {
      if (static_cast<int>(i) != spec.rank) keys.push_back(spec.peers[i].public_key);
    }
    zap_->Admit(keys);
  }
  std::lock_guard lock(mu_);
  if (Cancelled(spec.epoch)) return CancelledError("joining round " + std::to_string(spec.round));
  if (spec.epoch < newest_epoch_) {
    return FailedPrecondition("GroupSpec.epoch " + std::to_string(spec.epoch) + " is older than epoch " +
                              std::to_string(newest_epoch_) + " already joined");
  }
  return Status::Ok();
}

}  // namespace longhaul::wan_transport
