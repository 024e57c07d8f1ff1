// The worker's WAN port over ZeroMQ: a ROUTER listener for the life of the job,
// and per round one DEALER per peer. Every message carries (epoch, sender rank,
// tag), so traffic of an older epoch (an aborted round) is dropped and a peer
// that is slower to join loses nothing: its messages wait in the listener.
// Send is buffered by ZeroMQ (the CollectiveLink contract); Recv polls the
// listener until the deadline and names the stalled peer when it passes.
//
// CURVE (unless insecure): see WanPortOptions for where peers' keys come from.
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>
#include <deque>

#include <zmq.hpp>

#include "zmq_poll.h"
#include "longhaul/region_agent/wan_port.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::region_agent {
namespace {

struct Header {
  uint64_t epoch;
  uint32_t sender;
  uint32_t tag;
};

class ZmqWanPort;

class ZmqRoundLink final : public sync_policies::CollectiveLink {
 public:
  ZmqRoundLink(ZmqWanPort& port, std::vector<std::unique_ptr<zmq::socket_t>> dealers, int rank, uint64_t epoch)
      : port_(port), dealers_(std::move(dealers)), rank_(rank), epoch_(epoch) {}
  int rank() const override { return rank_; }
  int world_size() const override { return static_cast<int>(dealers_.size()); }
  Status Send(int peer, uint32_t tag, std::span<const std::byte> data, Deadline deadline) override;
  Result<std::vector<std::byte>> Recv(int peer, uint32_t tag, Deadline deadline) override;
  uint64_t bytes_sent() const override { return bytes_sent_; }

 private:
  ZmqWanPort& port_;
  std::vector<std::unique_ptr<zmq::socket_t>> dealers_;  // [rank_] is null
  int rank_;
  uint64_t epoch_;
  uint64_t bytes_sent_ = 0;
};

class ZmqWanPort final : public WanPort {
 public:
  explicit ZmqWanPort(const WanPortOptions& options) : options_(options), router_(ctx_, zmq::socket_type::router) {}

  Status Bind() {
    router_.set(zmq::sockopt::linger, 0);
    if (!options_.insecure) {
      auto keys = wan_transport::LoadKeyPair(options_.key_file);
      if (!keys.ok()) return keys.status().WithContext("WAN key");
      keys_ = *keys;
      auto allow = wan_transport::Allowlist::Load(options_.allowlist);
      if (!allow.ok()) return allow.status().WithContext("WAN allowlist");
      auto zap = wan_transport::ZapAuthenticator::Start(ctx_, std::move(*allow));
      if (!zap.ok()) return zap.status();
      zap_ = std::move(*zap);
      wan_transport::MakeCurveServer(router_, keys_);
    }
    router_.set(zmq::sockopt::rcvhwm, 0);
    router_.bind("tcp://" + options_.host + ":0");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    return Status::Ok();
  }
  std::string endpoint() const override { return endpoint_; }
  Result<std::unique_ptr<sync_policies::CollectiveLink>> Join(const std::vector<WanPeer>& peers, int rank,
                                                              uint32_t /*round*/, uint64_t epoch, Deadline) override {
    if (rank < 0 || rank >= static_cast<int>(peers.size())) return InvalidArgument("rank outside the peer list");
    current_epoch_ = epoch;
    for (auto it = stash_.begin(); it != stash_.end();) {  // older epochs can never be asked for again
      it = std::get<0>(it->first) < epoch ? stash_.erase(it) : std::next(it);
    }
    std::vector<std::unique_ptr<zmq::socket_t>> dealers(peers.size());
    for (size_t i = 0; i < peers.size(); ++i) {
      if (static_cast<int>(i) == rank) continue;
      auto d = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
      d->set(zmq::sockopt::linger, 0);
      d->set(zmq::sockopt::sndhwm, 0);
      if (!options_.insecure) {
        const auto key_file = std::filesystem::path(options_.allowlist) / (peers[i].region + ".pub");
        auto server_key = wan_transport::LoadPublicKey(key_file);
        if (!server_key.ok()) {
          return server_key.status().WithContext("WAN key of region " + peers[i].region +
                                                 " (expected in the allowlist folder)");
        }
        wan_transport::MakeCurveClient(*d, keys_, *server_key);
      }
      try {
        d->connect(peers[i].endpoint);
      } catch (const zmq::error_t& e) {
        return InvalidArgument("peer endpoint '" + peers[i].endpoint + "' of region " + peers[i].region + ": " + e.what());
      }
      dealers[i] = std::move(d);
    }
    return std::unique_ptr<sync_policies::CollectiveLink>(new ZmqRoundLink(*this, std::move(dealers), rank, epoch));
  }

  // Next message from (sender, tag) of `epoch`, reading the listener until the deadline.
  Result<std::vector<std::byte>> Take(uint64_t epoch, int sender, uint32_t tag, Deadline deadline) {
    const auto key = std::make_tuple(epoch, sender, tag);
    for (;;) {
      if (auto it = stash_.find(key); it != stash_.end() && !it->second.empty()) {
        auto data = std::move(it->second.front());
        it->second.pop_front();
        return data;
      }
      const auto left = Remaining(deadline);
      if (left.count() == 0) {
        return DeadlineExceeded("no data from ring rank " + std::to_string(sender) + " (tag " + std::to_string(tag) +
                                ", epoch " + std::to_string(epoch) + ") before the deadline");
      }
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      PollOrInterrupted(&item, 1, std::min<Duration>(left, Duration(100)));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t id, header, body;
      if (!router_.recv(id, zmq::recv_flags::dontwait)) continue;
      if (!id.more() || !router_.recv(header, zmq::recv_flags::dontwait)) continue;
      if (!header.more() || !router_.recv(body, zmq::recv_flags::dontwait)) continue;
      if (header.size() != sizeof(Header)) continue;  // not ours: ignore
      Header h;
      std::memcpy(&h, header.data(), sizeof(h));
      if (h.epoch < current_epoch_) continue;  // an aborted round's leftovers
      const auto* p = static_cast<const std::byte*>(body.data());
      stash_[std::make_tuple(h.epoch, static_cast<int>(h.sender), h.tag)].emplace_back(p, p + body.size());
    }
  }

 private:
  WanPortOptions options_;
  zmq::context_t ctx_;
  std::unique_ptr<wan_transport::ZapAuthenticator> zap_;  // destroyed before ctx_
  wan_transport::CurveKeyPair keys_;
  zmq::socket_t router_;
  std::string endpoint_;
  uint64_t current_epoch_ = 0;
  std::map<std::tuple<uint64_t, int, uint32_t>, std::deque<std::vector<std::byte>>> stash_;
};

Status ZmqRoundLink::Send(int peer, uint32_t tag, std::span<const std::byte> data, Deadline deadline) {
  if (peer < 0 || peer >= world_size() || peer == rank_) return InvalidArgument("send to invalid ring rank " + std::to_string(peer));
  zmq::socket_t& d = *dealers_[static_cast<size_t>(peer)];
  d.set(zmq::sockopt::sndtimeo, static_cast<int>(std::max<int64_t>(1, Remaining(deadline).count())));
  const Header h{epoch_, static_cast<uint32_t>(rank_), tag};
  if (!d.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::sndmore) ||
      !d.send(zmq::buffer(data.data(), data.size()), zmq::send_flags::none)) {
    return DeadlineExceeded("sending to ring rank " + std::to_string(peer) + " timed out");
  }
  bytes_sent_ += data.size();
  return Status::Ok();
}

Result<std::vector<std::byte>> ZmqRoundLink::Recv(int peer, uint32_t tag, Deadline deadline) {
  if (peer < 0 || peer >= world_size() || peer == rank_) return InvalidArgument("recv from invalid ring rank " + std::to_string(peer));
  return port_.Take(epoch_, peer, tag, deadline);
}

}  // namespace

Result<std::unique_ptr<WanPort>> BindWanPort(const WanPortOptions& options) {
  try {
    auto port = std::make_unique<ZmqWanPort>(options);
    LONGHAUL_RETURN_IF_ERROR(port->Bind());
    return std::unique_ptr<WanPort>(std::move(port));
  } catch (const zmq::error_t& e) {
    return Unavailable("binding the WAN port on " + options.host + ": " + e.what());
  }
}

}  // namespace longhaul::region_agent
