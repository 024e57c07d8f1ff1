#include "wan_roles.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cpu_floor.h"
#include "longhaul/wan_transport/endpoint.h"

namespace longhaul::bench {
namespace {

using namespace wan_transport;
namespace fs = std::filesystem;

Result<WanOptions> Options(const RoleOptions& o, const std::string& self, const std::string& other) {
  WanOptions w;
  w.job_id = "bench";
  w.encryption = o.encryption;
  w.connections_per_peer = o.streams;
  w.max_inflight_bytes = size_t{512} << 20;
  w.max_message_bytes = size_t{8} << 30;
  w.timeouts.link_io = std::chrono::seconds(30);
  LONGHAUL_ASSIGN_OR_RETURN(w.keys, LoadKeyPair(fs::path(o.dir) / (self + ".key")));
  LONGHAUL_ASSIGN_OR_RETURN(std::string peer, LoadPublicKey(fs::path(o.dir) / (other + ".pub")));
  w.allowlist = Allowlist::Of({peer});
  return w;
}

int Fail(const Status& s) {
  std::printf("error %s\n", s.ToString().c_str());
  std::fflush(stdout);
  return 1;
}

}  // namespace

int RunReceiver(const RoleOptions& o) {
  auto w = Options(o, "recv", "send");
  if (!w.ok()) return Fail(w.status());
  auto send_pub = LoadPublicKey(fs::path(o.dir) / "send.pub");
  auto ep = WanEndpoint::Bind(o.bind, *w);
  if (!ep.ok()) return Fail(ep.status());
  GroupSpec spec{"bench", 1, 1, 0, {{(*ep)->endpoint(), w->keys.public_key}, {"tcp://0.0.0.0:1", *send_pub}}};
  auto link = (*ep)->Join(spec);
  if (!link.ok()) return Fail(link.status());
  // Steady state of a training run, where every round moves the same sizes:
  // the pool holds two buffers of this size from earlier rounds (the timed
  // transfer may arrive before the warm-up's buffer is recycled), then the
  // warm-up transfer (its buffer recycled, as a collective does), then the
  // timed one.
  std::vector<std::byte> spare1 = (*link)->Buffer(o.bytes), spare2 = (*link)->Buffer(o.bytes);
  (*link)->Recycle(std::move(spare1));
  (*link)->Recycle(std::move(spare2));
  std::printf("endpoint %s\n", (*ep)->endpoint().c_str());
  std::fflush(stdout);
  auto warm = (*link)->Recv(1, 1, DeadlineAfter(std::chrono::seconds(120)));
  if (!warm.ok()) return Fail(warm.status());
  (*link)->Recycle(std::move(*warm));
  // The sender starts the timed transfer only after this line (RoleOptions::go).
  const ProcessUsage before = UsageNow();
  std::printf("ready\n");
  std::fflush(stdout);
  auto got = (*link)->Recv(1, 0, DeadlineAfter(std::chrono::seconds(120)));
  if (!got.ok()) return Fail(got.status());
  const ProcessUsage used = UsageNow() - before;
  std::printf("received %zu cpu %.6f faults %ld\n", got->size(), used.cpu_seconds, used.page_faults);
  std::fflush(stdout);
  return 0;
}

int RunSender(const RoleOptions& o) {
  auto w = Options(o, "send", "recv");
  if (!w.ok()) return Fail(w.status());
  auto ep = WanEndpoint::Bind("0.0.0.0:0", *w);
  if (!ep.ok()) return Fail(ep.status());
  auto recv_pub = LoadPublicKey(fs::path(o.dir) / "recv.pub");
  GroupSpec spec{"bench", 1, 1, 1, {{o.to, *recv_pub}, {(*ep)->endpoint(), w->keys.public_key}}};
  auto link = (*ep)->Join(spec);
  if (!link.ok()) return Fail(link.status());
  // Warm up with one transfer of the same size, so the timing is the steady
  // state of a training run, where every round moves the same sizes: CURVE
  // handshakes done, transfer buffers recycled (fresh pages cost a fault each).
  auto deadline = DeadlineAfter(std::chrono::seconds(120));
  std::vector<std::byte> data(o.bytes, std::byte{0x5a});
  Status s = (*link)->Send(0, 1, data, deadline);
  if (s.ok()) s = (*ep)->Flush(deadline);
  if (!s.ok()) return Fail(s);
  if (!o.go.empty()) {
    // Blocks until the bench, having seen the receiver ready, opens the FIFO and writes.
    std::ifstream go(o.go);
    if (go.get() == std::char_traits<char>::eof()) return Fail(Unavailable("no go signal on " + o.go));
  }
  const ProcessUsage before = UsageNow();
  auto t0 = std::chrono::steady_clock::now();
  s = (*link)->Send(0, 0, data, deadline);
  if (s.ok()) s = (*ep)->Flush(deadline);
  if (!s.ok()) return Fail(s);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ProcessUsage used = UsageNow() - before;
  std::printf("seconds %.6f cpu %.6f faults %ld\n", secs, used.cpu_seconds, used.page_faults);
  std::fflush(stdout);
  return 0;
}

}  // namespace longhaul::bench
