// The ZAP handler (ZeroMQ RFC 27) that turns CURVE into mutual authentication.
#include <spdlog/spdlog.h>
#include <zmq.h>

#include <algorithm>
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

ZapAuthenticator::ZapAuthenticator(zmq::context_t& ctx, Allowlist allowlist, std::chrono::milliseconds admit_wait)
    : socket_(ctx, zmq::socket_type::router), allowlist_(std::move(allowlist)), admit_wait_(admit_wait) {}

Result<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::Start(zmq::context_t& ctx, Allowlist allowlist,
                                                                 std::chrono::milliseconds admit_wait) {
  std::unique_ptr<ZapAuthenticator> auth;
  try {
    auth.reset(new ZapAuthenticator(ctx, std::move(allowlist), admit_wait));
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

void ZapAuthenticator::Admit(const std::vector<std::string>& public_keys) {
  std::lock_guard lock(mu_);
  for (const auto& k : public_keys) allowlist_.Add(k);
}

bool ZapAuthenticator::Admitted(const std::string& key) const {
  std::lock_guard lock(mu_);
  return allowlist_.Contains(key);
}

void ZapAuthenticator::Serve() {
  // Polls with a short timeout so destruction never waits long for the thread,
  // and held clients are let in (or refused) within that time.
  while (!stop_) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      const auto wait = std::chrono::milliseconds(pending_.empty() ? 50 : 10);
      if (zmq::poll(&item, 1, wait) > 0) {
        while (Handle()) {
        }
      }
      SettlePending(false);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      spdlog::error("ZAP handler: {}", e.what());
    }
  }
  try {
    SettlePending(true);
  } catch (const zmq::error_t&) {
  }
  socket_.close();
}

void ZapAuthenticator::Reply(const std::string& routing_id, const std::string& request_id, bool ok,
                             const std::string& key) {
  // ROUTER envelope (routing id, empty delimiter), then the ZAP reply.
  const std::array<std::string, 8> reply = {routing_id, "", "1.0", request_id, ok ? "200" : "400",
                                            ok ? "OK" : "key not allowlisted", ok ? key : "", ""};
  for (size_t i = 0; i < reply.size(); ++i) {
    socket_.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  ++(ok ? accepted_ : rejected_);
}

void ZapAuthenticator::Refuse(const std::string& mechanism, const std::string& key, const std::string& address,
                              const char* why) {
  spdlog::warn("ZAP: rejected {} client {} from {}: {}", mechanism.empty() ? "?" : mechanism,
               key.empty() ? "<no key>" : key, address, why);
}

bool ZapAuthenticator::Handle() {
  // Request: routing id, empty delimiter, version, request id, domain, address,
  // identity, mechanism, credentials... (parts past 16 are read and dropped).
  std::vector<zmq::message_t> req;
  bool any = false;
  while (true) {
    zmq::message_t part;
    if (!socket_.recv(part, zmq::recv_flags::dontwait)) break;
    any = true;
    const bool more = part.more();
    if (req.size() < 16) req.push_back(std::move(part));
    if (!more) break;
  }
  if (!any) return false;
  auto frame = [&](size_t i) { return i < req.size() ? req[i].to_string() : std::string(); };
  const std::string routing_id = frame(0), request_id = frame(3), address = frame(5), mechanism = frame(7);
  const std::string key = mechanism == "CURVE" && req.size() > 8 ? KeyToZ85(req[8]) : "";
  if (frame(2) != "1.0" || mechanism != "CURVE") {
    Refuse(mechanism, key, address, "only CURVE clients are admitted");
    Reply(routing_id, request_id, false, key);
  } else if (Admitted(key)) {
    Reply(routing_id, request_id, true, key);
  } else if (admit_wait_.count() > 0 && pending_.size() < kMaxPendingClients &&
             PendingFrom(address) < kMaxPendingPerHost) {
    pending_.push_back({routing_id, request_id, key, address, std::chrono::steady_clock::now() + admit_wait_});
  } else {
    Refuse(mechanism, key, address, "public key not on the allowlist");
    Reply(routing_id, request_id, false, key);
  }
  return true;
}

size_t ZapAuthenticator::PendingFrom(const std::string& address) const {
  // ZAP's address is the peer's IP (without the port).
  return static_cast<size_t>(std::count_if(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.address == address; }));
}

void ZapAuthenticator::SettlePending(bool expire_all) {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(pending_, [&](const Pending& p) {
    if (!expire_all && Admitted(p.key)) {
      Reply(p.routing_id, p.request_id, true, p.key);
      return true;
    }
    if (!expire_all && now < p.deadline) return false;
    Refuse("CURVE", p.key, p.address, "public key not admitted in time (not a participant of this round)");
    Reply(p.routing_id, p.request_id, false, p.key);
    return true;
  });
}

}  // namespace longhaul::wan_transport
