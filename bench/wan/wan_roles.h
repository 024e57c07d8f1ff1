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
};

// Binds, prints "endpoint tcp://...", receives one message, prints "received N".
int RunReceiver(const RoleOptions& o);
// Sends one message, waits for its ack, prints "seconds T".
int RunSender(const RoleOptions& o);

}  // namespace longhaul::bench
