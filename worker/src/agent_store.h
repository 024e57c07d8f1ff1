// AgentStore: the intra-region rendezvous store as a worker sees it: its
// agent's LaunchStore (region_agent/launch_store.h), reached over the agent's
// worker socket with requests that carry this worker's token. A connection of
// its own: the group is formed before the session's AgentChannel connects.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <zmq.hpp>

#include "longhaul/common/timeouts.h"
#include "longhaul/session/session_options.h"
#include "longhaul/wan_transport/curve.h"
#include "longhaul/trainer/intra_region.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::session {

class AgentStore final : public trainer::RendezvousStore {
 public:
  static Result<std::shared_ptr<AgentStore>> Connect(const std::string& endpoint, const std::string& server_key,
                                                     std::string sender, v1::StoreRequest identity,
                                                     Duration request_timeout);
  // The store of `options`' launch, as its worker (job, rank and token from the options).
  static Result<std::shared_ptr<AgentStore>> ForWorker(const SessionOptions& options, Duration request_timeout);
  Status Set(const std::string& key, const std::vector<char>& value) override;
  // Asks until the key is set or `timeout` passes (kDeadlineExceeded naming it).
  Result<std::vector<char>> Get(const std::string& key, std::chrono::milliseconds timeout) override;

 private:
  AgentStore() = default;
  // One request and its reply (matched by request id), by the deadline.
  Result<v1::StoreReply> Call(v1::StoreRequest request, Deadline deadline);

  std::string endpoint_;
  std::string sender_;
  v1::StoreRequest identity_;  // job id, rank, token
  Duration request_timeout_{};
  std::mutex mu_;              // one request at a time on the socket
  uint64_t next_request_ = 0;
  zmq::context_t ctx_{1};
  std::unique_ptr<zmq::socket_t> dealer_;
};

// What a worker reads from its agent before anything else, on whatever host
// it runs: the job's assignment, this launch's WAN key pair (unless insecure),
// and the store its intra-region group meets through.
struct LaunchFromAgent {
  v1::JobAssignment assignment;
  wan_transport::CurveKeyPair wan_keys;
  std::shared_ptr<AgentStore> store;
};
Result<LaunchFromAgent> FetchLaunch(const SessionOptions& options);

// How long one store request of a worker may take: its collective timeout, at most 10 s.
Duration StoreRequestTimeout(const SessionOptions& options);

}  // namespace longhaul::session
