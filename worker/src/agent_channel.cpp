#include "agent_channel.h"

#include <cerrno>

#include "longhaul/common/log_line.h"
#include "longhaul/proto/frame.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::session {

Result<std::unique_ptr<zmq::socket_t>> ConnectToAgent(zmq::context_t& ctx, const std::string& endpoint,
                                                      const std::string& server_key, int linger_ms) {
  try {
    auto dealer = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    dealer->set(zmq::sockopt::linger, linger_ms);
    if (!server_key.empty()) {
      LONGHAUL_ASSIGN_OR_RETURN(auto own, wan_transport::GenerateCurveKeyPair());
      wan_transport::MakeCurveClient(*dealer, own, server_key);
    }
    dealer->connect(endpoint);
    return dealer;
  } catch (const zmq::error_t& e) {
    return Unavailable("connecting to the agent at " + endpoint + ": " + e.what());
  }
}

Result<std::unique_ptr<AgentChannel>> AgentChannel::Connect(const std::string& endpoint, const std::string& server_key,
                                                            std::string sender, Watcher watcher) {
  std::unique_ptr<AgentChannel> c(new AgentChannel(std::move(sender), std::move(watcher)));
  // Linger: the last report/hello must reach the agent.
  LONGHAUL_ASSIGN_OR_RETURN(c->dealer_, ConnectToAgent(c->ctx_, endpoint, server_key, 2000));
  c->thread_ = std::thread([p = c.get()] { p->Loop(); });
  return c;
}

AgentChannel::~AgentChannel() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void AgentChannel::Send(v1::ControlMessage msg) {
  msg.set_sender(sender_);
  std::string frame = proto::EncodeControl(std::move(msg));
  std::lock_guard<std::mutex> lock(mu_);
  outbox_.push_back(std::move(frame));
}

std::optional<v1::ControlMessage> AgentChannel::Next(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!arrived_.wait_until(lock, deadline, [&] { return !inbox_.empty(); })) return std::nullopt;
  v1::ControlMessage msg = std::move(inbox_.front());
  inbox_.pop_front();
  return msg;
}

void AgentChannel::Loop() {
  // Sends are queued and flushed here so the socket has one user; the short
  // poll bounds how long a queued report waits.
  auto flush = [&] {
    std::deque<std::string> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      out.swap(outbox_);
    }
    for (auto& f : out) dealer_->send(zmq::buffer(f), zmq::send_flags::none);
  };
  while (!stop_) {
    flush();
    zmq::pollitem_t item{dealer_->handle(), 0, ZMQ_POLLIN, 0};
    int ready = 0;
    try {
      ready = zmq::poll(&item, 1, std::chrono::milliseconds(2));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) {
        LogLine() << "agent channel: poll failed: " << e.what();
        break;
      }
    }
    if (ready <= 0) continue;
    zmq::message_t frame;
    while (dealer_->recv(frame, zmq::recv_flags::dontwait)) {
      auto msg = proto::DecodeControl(frame.to_string_view());
      if (!msg.ok()) {
        LogLine() << "dropped a frame from the agent: " << msg.status().ToString();
        continue;
      }
      if (watcher_) watcher_(*msg);
      {
        std::lock_guard<std::mutex> lock(mu_);
        inbox_.push_back(std::move(*msg));
      }
      arrived_.notify_one();
    }
  }
  flush();  // the last report or hello; linger delivers it
}

}  // namespace longhaul::session
