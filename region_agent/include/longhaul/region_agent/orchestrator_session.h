// OrchestratorSession: the agent's connection to the orchestrator, on its own
// thread so heartbeats never wait on job work (timeouts.h: a region stuck in a
// slow collective still heartbeats).
//
// It registers (and registers again when acks stop for heartbeat_miss, or the
// orchestrator says the region is unknown, e.g. after an orchestrator restart),
// heartbeats with what the HealthBoard says, and relays everything else: frames
// from the orchestrator go to the controller over an inproc PAIR socket, frames
// the controller writes on that socket go to the orchestrator unchanged.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "longhaul/common/timeouts.h"
#include "longhaul/region_agent/health_board.h"
#include "longhaul/v1/control.pb.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::region_agent {

struct SessionOptions {
  std::string region;
  std::string orchestrator;           // tcp://host:port
  bool insecure = false;
  wan_transport::CurveKeyPair keys;   // this region's key pair (unused when insecure)
  std::string server_public_key;      // the orchestrator's
  v1::Capacity capacity;
  std::string data_host;
  std::string session_id;             // RegisterRegion.session_id: one per agent process
  std::string controller_endpoint;    // inproc:// address the controller's PAIR is bound to
  Timeouts timeouts;
  Duration register_retry{std::chrono::seconds(1)};
};

class OrchestratorSession {
 public:
  OrchestratorSession(zmq::context_t& ctx, SessionOptions options, HealthBoard& health);
  ~OrchestratorSession();
  OrchestratorSession(const OrchestratorSession&) = delete;
  OrchestratorSession& operator=(const OrchestratorSession&) = delete;

  void Start();
  void Stop();
  bool registered() const { return registered_.load(); }
  uint64_t heartbeats_sent() const { return heartbeats_sent_.load(); }
  uint64_t registrations() const { return registrations_.load(); }

 private:
  void Run();
  std::unique_ptr<zmq::socket_t> Connect();
  void SendToOrchestrator(zmq::socket_t& dealer, v1::ControlMessage msg);
  // Handles one orchestrator frame; returns false when the session must register again.
  bool HandleFromOrchestrator(const zmq::message_t& frame, zmq::socket_t& pair);

  zmq::context_t& ctx_;
  SessionOptions options_;
  HealthBoard& health_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> registered_{false};
  std::atomic<uint64_t> heartbeats_sent_{0};
  std::atomic<uint64_t> registrations_{0};
  uint64_t request_id_ = 0;
  uint64_t heartbeat_seq_ = 0;
  Duration heartbeat_interval_{500};
  int heartbeat_misses_ = 6;  // the orchestrator's, once it told us (RegisterReply.timeouts)
  std::chrono::steady_clock::time_point last_ack_{};
  std::thread thread_;
};

}  // namespace longhaul::region_agent
