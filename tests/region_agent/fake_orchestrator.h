// A fake orchestrator for agent tests: a ROUTER socket on 127.0.0.1:0 that
// speaks the control protocol to real `longhaul-agent` processes. It answers
// registrations and heartbeats itself and hands every other message to the test.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "longhaul/proto/frame.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::testing {

class FakeOrchestrator {
 public:
  // With `keys`, a CURVE server admitting only `clients` (as the real one does).
  explicit FakeOrchestrator(const wan_transport::CurveKeyPair* keys = nullptr, wan_transport::Allowlist clients = {})
      : router_(ctx_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    if (keys != nullptr) {
      auto zap = wan_transport::ZapAuthenticator::Start(ctx_, std::move(clients));
      if (zap.ok()) zap_ = std::move(zap.value());
      wan_transport::MakeCurveServer(router_, *keys);
    }
    router_.bind("tcp://127.0.0.1:0");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }

  struct Incoming {
    std::string region;
    v1::ControlMessage msg;
  };

  // The next message matching `want` within `timeout` (registrations and
  // heartbeats are answered on the way and also offered to `want`).
  std::optional<Incoming> WaitFor(const std::function<bool(const Incoming&)>& want, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      zmq::message_t id, body;
      if (!router_.recv(id, zmq::recv_flags::dontwait)) continue;
      if (!router_.recv(body, zmq::recv_flags::dontwait)) continue;
      auto msg = proto::DecodeControl(body.to_string_view());
      if (!msg.ok()) continue;
      Incoming in{msg->sender(), *msg};
      identities_[in.region] = id.to_string();
      if (msg->has_register_region()) {
        ++registrations_[in.region];
        v1::ControlMessage reply;
        reply.mutable_register_reply()->set_accepted(true);
        reply.mutable_register_reply()->set_heartbeat_interval_ms(100);
        Send(in.region, reply);
      } else if (msg->has_heartbeat()) {
        last_heartbeat_[in.region] = msg->heartbeat();
        v1::ControlMessage ack;
        ack.mutable_heartbeat_ack()->set_seq(msg->heartbeat().seq());
        Send(in.region, ack);
      }
      if (want(in)) return in;
    }
    return std::nullopt;
  }

  void Send(const std::string& region, v1::ControlMessage msg) {
    msg.set_sender("orchestrator");
    const std::string frame = proto::EncodeControl(std::move(msg));
    router_.send(zmq::buffer(identities_.at(region)), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(frame), zmq::send_flags::none);
  }
  bool knows(const std::string& region) const { return identities_.count(region) > 0; }
  int registrations(const std::string& region) { return registrations_[region]; }

 private:
  zmq::context_t ctx_;
  std::unique_ptr<wan_transport::ZapAuthenticator> zap_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::map<std::string, std::string> identities_;
  std::map<std::string, int> registrations_;
  std::map<std::string, v1::Heartbeat> last_heartbeat_;
};

}  // namespace longhaul::testing
