// LinkEmulator: a userspace TCP relay that makes a loopback path behave like a
// WAN link (kernel netem is not available here). Every accepted connection is
// relayed to `forward`; each direction delays bytes by delay (+- jitter, never
// reordering bytes of a stream) and paces them with a LinkPacer (a token bucket
// that keeps its rate when the relay's threads are scheduled late) shared by all
// connections in that direction, so `rate` applies to the whole emulated link.
// Used by the longhaul-linkem binary, tests and bench/wan. Reshape() changes
// rate, delay and jitter while it runs (longhaul-linkem --control-file).
//
// Note: the two TCP legs each run their own congestion control on loopback; the
// relay bounds its buffering per direction (delay*rate plus slack) so a sender
// sees backpressure, but TCP window/RTT dynamics of a real WAN are not emulated.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "longhaul/common/status.h"

namespace longhaul::wan_transport {

struct LinkEmulatorOptions {
  std::string listen = "127.0.0.1:0";         // host:port, port 0 = any
  std::string forward;                         // host:port
  double rate_bytes_per_second = 0;            // 0 = unlimited
  std::chrono::microseconds delay{0};          // one-way, each direction
  std::chrono::microseconds jitter{0};         // +- uniform, order preserved
};

// What a link does to the bytes it carries; a running emulator can take a new one.
struct LinkShape {
  double rate_bytes_per_second = 0;      // 0 = unlimited
  std::chrono::microseconds delay{0};    // one-way, each direction
  std::chrono::microseconds jitter{0};   // +- uniform, <= delay
  Status Validate() const;
  std::string ToString() const;  // "rate-mbit=50 delay-ms=40 jitter-ms=2", as ParseLinkControl reads it
};

// Parses "host:port" (IPv4 literal or "localhost"); errors name the text.
Status ParseHostPort(const std::string& text, std::string* host, int* port);

// A control text: whitespace-separated key=value settings over `current`, any
// of rate-mbit, delay-ms, jitter-ms (e.g. "rate-mbit=12.5 delay-ms=80");
// '#' starts a comment. Errors name the setting and the problem.
Result<LinkShape> ParseLinkControl(const std::string& text, const LinkShape& current);

class LinkEmulator {
 public:
  static Result<std::unique_ptr<LinkEmulator>> Start(const LinkEmulatorOptions& options);
  ~LinkEmulator();  // stops accepting, closes every relayed connection
  std::string listen_address() const;  // "127.0.0.1:PORT"
  int port() const;
  uint64_t connections_accepted() const;
  // Changes the link while it runs: bytes read from now on are delayed and
  // paced by the new shape (bytes already queued keep their release times,
  // and a stream's bytes stay in order).
  Status Reshape(const LinkShape& shape);
  LinkShape shape() const;

  class Impl;

 private:
  explicit LinkEmulator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace longhaul::wan_transport
