// AgentChannel: a worker's control connection to its agent (ZeroMQ DEALER on
// the agent's worker socket), with its own I/O thread.
//
// The thread keeps reading while the worker computes or exchanges over the WAN,
// so an ABORT or STOP takes effect at once: every decoded message is shown to
// the watcher on the I/O thread first (which may cancel the WAN exchange), then
// queued for Next(). Frames that do not decode are dropped with a log line.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/session/agent_link.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::session {

// A DEALER on the agent's worker socket: CURVE with a key pair made for this
// connection when the agent gave its public key (it authenticates requests by
// the launch's token, not by the client's key), plain otherwise.
Result<std::unique_ptr<zmq::socket_t>> ConnectToAgent(zmq::context_t& ctx, const std::string& endpoint,
                                                      const std::string& server_key, int linger_ms);

class AgentChannel final : public AgentLink {
 public:
  // `sender` names this worker in every message ("region/rank"); a non-empty
  // `server_key` makes the connection CURVE (ConnectToAgent).
  static Result<std::unique_ptr<AgentChannel>> Connect(const std::string& endpoint, const std::string& server_key,
                                                       std::string sender, Watcher watcher);
  ~AgentChannel() override;

  void Send(v1::ControlMessage msg) override;
  std::optional<v1::ControlMessage> Next(Deadline deadline) override;

 private:
  AgentChannel(std::string sender, Watcher watcher) : sender_(std::move(sender)), watcher_(std::move(watcher)) {}
  void Loop();

  std::string sender_;
  Watcher watcher_;
  zmq::context_t ctx_;
  std::unique_ptr<zmq::socket_t> dealer_;  // used by the I/O thread only
  std::mutex mu_;
  std::condition_variable arrived_;
  std::deque<std::string> outbox_;         // encoded frames
  std::deque<v1::ControlMessage> inbox_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace longhaul::session
