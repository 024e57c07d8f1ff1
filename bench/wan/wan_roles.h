// The two halves of one WAN transfer, run as separate processes (possibly inside
// network namespaces) by bench_wan_throughput.
#pragma once

#include <cstddef>
#include <string>

namespace longhaul::bench {

struct RoleOptions {
  std::string dir;          // key files: recv.key, send.key (+ .pub)
  std::string bind;         // receiver: IP:0
  std::string to;           // sender: tcp://IP:PORT (receiver or a relay in front of it)
  size_t bytes = 0;
  int streams = 4;
  bool encryption = true;
  // Sender: a FIFO to read one byte from between the warm-up and the timed
  // transfer, written once the receiver has printed "ready" (its CPU clock
  // then covers the whole timed transfer). Empty: no wait.
  std::string go;
};

// Binds, prints "endpoint tcp://...", receives the warm-up message, prints
// "ready", receives the timed one, prints "received N cpu C faults F" (CPU
// seconds and page faults of the process during the timed transfer).
int RunReceiver(const RoleOptions& o);
// Sends the warm-up message, waits for `go`, sends the timed one, waits for
// its ack, prints "seconds T cpu C faults F".
int RunSender(const RoleOptions& o);

}  // namespace longhaul::bench
