#include "zmq_poll.h"
#include "longhaul/region_agent/orchestrator_session.h"

#include <spdlog/spdlog.h>

#include "longhaul/proto/frame.h"

namespace longhaul::region_agent {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr const char* kAgentVersion = "longhaul-agent/1";

// The orchestrator lost track of this region (it restarted, or declared the
// region down): the only fix is to register again.
bool SaysRegionUnknown(const v1::Error& e) {
  const std::string& m = e.message();
  return e.code() == v1::ERROR_CODE_NOT_FOUND &&
         (m.find("region") != std::string::npos || m.find("register") != std::string::npos);
}

}  // namespace

OrchestratorSession::OrchestratorSession(zmq::context_t& ctx, SessionOptions options, HealthBoard& health)
    : ctx_(ctx),
      options_(std::move(options)),
      health_(health),
      heartbeat_interval_(options_.timeouts.heartbeat_interval),
      heartbeat_misses_(options_.timeouts.heartbeat_misses) {}

OrchestratorSession::~OrchestratorSession() { Stop(); }

void OrchestratorSession::Start() { thread_ = std::thread([this] { Run(); }); }

void OrchestratorSession::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<zmq::socket_t> OrchestratorSession::Connect() {
  auto dealer = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  dealer->set(zmq::sockopt::linger, 0);
  if (!options_.insecure) wan_transport::MakeCurveClient(*dealer, options_.keys, options_.server_public_key);
  dealer->connect(options_.orchestrator);
  return dealer;
}

void OrchestratorSession::SendToOrchestrator(zmq::socket_t& dealer, v1::ControlMessage msg) {
  msg.set_sender(options_.region);
  msg.set_request_id(++request_id_);
  const std::string frame = proto::EncodeControl(std::move(msg));
  // dontwait: a full queue (orchestrator unreachable) drops the message instead of
  // blocking the heartbeat thread; registration and heartbeats are retried anyway.
  if (!dealer.send(zmq::buffer(frame), zmq::send_flags::dontwait)) {
    spdlog::warn("orchestrator send queue full; dropped a message");
  }
}

bool OrchestratorSession::HandleFromOrchestrator(const zmq::message_t& frame, zmq::socket_t& pair) {
  auto msg = proto::DecodeControl(frame.to_string_view());
  if (!msg.ok()) {
    spdlog::warn("dropped a frame from the orchestrator: {}", msg.status().ToString());
    return true;
  }
  switch (msg->body_case()) {
    case v1::ControlMessage::kRegisterReply: {
      const auto& r = msg->register_reply();
      if (!r.accepted()) {
        spdlog::error("orchestrator refused registration of region {}: {}", options_.region, r.reason());
        return true;  // retried after register_retry
      }
      registered_ = true;
      ++registrations_;
      last_ack_ = SteadyClock::now();
      if (r.heartbeat_interval_ms() > 0) heartbeat_interval_ = Duration(r.heartbeat_interval_ms());
      // The orchestrator's own count of misses (an older one sends none: ours serves).
      if (r.has_timeouts() && r.timeouts().heartbeat_misses() > 0)
        heartbeat_misses_ = static_cast<int>(std::min<uint32_t>(r.timeouts().heartbeat_misses(), 1000));
      spdlog::info("registered region {} with {} (heartbeat every {} ms)", options_.region, options_.orchestrator,
                   heartbeat_interval_.count());
      return true;
    }
    case v1::ControlMessage::kHeartbeatAck:
      last_ack_ = SteadyClock::now();
      return true;
    case v1::ControlMessage::kError:
      if (SaysRegionUnknown(msg->error())) {
        spdlog::warn("orchestrator does not know region {} ({}); registering again", options_.region,
                     msg->error().message());
        return false;
      }
      break;
    default:
      break;
  }
  pair.send(zmq::buffer(frame.data(), frame.size()), zmq::send_flags::none);
  return true;
}

void OrchestratorSession::Run() {
  zmq::socket_t pair(ctx_, zmq::socket_type::pair);
  pair.set(zmq::sockopt::linger, 0);
  pair.connect(options_.controller_endpoint);
  std::unique_ptr<zmq::socket_t> dealer = Connect();
  auto last_register = SteadyClock::time_point{};
  auto next_heartbeat = SteadyClock::time_point{};

  while (!stop_) {
    const auto now = SteadyClock::now();
    if (!registered_ && now - last_register >= options_.register_retry) {
      v1::ControlMessage msg;
      auto* reg = msg.mutable_register_region();
      reg->set_region(options_.region);
      *reg->mutable_capacity() = options_.capacity;
      reg->set_data_host(options_.data_host);
      reg->set_agent_version(kAgentVersion);
      reg->set_session_id(options_.session_id);
      SendToOrchestrator(*dealer, std::move(msg));
      last_register = now;
    }
    if (registered_ && now >= next_heartbeat) {
      const HealthSnapshot h = health_.Snapshot();
      v1::ControlMessage msg;
      auto* hb = msg.mutable_heartbeat();
      hb->set_region(options_.region);
      hb->set_seq(++heartbeat_seq_);
      hb->set_healthy(h.healthy);
      hb->set_detail(h.detail);
      for (const auto& j : h.running_jobs) hb->add_running_jobs(j);
      SendToOrchestrator(*dealer, std::move(msg));
      ++heartbeats_sent_;
      next_heartbeat = now + heartbeat_interval_;
    }
    if (registered_ && now - last_ack_ > heartbeat_interval_ * heartbeat_misses_) {
      spdlog::warn("no heartbeat ack from {} for {} ms; reconnecting and registering again", options_.orchestrator,
                   std::chrono::duration_cast<Duration>(now - last_ack_).count());
      registered_ = false;
      dealer = Connect();  // fresh socket: drops frames queued for a dead peer
    }

    zmq::pollitem_t items[] = {{dealer->handle(), 0, ZMQ_POLLIN, 0}, {pair.handle(), 0, ZMQ_POLLIN, 0}};
    PollOrInterrupted(items, 2, std::chrono::milliseconds(20));
    if (items[0].revents & ZMQ_POLLIN) {
      zmq::message_t frame;
      while (dealer->recv(frame, zmq::recv_flags::dontwait)) {
        if (!HandleFromOrchestrator(frame, pair)) {
          registered_ = false;
          last_register = {};
        }
      }
    }
    if (items[1].revents & ZMQ_POLLIN) {
      zmq::message_t frame;
      while (pair.recv(frame, zmq::recv_flags::dontwait)) {
        if (!dealer->send(frame, zmq::send_flags::dontwait)) spdlog::warn("orchestrator send queue full; dropped a report");
      }
    }
  }
}

}  // namespace longhaul::region_agent
