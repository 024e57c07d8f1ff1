// wan_test_sender: a real sender process for the integration tests. Joins a
// two-member group as rank 1 and sends one message of --size bytes (a
// deterministic pattern of --seed) to rank 0, then waits for the ack.
// Prints "sent <bytes> <xxh3-hex>" on success, "error <status>" and exit 1 otherwise.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "longhaul/common/checksum.h"
#include "longhaul/wan_transport/endpoint.h"

using namespace longhaul;
using namespace longhaul::wan_transport;

static std::vector<std::byte> Pattern(size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v[i] = static_cast<std::byte>(x);
  }
  return v;
}

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: wan_test_sender KEYFILE TO_ENDPOINT TO_PUBKEY SIZE SEED(round = SEED+1) [PACING_BYTES_PER_S]\n");
    return 2;
  }
  auto keys = LoadKeyPair(argv[1]);
  if (!keys.ok()) {
    std::printf("error %s\n", keys.status().ToString().c_str());
    return 1;
  }
  WanOptions o;
  o.job_id = "itest";
  o.keys = *keys;
  o.allowlist = Allowlist::Of({std::string(argv[3])});
  o.connections_per_peer = 2;
  if (argc > 6) o.pacing_bytes_per_second = std::atof(argv[6]);
  auto ep = WanEndpoint::Bind("127.0.0.1:0", o);
  if (!ep.ok()) {
    std::printf("error %s\n", ep.status().ToString().c_str());
    return 1;
  }
  // Each seed is its own round, so one receiver can take several senders in turn.
  uint32_t round = static_cast<uint32_t>(std::atoi(argv[5])) + 1;
  GroupSpec spec{"itest", round, 1, 1, {{argv[2], argv[3]}, {(*ep)->endpoint(), keys->public_key}}};
  auto link = (*ep)->Join(spec);
  if (!link.ok()) {
    std::printf("error %s\n", link.status().ToString().c_str());
    return 1;
  }
  auto data = Pattern(std::strtoull(argv[4], nullptr, 10), static_cast<unsigned>(std::atoi(argv[5])));
  std::printf("started\n");
  std::fflush(stdout);
  auto deadline = DeadlineAfter(std::chrono::seconds(60));
  Status s = (*link)->Send(0, 0, data, deadline);
  if (s.ok()) s = (*ep)->Flush(deadline);
  if (!s.ok()) {
    std::printf("error %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("sent %zu %016llx\n", data.size(), static_cast<unsigned long long>(Checksum64(data.data(), data.size())));
  return 0;
}
