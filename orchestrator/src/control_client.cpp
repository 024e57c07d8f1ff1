#include "longhaul/orchestrator/control_client.h"

#include <atomic>
#include <cstring>

#include "longhaul/proto/frame.h"

namespace longhaul::orchestrator {
namespace {
std::atomic<int> g_monitor_seq{0};
}

Result<std::unique_ptr<ControlClient>> ControlClient::Connect(ControlClientOptions options) {
  if (options.endpoint.empty()) return InvalidArgument("no orchestrator endpoint given (--orchestrator or LONGHAUL_ORCHESTRATOR)");
  std::unique_ptr<ControlClient> c(new ControlClient());
  c->options_ = std::move(options);
  try {
    c->socket_ = std::make_unique<zmq::socket_t>(c->ctx_, zmq::socket_type::dealer);
    c->socket_->set(zmq::sockopt::linger, 0);
    if (!c->options_.insecure) {
      if (c->options_.own_keys.secret_key.empty()) return InvalidArgument("no client key given (--key or LONGHAUL_KEY)");
      if (c->options_.server_public_key.empty())
        return InvalidArgument("no orchestrator public key given (--server-key or LONGHAUL_SERVER_KEY)");
      wan_transport::MakeCurveClient(*c->socket_, c->options_.own_keys, c->options_.server_public_key);
      // The monitor tells a refused key (handshake failed) from a silent peer,
      // and a later handshake that succeeds (the orchestrator restarted, or
      // died in the middle of one) from a refusal that lasts.
      const std::string mon = "inproc://longhaul-client-monitor-" + std::to_string(++g_monitor_seq);
      if (zmq_socket_monitor(c->socket_->handle(), mon.c_str(),
                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) == 0) {
        c->monitor_ = std::make_unique<zmq::socket_t>(c->ctx_, zmq::socket_type::pair);
        c->monitor_->set(zmq::sockopt::linger, 0);
        c->monitor_->connect(mon);
      }
    }
    c->socket_->connect(c->options_.endpoint);
  } catch (const zmq::error_t& e) {
    return InvalidArgument("cannot connect to orchestrator '" + c->options_.endpoint + "': " + e.what());
  }
  return c;
}

ControlClient::~ControlClient() {
  if (socket_) zmq_socket_monitor(socket_->handle(), nullptr, 0);
  monitor_.reset();
  socket_.reset();
}

Status ControlClient::CheckRefused() {
  if (!monitor_) return Status::Ok();
  zmq::message_t ev;
  while (monitor_->recv(ev, zmq::recv_flags::dontwait)) {
    if (ev.size() >= 2) {
      uint16_t event = 0;
      std::memcpy(&event, ev.data(), sizeof(event));
      if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                   ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL))
        auth_failed_ = true;
      if (event & ZMQ_EVENT_HANDSHAKE_SUCCEEDED) auth_failed_ = false;
    }
    while (ev.more() && monitor_->recv(ev, zmq::recv_flags::dontwait)) {
    }
  }
  if (auth_failed_)
    return PermissionDenied("orchestrator at " + options_.endpoint +
                            " refused our key during the CURVE handshake (is it on the orchestrator's allowlist, and "
                            "is --server-key the orchestrator's public key?)");
  return Status::Ok();
}

Status ControlClient::Send(v1::ControlMessage msg) {
  if (msg.sender().empty()) msg.set_sender(options_.sender);
  const std::string body = proto::BodyName(msg);
  const std::string frame = proto::EncodeControl(std::move(msg));
  // The orchestrator drops (and disconnects) a peer whose message is over its
  // limit without a reply: say so here instead of timing out.
  if (frame.size() - proto::kFrameHeaderBytes > proto::kMaxControlFrameBytes)
    return InvalidArgument("the " + body + " request is " + std::to_string(frame.size()) +
                           " bytes; a control message may be at most " +
                           std::to_string(proto::kMaxControlFrameBytes >> 20) + " MiB");
  try {
    if (!socket_->send(zmq::buffer(frame), zmq::send_flags::dontwait))
      return Unavailable("send queue to " + options_.endpoint + " is full");
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("send to orchestrator: ") + e.what());
  }
  return Status::Ok();
}

Result<v1::ControlMessage> ControlClient::Receive(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    LONGHAUL_RETURN_IF_ERROR(CheckRefused());
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return DeadlineExceeded("no message from the orchestrator");
    zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::min(left, std::chrono::milliseconds(50)));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Internal(std::string("poll: ") + e.what());
    }
    if (!(item.revents & ZMQ_POLLIN)) continue;
    zmq::message_t m;
    if (!socket_->recv(m, zmq::recv_flags::dontwait)) continue;
    return proto::DecodeControl(std::string_view(static_cast<const char*>(m.data()), m.size()));
  }
}

Result<v1::ControlMessage> ControlClient::Call(v1::ControlMessage request, std::chrono::milliseconds resend_every) {
  const uint64_t id = next_request_id_++;
  request.set_request_id(id);
  LONGHAUL_RETURN_IF_ERROR(Send(request));
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = now + options_.timeout;
  auto resend_at = resend_every.count() > 0 ? now + resend_every : deadline;
  while (true) {
    const auto t = std::chrono::steady_clock::now();
    if (t >= resend_at && t < deadline) {
      LONGHAUL_RETURN_IF_ERROR(Send(request));  // same request id: either reply answers this call
      resend_at = t + resend_every;
    }
    const auto until = std::min(deadline, resend_at);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - t);
    auto reply = Receive(std::max(left, std::chrono::milliseconds(0)));
    if (!reply.ok() && reply.status().code() == StatusCode::kDeadlineExceeded &&
        std::chrono::steady_clock::now() < deadline)
      continue;  // time to send again
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kDeadlineExceeded)
        return Unavailable("orchestrator at " + options_.endpoint + " did not answer within " +
                           std::to_string(options_.timeout.count() / 1000.0).substr(0, 4) + " s (is it running?)");
      return reply.status();
    }
    // An error without a request id: the orchestrator could not decode our
    // request (a string that is not UTF-8 fails protobuf parsing), so it is the
    // answer to this call, and the request was bad input.
    if (reply->request_id() == 0 && reply->has_error() &&
        (reply->error().code() == v1::ERROR_CODE_DATA_LOSS ||
         reply->error().code() == v1::ERROR_CODE_RESOURCE_EXHAUSTED))
      return InvalidArgument("the orchestrator could not read the request: " + reply->error().message());
    if (reply->request_id() != id) continue;  // a late reply to an earlier call
    if (reply->has_error()) return proto::FromWireError(reply->error());
    return reply;
  }
}

}  // namespace longhaul::orchestrator
