// ControlClient: a DEALER connection to the orchestrator for request/reply.
//
// Used by the CLI (and by tests playing agents). Every Call has a deadline: an
// orchestrator that is not there, or that refuses our key during the CURVE
// handshake, yields kUnavailable / kPermissionDenied within `timeout` instead of
// hanging. An Error reply becomes the Status it carries.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <zmq.hpp>

#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::orchestrator {

struct ControlClientOptions {
  std::string endpoint;                   // tcp://host:port
  bool insecure = false;
  wan_transport::CurveKeyPair own_keys;   // required unless insecure
  std::string server_public_key;          // required unless insecure
  std::chrono::milliseconds timeout{5000};
  std::string sender = "cli";
};

class ControlClient {
 public:
  static Result<std::unique_ptr<ControlClient>> Connect(ControlClientOptions options);
  ~ControlClient();

  // Sends `request` and waits for the reply with the same request_id. With
  // `resend_every` > 0 the request is sent again each time that passes without
  // a reply (an orchestrator that restarted lost it): only for requests that
  // are safe to repeat (reads, a submit with an idempotency key).
  Result<v1::ControlMessage> Call(v1::ControlMessage request,
                                  std::chrono::milliseconds resend_every = std::chrono::milliseconds(0));
  // Fire and forget (agents' heartbeats, reports).
  Status Send(v1::ControlMessage msg);
  // Next message from the orchestrator, or kDeadlineExceeded after `wait`.
  Result<v1::ControlMessage> Receive(std::chrono::milliseconds wait);

 private:
  ControlClient() = default;
  Status CheckRefused();

  ControlClientOptions options_;
  zmq::context_t ctx_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::unique_ptr<zmq::socket_t> monitor_;
  uint64_t next_request_id_ = 1;
  bool auth_failed_ = false;  // the last CURVE handshake failed (none has succeeded since)
};

}  // namespace longhaul::orchestrator
