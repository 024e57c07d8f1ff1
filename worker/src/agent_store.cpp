#include "agent_store.h"

#include <algorithm>
#include <thread>

#include "agent_channel.h"
#include "longhaul/proto/frame.h"

namespace longhaul::session {

Result<std::shared_ptr<AgentStore>> AgentStore::Connect(const std::string& endpoint, const std::string& server_key,
                                                        std::string sender, v1::StoreRequest identity,
                                                        Duration request_timeout) {
  std::shared_ptr<AgentStore> s(new AgentStore());
  s->endpoint_ = endpoint;
  s->sender_ = std::move(sender);
  s->identity_ = std::move(identity);
  s->request_timeout_ = request_timeout;
  auto dealer = ConnectToAgent(s->ctx_, endpoint, server_key, 0);
  if (!dealer.ok()) return dealer.status().WithContext("rendezvous store");
  s->dealer_ = std::move(*dealer);
  return s;
}

Result<v1::StoreReply> AgentStore::Call(v1::StoreRequest request, Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = ++next_request_;
  v1::ControlMessage msg;
  msg.set_sender(sender_);
  msg.set_request_id(id);
  *msg.mutable_store_request() = std::move(request);
  const std::string frame = proto::EncodeControl(std::move(msg));
  try {
    if (!dealer_->send(zmq::buffer(frame), zmq::send_flags::dontwait)) {
      return Unavailable("rendezvous store: the agent at " + endpoint_ + " takes no request (not connected)");
    }
    for (;;) {
      const auto left = Remaining(deadline);
      if (left.count() == 0) break;
      zmq::pollitem_t item{dealer_->handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, left) <= 0) continue;
      zmq::message_t reply;
      while (dealer_->recv(reply, zmq::recv_flags::dontwait)) {
        auto in = proto::DecodeControl(reply.to_string_view());
        // A late answer to an earlier request that timed out: not this one's.
        if (!in.ok() || !in->has_store_reply() || in->request_id() != id) continue;
        if (in->store_reply().has_error() && in->store_reply().error().code() != v1::ERROR_CODE_UNSPECIFIED) {
          return proto::FromWireError(in->store_reply().error()).WithContext("rendezvous store (agent " + endpoint_ + ")");
        }
        return std::move(*in->mutable_store_reply());
      }
    }
  } catch (const zmq::error_t& e) {
    return Unavailable("rendezvous store: " + std::string(e.what()));
  }
  return DeadlineExceeded("rendezvous store: the agent at " + endpoint_ + " did not answer within " +
                          std::to_string(request_timeout_.count()) + " ms");
}

Status AgentStore::Set(const std::string& key, const std::vector<char>& value) {
  v1::StoreRequest r = identity_;
  r.set_op(v1::StoreRequest::SET);
  r.set_key(key);
  r.set_value(std::string(value.begin(), value.end()));
  return Call(std::move(r), DeadlineAfter(request_timeout_)).status();
}

Result<std::vector<char>> AgentStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  const Deadline deadline = DeadlineAfter(timeout);
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    v1::StoreRequest r = identity_;
    r.set_op(v1::StoreRequest::GET);
    r.set_key(key);
    const Deadline until = std::min(deadline, DeadlineAfter(request_timeout_));
    LONGHAUL_ASSIGN_OR_RETURN(v1::StoreReply reply, Call(std::move(r), until));
    if (reply.found()) return std::vector<char>(reply.value().begin(), reply.value().end());
    if (std::chrono::steady_clock::now() + pause >= deadline) break;
    // Not set yet: the other ranks are still starting; ask again shortly.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return DeadlineExceeded("rendezvous store: key '" + key + "' not set by the other workers within " +
                          std::to_string(timeout.count()) + " ms");
}

Result<std::shared_ptr<AgentStore>> AgentStore::ForWorker(const SessionOptions& options, Duration request_timeout) {
  v1::StoreRequest identity;
  identity.set_job_id(options.job_id);
  identity.set_worker_rank(static_cast<uint32_t>(options.rank));
  identity.set_token(options.worker_token);
  return Connect(options.agent_endpoint, options.agent_public_key, options.region + "/" + std::to_string(options.rank),
                 std::move(identity), request_timeout);
}

Duration StoreRequestTimeout(const SessionOptions& options) {
  return std::min<Duration>(options.collective_timeout, std::chrono::seconds(10));
}

Result<LaunchFromAgent> FetchLaunch(const SessionOptions& options) {
  const Duration timeout = StoreRequestTimeout(options);
  LaunchFromAgent out;
  LONGHAUL_ASSIGN_OR_RETURN(out.store, AgentStore::ForWorker(options, timeout));
  LONGHAUL_ASSIGN_OR_RETURN(auto assignment, out.store->Get(kAssignmentStoreKey, timeout));
  if (!out.assignment.ParseFromArray(assignment.data(), static_cast<int>(assignment.size()))) {
    return DataLoss("the job assignment from the agent at " + options.agent_endpoint + " does not parse");
  }
  if (!options.insecure) {
    LONGHAUL_ASSIGN_OR_RETURN(auto secret, out.store->Get(kWanSecretStoreKey, timeout));
    LONGHAUL_ASSIGN_OR_RETURN(out.wan_keys, wan_transport::KeyPairFromSecret(std::string(secret.begin(), secret.end()),
                                                                             "this launch's WAN key from the agent"));
  }
  return out;
}

}  // namespace longhaul::session
