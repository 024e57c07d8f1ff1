// ControlServer: the orchestrator's ZeroMQ ROUTER and its single-threaded loop.
//
// One thread polls the socket with a short timeout and calls Orchestrator::Tick
// at least every `tick`, so every deadline is checked without timer threads.
// CURVE is on unless `insecure`: the server key authenticates the orchestrator
// and a ZAP handler admits only allowlisted client keys (agents and CLI users).
// Malformed, oversized or undecodable messages are answered with an Error (when
// an identity is known), logged and counted; nothing a peer sends can crash it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <zmq.hpp>

#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::orchestrator {

class Orchestrator;
class OrchestratorMetrics;

struct ControlServerOptions {
  std::string bind = "tcp://127.0.0.1:0";
  bool insecure = false;                      // CURVE off (explicit opt-out)
  wan_transport::CurveKeyPair server_keys;    // required unless insecure
  wan_transport::Allowlist allowlist;         // client keys admitted (required unless insecure)
  std::chrono::milliseconds tick{100};
  size_t max_message_bytes = size_t{16} << 20;
};

class ControlServer {
 public:
  static Result<std::unique_ptr<ControlServer>> Start(ControlServerOptions options);
  ~ControlServer();

  // The endpoint actually bound ("tcp://127.0.0.1:40123").
  const std::string& endpoint() const { return endpoint_; }
  // Sends one message to a peer; drops it (logged) if the peer is gone.
  void Send(const std::string& identity, const v1::ControlMessage& msg);
  // Serves until `stop` becomes true. Metrics may be null.
  Status Run(Orchestrator& orchestrator, const std::atomic<bool>& stop, OrchestratorMetrics* metrics);
  uint64_t refused_clients() const;

 private:
  ControlServer() = default;
  void HandleIncoming(Orchestrator& orchestrator, OrchestratorMetrics* metrics);

  ControlServerOptions options_;
  zmq::context_t ctx_;
  std::unique_ptr<wan_transport::ZapAuthenticator> zap_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string endpoint_;
};

}  // namespace longhaul::orchestrator
