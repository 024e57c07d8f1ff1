// The ZAP handler (ZeroMQ RFC 27) that turns CURVE into mutual authentication.
#include <spdlog/spdlog.h>
#include <zmq.h>

#include <array>

#include "longhaul/wan_transport/curve.h"

namespace longhaul::wan_transport {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

std::string KeyToZ85(const zmq::message_t& raw) {
  if (raw.size() != 32) return fmt::format("<{}-byte credential>", raw.size());
  char z85[41] = {};
  zmq_z85_encode(z85, static_cast<const uint8_t*>(raw.data()), 32);
  return z85;
}

}  // namespace

ZapAuthenticator::ZapAuthenticator(zmq::context_t& ctx, Allowlist allowlist)
    : socket_(ctx, zmq::socket_type::rep), allowlist_(std::move(allowlist)) {}

Result<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::Start(zmq::context_t& ctx, Allowlist allowlist) {
  std::unique_ptr<ZapAuthenticator> auth;
  try {
    auth.reset(new ZapAuthenticator(ctx, std::move(allowlist)));
    auth->socket_.set(zmq::sockopt::linger, 0);
    // Bound on the caller's thread so the handler exists before any server binds.
    auth->socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    return FailedPrecondition(std::string("cannot start ZAP handler on ") + kZapEndpoint +
                              " (one per context): " + e.what());
  }
  auth->thread_ = std::thread([a = auth.get()] { a->Serve(); });
  return auth;
}

ZapAuthenticator::~ZapAuthenticator() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ZapAuthenticator::Serve() {
  // Polls with a short timeout so destruction never waits long for the thread.
  while (!stop_) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) > 0) Handle(socket_);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      spdlog::error("ZAP handler: {}", e.what());
    }
  }
  socket_.close();
}

bool ZapAuthenticator::Handle(zmq::socket_t& sock) {
  // Request: version, request id, domain, address, identity, mechanism, credentials...
  std::vector<zmq::message_t> req;
  while (true) {
    zmq::message_t part;
    if (!sock.recv(part, zmq::recv_flags::dontwait)) break;
    bool more = part.more();
    req.push_back(std::move(part));
    if (!more || req.size() > 16) break;
  }
  if (req.empty()) return false;
  auto frame = [&](size_t i) { return i < req.size() ? req[i].to_string() : std::string(); };
  std::string mechanism = frame(5);
  std::string address = frame(3);
  std::string key = mechanism == "CURVE" && req.size() > 6 ? KeyToZ85(req[6]) : "";
  bool ok = frame(0) == "1.0" && mechanism == "CURVE" && allowlist_.Contains(key);
  if (ok) {
    ++accepted_;
  } else {
    ++rejected_;
    spdlog::warn("ZAP: rejected {} client {} from {}: {}", mechanism.empty() ? "?" : mechanism,
                 key.empty() ? "<no key>" : key, address,
                 mechanism != "CURVE" ? "only CURVE clients are admitted" : "public key not on the allowlist");
  }
  std::array<std::string, 6> reply = {"1.0", frame(1), ok ? "200" : "400", ok ? "OK" : "key not allowlisted",
                                      ok ? key : "", ""};
  for (size_t i = 0; i < reply.size(); ++i) {
    sock.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  return true;
}

}  // namespace longhaul::wan_transport
