// CPU per byte of the WAN data plane and its floor, for bench_wan_throughput
// and bench_wan_round (issue 35's machine-independent figure).
//
// The floor is what moving the bytes securely cannot avoid: libsodium's CURVE
// primitive (crypto_box_easy_afternm / XSalsa20-Poly1305, the one ZeroMQ's
// CURVE uses per message) encrypting and decrypting every byte, plus one memcpy
// per side, on messages of the transport's chunk size. Without encryption it is
// the memcpy per side alone.
#pragma once

#include <cstddef>

namespace longhaul::bench {

// What this process (all threads) has used so far.
struct ProcessUsage {
  double cpu_seconds = 0;  // user + system
  long page_faults = 0;    // minor + major
  ProcessUsage operator-(const ProcessUsage& o) const { return {cpu_seconds - o.cpu_seconds, page_faults - o.page_faults}; }
};
ProcessUsage UsageNow();

// CPU-seconds per GB (1e9 bytes) of the floor, measured now on this thread over
// `sample_bytes` bytes cut into `message_bytes` messages (the best of `reps`).
double FloorCpuSecondsPerGb(bool encryption, size_t message_bytes, size_t sample_bytes = size_t{256} << 20, int reps = 3);

}  // namespace longhaul::bench
