#include "longhaul/orchestrator/control_server.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "longhaul/orchestrator/authorization.h"
#include "longhaul/orchestrator/metrics.h"
#include "longhaul/orchestrator/orchestrator.h"
#include "longhaul/proto/frame.h"

namespace longhaul::orchestrator {

Result<std::unique_ptr<ControlServer>> ControlServer::Start(ControlServerOptions options) {
  std::unique_ptr<ControlServer> s(new ControlServer());
  s->options_ = std::move(options);
  try {
    if (!s->options_.insecure) {
      if (s->options_.server_keys.secret_key.empty())
        return InvalidArgument("the control server needs a key pair (--key) unless --insecure is given");
      if (s->options_.allowlist.size() == 0)
        return InvalidArgument("the control server needs a non-empty allowlist (--allowlist) unless --insecure");
      if (!s->options_.allowlist.has_roles())
        return InvalidArgument("the control allowlist has no roles: put a 'roles' file in the allowlist folder "
                               "('<key name> agent <region>' or '<key name> user' per key; deploy/gen-keys.sh writes one)");
      LONGHAUL_ASSIGN_OR_RETURN(s->zap_, wan_transport::ZapAuthenticator::Start(s->ctx_, s->options_.allowlist));
    }
    s->socket_ = std::make_unique<zmq::socket_t>(s->ctx_, zmq::socket_type::router);
    s->socket_->set(zmq::sockopt::linger, 0);
    s->socket_->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(s->options_.max_message_bytes + 64));
    s->socket_->set(zmq::sockopt::sndhwm, 10000);
    s->socket_->set(zmq::sockopt::rcvhwm, 10000);
    if (!s->options_.insecure) wan_transport::MakeCurveServer(*s->socket_, s->options_.server_keys);
    s->socket_->bind(s->options_.bind);
    s->endpoint_ = s->socket_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Unavailable("cannot bind the control socket on '" + s->options_.bind + "': " + e.what());
  }
  return s;
}

ControlServer::~ControlServer() {
  socket_.reset();
  zap_.reset();  // before the context closes
}

uint64_t ControlServer::refused_clients() const { return zap_ ? zap_->rejected() : 0; }

void ControlServer::Send(const std::string& identity, const v1::ControlMessage& msg) {
  const std::string frame = proto::EncodeControl(msg);
  try {
    if (!socket_->send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return;
    if (!socket_->send(zmq::buffer(frame), zmq::send_flags::dontwait))
      spdlog::warn("control send to a peer dropped ({}): queue full", proto::BodyName(msg));
  } catch (const zmq::error_t& e) {
    spdlog::warn("control send failed ({}): {}", proto::BodyName(msg), e.what());
  }
}

void ControlServer::HandleIncoming(Orchestrator& orchestrator, OrchestratorMetrics* metrics) {
  std::vector<zmq::message_t> parts;
  for (int i = 0; i < 8; ++i) {
    zmq::message_t part;
    if (!socket_->recv(part, zmq::recv_flags::dontwait)) break;
    const bool more = part.more();
    parts.push_back(std::move(part));
    if (!more) break;
  }
  // Drain any surplus frames of an over-long multipart message.
  while (!parts.empty() && parts.back().more()) {
    zmq::message_t part;
    if (!socket_->recv(part, zmq::recv_flags::dontwait)) break;
    parts.back() = std::move(part);
  }
  if (parts.empty()) return;
  auto reject = [&](const std::string& why, const std::string& detail) {
    spdlog::warn("rejected control message ({}): {}", why, detail);
    if (metrics) metrics->MessageRejected(why);
  };
  const std::string identity = parts[0].to_string();
  if (parts.size() != 2) return reject("malformed", "expected 2 frames (identity, payload), got " + std::to_string(parts.size()));
  auto msg = proto::DecodeControl(std::string_view(static_cast<const char*>(parts[1].data()), parts[1].size()));
  if (!msg.ok()) {
    reject("malformed", msg.status().ToString());
    v1::ControlMessage reply;
    reply.set_sender("orchestrator");
    *reply.mutable_error() = proto::ToWireError(msg.status());
    return Send(identity, reply);
  }
  PeerKey peer_key;
  peer_key.admin = true;  // unless roles say otherwise: insecure, or no roles file
  if (!options_.insecure) {
    // The ZAP handler made the client's public key the message's User-Id.
    const char* key = parts[1].gets("User-Id");
    peer_key.public_key = key != nullptr ? key : "";
    const wan_transport::KeyRole* role = options_.allowlist.RoleOf(peer_key.public_key);
    if (role) {
      peer_key.name = role->name;
      peer_key.admin = role->kind == wan_transport::KeyRole::Kind::kAdmin;
    }
    Status allowed = AuthorizeControl(*msg, role);
    if (!allowed.ok()) {
      reject("forbidden", allowed.message());
      v1::ControlMessage reply;
      reply.set_sender("orchestrator");
      reply.set_request_id(msg->request_id());
      *reply.mutable_error() = proto::ToWireError(allowed);
      return Send(identity, reply);
    }
  }
  orchestrator.Handle(identity, *msg, peer_key);
}

Status ControlServer::Run(Orchestrator& orchestrator, const std::atomic<bool>& stop, OrchestratorMetrics* metrics) {
  auto next_tick = std::chrono::steady_clock::now();
  while (!stop.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_tick) {
      orchestrator.Tick();
      next_tick = now + options_.tick;
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - now);
    zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::max(wait, std::chrono::milliseconds(1)));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Internal(std::string("poll on the control socket: ") + e.what());
    }
    // Bounded batch per wake-up so ticks are never starved by a flood.
    for (int i = 0; i < 256 && (item.revents & ZMQ_POLLIN); ++i) {
      if (!(socket_->get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      HandleIncoming(orchestrator, metrics);
    }
  }
  return Status::Ok();
}

}  // namespace longhaul::orchestrator
