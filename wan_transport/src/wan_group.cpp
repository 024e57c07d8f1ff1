// One round's CollectiveLink over a WanEndpoint: Send queues a transfer to a peer
// (copying the caller's bytes once, since Send is buffered), Recv waits for the
// next complete transfer of (peer, tag) in sequence order.
#include <spdlog/spdlog.h>

#include "endpoint_impl.h"

namespace longhaul::wan_transport {
namespace {

class WanGroupLink final : public sync_policies::CollectiveLink {
 public:
  WanGroupLink(WanEndpoint::Impl* ep, GroupSpec spec) : ep_(ep), spec_(std::move(spec)), key_{spec_.job_id, spec_.epoch, spec_.round} {
    ep_->RegisterGroup(key_);
  }
  ~WanGroupLink() override { ep_->UnregisterGroup(key_); }

  int rank() const override { return spec_.rank; }
  int world_size() const override { return static_cast<int>(spec_.peers.size()); }
  uint64_t bytes_sent() const override { return bytes_sent_.load(); }

  Status Send(int peer, uint32_t tag, std::span<const std::byte> data, Deadline deadline) override {
    LONGHAUL_RETURN_IF_ERROR(CheckSend(peer, data.size()));
    deadline = std::min(deadline, spec_.deadline);
    std::vector<std::byte> copy = ep_->pool_->Take(data.size());
    std::copy(data.begin(), data.end(), copy.begin());
    return SendOwned(peer, tag, std::move(copy), deadline);
  }

  std::vector<std::byte> Buffer(size_t n) override { return ep_->pool_->Take(n); }
  void Recycle(std::vector<std::byte>&& buffer) override { ep_->pool_->Give(std::move(buffer)); }

  // The buffer itself goes out (zero-copy zmq messages reference it) and
  // returns to the pool once every chunk is sent and the transfer acked.
  Status SendOwned(int peer, uint32_t tag, std::vector<std::byte>&& data, Deadline deadline) override {
    deadline = std::min(deadline, spec_.deadline);
    const size_t size = data.size();
    LONGHAUL_RETURN_IF_ERROR(CheckSend(peer, size));
    auto t = std::make_shared<OutTransfer>();
    t->peer_endpoint = spec_.peers[peer].endpoint;
    t->peer_key = spec_.peers[peer].public_key;
    t->connections = spec_.connections_per_peer;
    t->SetData(ep_->pool_->Share(std::move(data)));
    v1::TensorChunkHeader& b = t->base;
    b.set_protocol_version(1);
    b.set_job_id(spec_.job_id);
    b.set_round(spec_.round);
    b.set_epoch(spec_.epoch);
    b.set_shard(static_cast<uint32_t>(spec_.rank));
    b.set_step(tag);
    {
      std::lock_guard lock(seq_mu_);
      b.set_fragment(send_seq_[{peer, tag}]++);
    }
    b.set_transfer_id(ep_->NextTransferId(spec_.rank));
    t->chunks = PlanChunks(size, ep_->opt_.chunk_bytes);
    auto queued = ep_->Enqueue(std::move(t), deadline);
    if (!queued.ok()) return queued.status().WithContext("rank " + std::to_string(peer));
    bytes_sent_ += size;
    return Status::Ok();
  }

  Result<std::vector<std::byte>> Recv(int peer, uint32_t tag, Deadline deadline) override {
    deadline = std::min(deadline, spec_.deadline);
    LONGHAUL_RETURN_IF_ERROR(CheckPeer(peer));
    const std::string who = "rank " + std::to_string(peer) + " (" + spec_.peers[peer].endpoint + ")";
    const auto link_io = ep_->opt_.timeouts.link_io;
    std::unique_lock lock(ep_->mu_);
    uint32_t& seq = recv_seq_[{peer, tag}];
    while (true) {
      if (ep_->Cancelled(spec_.epoch)) return ep_->CancelledError("waiting for tag " + std::to_string(tag) + " from " + who);
      auto& streams = ep_->groups_[key_].streams;
      auto& stream = streams[{peer, tag}];
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
      ep_->cv_.wait_until(lock, std::min(wake, now + std::chrono::milliseconds(200)));
    }
  }

 private:
  Status CheckPeer(int peer) const {
    if (peer < 0 || peer >= world_size() || peer == spec_.rank) {
      return InvalidArgument("peer rank " + std::to_string(peer) + " is not another member of a group of " + std::to_string(world_size()));
    }
    return Status::Ok();
  }
  Status CheckSend(int peer, size_t bytes) const {
    LONGHAUL_RETURN_IF_ERROR(CheckPeer(peer));
    if (bytes > ep_->opt_.max_message_bytes)
      return ResourceExhausted("message of " + std::to_string(bytes) + " bytes exceeds max_message_bytes");
    return Status::Ok();
  }

  WanEndpoint::Impl* ep_;
  GroupSpec spec_;
  GroupKey key_;
  std::mutex seq_mu_;
  std::map<std::pair<int, uint32_t>, uint32_t> send_seq_;
  std::map<std::pair<int, uint32_t>, uint32_t> recv_seq_;  // guarded by ep_->mu_
  std::atomic<uint64_t> bytes_sent_{0};
};

}  // namespace

void WanEndpoint::CancelThrough(uint64_t epoch) {
  {
    std::lock_guard lock(impl_->mu_);
    if (impl_->cancelled_through_ && *impl_->cancelled_through_ >= epoch) return;
    impl_->cancelled_through_ = epoch;
  }
  spdlog::info("wan {}: groups of epoch <= {} cancelled", impl_->endpoint_, epoch);
  impl_->cv_.notify_all();
}

Result<std::unique_ptr<sync_policies::CollectiveLink>> WanEndpoint::Join(const GroupSpec& spec) {
  if (spec.peers.empty()) return InvalidArgument("GroupSpec.peers is empty");
  if (spec.rank < 0 || spec.rank >= static_cast<int>(spec.peers.size())) {
    return InvalidArgument("GroupSpec.rank " + std::to_string(spec.rank) + " outside [0, " + std::to_string(spec.peers.size()) + ")");
  }
  if (std::chrono::steady_clock::now() >= spec.deadline)
    return DeadlineExceeded("joining round " + std::to_string(spec.round) + ": its deadline has passed");
  if (spec.job_id != impl_->opt_.job_id) {
    return InvalidArgument("GroupSpec.job_id '" + spec.job_id + "' differs from the endpoint's job '" + impl_->opt_.job_id + "'");
  }
  for (size_t i = 0; i < spec.peers.size(); ++i) {
    if (static_cast<int>(i) == spec.rank) continue;
    if (spec.peers[i].endpoint.rfind("tcp://", 0) != 0) {
      return InvalidArgument("GroupSpec.peers[" + std::to_string(i) + "].endpoint '" + spec.peers[i].endpoint + "' is not tcp://host:port");
    }
    if (impl_->opt_.encryption) {
      LONGHAUL_RETURN_IF_ERROR(ValidateZ85Key(spec.peers[i].public_key, "GroupSpec.peers[" + std::to_string(i) + "].public_key"));
    }
  }
  if (impl_->opt_.admit_group_peers && impl_->zap_) {
    std::vector<std::string> keys;
    for (size_t i = 0; i < spec.peers.size(); ++i) {
      if (static_cast<int>(i) != spec.rank) keys.push_back(spec.peers[i].public_key);
    }
    impl_->zap_->Admit(keys);
  }
  {
    std::lock_guard lock(impl_->mu_);
    if (impl_->Cancelled(spec.epoch)) return impl_->CancelledError("joining round " + std::to_string(spec.round));
    if (spec.epoch < impl_->newest_epoch_) {
      return FailedPrecondition("GroupSpec.epoch " + std::to_string(spec.epoch) + " is older than epoch " +
                                std::to_string(impl_->newest_epoch_) + " already joined");
    }
  }
  return std::unique_ptr<sync_policies::CollectiveLink>(new WanGroupLink(impl_.get(), spec));
}

}  // namespace longhaul::wan_transport
