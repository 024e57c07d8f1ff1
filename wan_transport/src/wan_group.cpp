// One round's CollectiveLink over a WanEndpoint's GroupTransport: Send queues a
// transfer to a peer (copying the caller's bytes once, since Send is buffered),
// Recv waits for the next complete transfer of (peer, tag) in sequence order.
#include <atomic>
#include <map>
#include <mutex>

#include "group_transport.h"

namespace longhaul::wan_transport {
namespace {

class WanGroupLink final : public sync_policies::CollectiveLink {
 public:
  WanGroupLink(GroupTransport& transport, GroupSpec spec) : transport_(transport), spec_(std::move(spec)), key_(KeyOf(spec_)) {
    transport_.OpenGroup(key_);
  }
  ~WanGroupLink() override { transport_.CloseGroup(key_); }

  int rank() const override { return spec_.rank; }
  int world_size() const override { return static_cast<int>(spec_.peers.size()); }
  uint64_t bytes_sent() const override { return bytes_sent_.load(); }

  Status Send(int peer, uint32_t tag, std::span<const std::byte> data, Deadline deadline) override {
    LONGHAUL_RETURN_IF_ERROR(CheckSend(peer, data.size()));
    std::vector<std::byte> copy = transport_.TakeBuffer(data.size());
    std::copy(data.begin(), data.end(), copy.begin());
    return SendOwned(peer, tag, std::move(copy), deadline);
  }

  std::vector<std::byte> Buffer(size_t n) override { return transport_.TakeBuffer(n); }
  void Recycle(std::vector<std::byte>&& buffer) override { transport_.RecycleBuffer(std::move(buffer)); }

  // The buffer itself goes out (zero-copy zmq messages reference it) and
  // returns to the pool once every chunk is sent and the transfer acked.
  Status SendOwned(int peer, uint32_t tag, std::vector<std::byte>&& data, Deadline deadline) override {
    const size_t size = data.size();
    LONGHAUL_RETURN_IF_ERROR(CheckSend(peer, size));
    uint32_t sequence;
    {
      std::lock_guard lock(seq_mu_);
      sequence = send_seq_[{peer, tag}]++;
    }
    LONGHAUL_RETURN_IF_ERROR(
        transport_.SendMessage(spec_, peer, tag, sequence, std::move(data), std::min(deadline, spec_.deadline)));
    bytes_sent_ += size;
    return Status::Ok();
  }

  Result<std::vector<std::byte>> Recv(int peer, uint32_t tag, Deadline deadline) override {
    LONGHAUL_RETURN_IF_ERROR(CheckPeer(peer));
    return transport_.ReceiveMessage(spec_, peer, tag, std::min(deadline, spec_.deadline));
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
    if (bytes > transport_.max_message_bytes())
      return ResourceExhausted("message of " + std::to_string(bytes) + " bytes exceeds max_message_bytes");
    return Status::Ok();
  }

  GroupTransport& transport_;
  const GroupSpec spec_;
  const GroupKey key_;
  std::mutex seq_mu_;
  std::map<std::pair<int, uint32_t>, uint32_t> send_seq_;  // (peer, tag) -> next sequence
  std::atomic<uint64_t> bytes_sent_{0};
};

}  // namespace

std::unique_ptr<sync_policies::CollectiveLink> MakeGroupLink(GroupTransport& transport, GroupSpec spec) {
  return std::make_unique<WanGroupLink>(transport, std::move(spec));
}

}  // namespace longhaul::wan_transport
