// WanEndpoint and its CollectiveLink, in-process over loopback with CURVE on.
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <tuple>
#include <zmq.hpp>

#include "longhaul/proto/frame.h"
#include "longhaul/wan_transport/curve.h"
#include "wan_transport/wan_test_util.h"

using namespace longhaul;
using namespace longhaul::wan_transport;
using namespace longhaul::wan_transport::testing;
using namespace std::chrono_literals;

TEST_CASE("a ring of three moves messages in order per (peer, tag)") {
  WanOptions o;
  o.chunk_bytes = 4096;
  o.connections_per_peer = 3;
  Cluster c(3, o);
  std::vector<std::unique_ptr<sync_policies::CollectiveLink>> links;
  for (int r = 0; r < 3; ++r) {
    auto l = c.eps[r]->Join(c.Spec(r));
    REQUIRE(l.ok());
    links.push_back(std::move(*l));
  }
  auto deadline = DeadlineAfter(5s);
  // Everyone sends before receiving (Send is buffered): sizes cover 0, 1, chunk edges.
  const std::vector<size_t> sizes = {0, 1, 4095, 4096, 4097, 50'000};
  for (int r = 0; r < 3; ++r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      REQUIRE(links[r]->Send((r + 1) % 3, 7, Bytes(sizes[i], r * 10 + static_cast<int>(i)), deadline).ok());
    }
  }
  for (int r = 0; r < 3; ++r) {
    int from = (r + 2) % 3;
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto got = links[r]->Recv(from, 7, deadline);
      REQUIRE(got.ok());
      CHECK(*got == Bytes(sizes[i], from * 10 + static_cast<int>(i)));
    }
  }
  CHECK(links[0]->bytes_sent() == 4095 + 4096 + 4097 + 50'000 + 1);
}

TEST_CASE("a group opens the connections per peer it asks for, and a later group adds more") {
  prometheus::Registry registry;
  WanOptions o;
  o.connections_per_peer = 1;
  o.metrics = &registry;
  Cluster c(2, o);
  const std::string gauge = "longhaul_wan_connections{peer=\"" + c.eps[1]->endpoint() + "\"} ";
  auto connections = [&] {
    const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
    const size_t at = text.find(gauge);
    return at == std::string::npos ? -1 : std::stoi(text.substr(at + gauge.size()));
  };
  for (auto [round, asked, expected] : {std::tuple{1u, 3, 3}, {2u, 5, 5}, {3u, 2, 5}, {4u, 0, 5}}) {
    GroupSpec s0 = c.Spec(0, round), s1 = c.Spec(1, round);
    s0.connections_per_peer = asked;
    auto l0 = c.eps[0]->Join(s0);
    auto l1 = c.eps[1]->Join(s1);
    REQUIRE(l0.ok());
    REQUIRE(l1.ok());
    REQUIRE((*l0)->Send(1, 0, Bytes(20'000, static_cast<int>(round)), DeadlineAfter(5s)).ok());
    auto got = (*l1)->Recv(0, 0, DeadlineAfter(5s));
    REQUIRE(got.ok());
    CHECK(*got == Bytes(20'000, static_cast<int>(round)));
    INFO("round " << round << " asked for " << asked);
    CHECK(connections() == expected);
  }
}

TEST_CASE("recycled buffers carry exactly the new message, never stale bytes") {
  Cluster c(2);
  auto l0 = c.eps[0]->Join(c.Spec(0));
  auto l1 = c.eps[1]->Join(c.Spec(1));
  REQUIRE(l0.ok());
  REQUIRE(l1.ok());
  auto deadline = DeadlineAfter(10s);
  // Sizes that shrink and grow, so pooled buffers are reused at other sizes.
  const std::vector<size_t> sizes = {size_t{3} << 20, (size_t{3} << 20) - 12345, size_t{2} << 20, size_t{3} << 20,
                                     size_t{4} << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<std::byte> out = (*l0)->Buffer(sizes[i]);
    REQUIRE(out.size() == sizes[i]);
    const auto want = Bytes(sizes[i], static_cast<int>(i) + 1);
    std::copy(want.begin(), want.end(), out.begin());
    if (i % 2 == 0) REQUIRE((*l0)->SendOwned(1, 3, std::move(out), deadline).ok());
    else REQUIRE((*l0)->Send(1, 3, want, deadline).ok());
    auto got = (*l1)->Recv(0, 3, deadline);
    REQUIRE(got.ok());
    CHECK(*got == want);
    (*l1)->Recycle(std::move(*got));
    REQUIRE(c.eps[0]->Flush(deadline).ok());  // acked: the send buffer is back in the pool
  }
  CHECK((*l0)->bytes_sent() == (size_t{3} << 20) * 3 - 12345 + (size_t{2} << 20) + (size_t{4} << 20));
}

// A sender woken by the ack asks for its next buffer at once: the acknowledged
// transfer's buffer must be back in the pool by then (on a CURVE link ZeroMQ
// lets go of each chunk when it encrypts it, before the peer can ack), or every
// round would fault in a fresh model-sized buffer.
TEST_CASE("once Flush returns, an acknowledged send buffer is the next one handed out") {
  Cluster c(2);
  auto l0 = c.eps[0]->Join(c.Spec(0));
  auto l1 = c.eps[1]->Join(c.Spec(1));
  REQUIRE(l0.ok());
  REQUIRE(l1.ok());
  const auto deadline = DeadlineAfter(10s);
  const size_t n = size_t{3} << 20;
  for (int i = 0; i < 20; ++i) {
    std::vector<std::byte> out = (*l0)->Buffer(n);
    const std::byte* sent = out.data();
    REQUIRE((*l0)->SendOwned(1, 4, std::move(out), deadline).ok());
    auto got = (*l1)->Recv(0, 4, deadline);
    REQUIRE(got.ok());
    REQUIRE(c.eps[0]->Flush(deadline).ok());
    std::vector<std::byte> next = (*l0)->Buffer(n);
    CHECK(next.data() == sent);
    (*l0)->Recycle(std::move(next));
  }
}

namespace {

// This process's ZeroMQ I/O threads ("ZMQbg/IO/N"): tid -> nanoseconds on a CPU.
std::map<std::string, uint64_t> IoThreadCpuNs() {
  std::map<std::string, uint64_t> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("ZMQbg/IO/", 0) != 0) continue;
    std::ifstream sched(task.path() / "schedstat");
    uint64_t ns = 0;
    sched >> ns;
    out[task.path().filename().string()] = ns;
  }
  return out;
}

}  // namespace

// One link's CURVE work must not sit on one core: the sender's connections to a
// peer go to its I/O threads in turn, and each thread encrypts its own.
TEST_CASE("a link's connections are dealt to the endpoint's I/O threads, which share its encryption") {
  const CurveKeyPair rk = Keys(), sk = Keys();
  WanOptions o;
  o.job_id = "job";
  o.allowlist = Allowlist::Of({rk.public_key, sk.public_key});
  o.io_threads = 2;
  o.keys = rk;
  // ZeroMQ starts and names a context's I/O threads asynchronously: wait
  // (bounded) until this many of them run in the process.
  auto io_threads_when = [](size_t n) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    auto threads = IoThreadCpuNs();
    while (threads.size() < n && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(5ms);
      threads = IoThreadCpuNs();
    }
    return threads;
  };
  auto receiver = WanEndpoint::Bind("127.0.0.1:0", o);
  REQUIRE(receiver.ok());
  const auto before = io_threads_when(2);  // the receiver's
  REQUIRE(before.size() == 2);
  o.keys = sk;
  o.connections_per_peer = 2;
  auto sender = WanEndpoint::Bind("127.0.0.1:0", o);
  REQUIRE(sender.ok());
  std::set<std::string> mine;
  for (const auto& [tid, ns] : io_threads_when(4))
    if (!before.count(tid)) mine.insert(tid);
  REQUIRE(mine.size() == 2);
  const std::vector<PeerSpec> peers = {{(*receiver)->endpoint(), rk.public_key}, {(*sender)->endpoint(), sk.public_key}};
  auto rl = (*receiver)->Join({"job", 1, 1, 0, peers});
  auto sl = (*sender)->Join({"job", 1, 1, 1, peers});
  REQUIRE(rl.ok());
  REQUIRE(sl.ok());
  const auto deadline = DeadlineAfter(60s);
  const auto start = IoThreadCpuNs();
  for (int i = 0; i < 16; ++i) {  // 16 MiB each: many 1 MiB chunks over both connections
    REQUIRE((*sl)->SendOwned(0, 0, (*sl)->Buffer(size_t{16} << 20), deadline).ok());
    auto got = (*rl)->Recv(1, 0, deadline);
    REQUIRE(got.ok());
    (*rl)->Recycle(std::move(*got));
  }
  REQUIRE((*sender)->Flush(deadline).ok());
  const auto end = IoThreadCpuNs();
  std::vector<double> used;
  for (const auto& tid : mine) used.push_back(static_cast<double>(end.at(tid) - start.at(tid)));
  CAPTURE(used[0], used[1]);
  // Dealt in turn, each thread encrypts about half; picked by ZeroMQ's load
  // balancing alone, one thread did 3x the other's work or all of it.
  CHECK(std::min(used[0], used[1]) > 0.25 * (used[0] + used[1]));
}

TEST_CASE("recv from a silent peer fails by the deadline naming the peer") {
  Cluster c(2);
  auto l = c.eps[0]->Join(c.Spec(0));
  REQUIRE(l.ok());
  auto got = (*l)->Recv(1, 0, DeadlineAfter(300ms));  // a Recv past its deadline would hang the test
  CHECK(got.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(got.status().message().find("rank 1") != std::string::npos);
  CHECK_FALSE((*l)->Recv(0, 0, DeadlineAfter(10ms)).ok());  // self is not a peer
}

TEST_CASE("a group's deadline bounds every call on its link, and a group past it cannot be joined") {
  Cluster c(2);
  GroupSpec spec = c.Spec(0);
  spec.deadline = DeadlineAfter(300ms);
  auto l = c.eps[0]->Join(spec);
  REQUIRE(l.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto got = (*l)->Recv(1, 0, DeadlineAfter(30s));  // the call's own deadline is far later
  CHECK(got.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  GroupSpec late = c.Spec(0, 2, 2);
  late.deadline = std::chrono::steady_clock::now() - 1ms;
  CHECK(c.eps[0]->Join(late).status().code() == StatusCode::kDeadlineExceeded);
}

TEST_CASE("cancelling an epoch ends a blocked recv at once, later epochs still work") {
  Cluster c(2);
  auto blocked = c.eps[0]->Join(c.Spec(0, 3, 7));
  REQUIRE(blocked.ok());
  std::thread canceller([&] {
    std::this_thread::sleep_for(200ms);
    c.eps[0]->CancelThrough(7);
  });
  auto got = (*blocked)->Recv(1, 0, DeadlineAfter(30s));  // rank 1 never sends
  canceller.join();
  // Aborted, not DeadlineExceeded: the cancellation ended the wait, not the 30 s deadline.
  CHECK(got.status().code() == StatusCode::kAborted);
  CHECK(got.status().message().find("rank 1") != std::string::npos);
  // The cancelled epoch can no longer be joined; the retry's epoch can, and moves data.
  CHECK(c.eps[0]->Join(c.Spec(0, 3, 7)).status().code() == StatusCode::kAborted);
  auto l0 = c.eps[0]->Join(c.Spec(0, 3, 8));
  auto l1 = c.eps[1]->Join(c.Spec(1, 3, 8));
  REQUIRE(l0.ok());
  REQUIRE(l1.ok());
  REQUIRE((*l1)->Send(0, 0, Bytes(5000, 3), DeadlineAfter(5s)).ok());
  auto retry = (*l0)->Recv(1, 0, DeadlineAfter(5s));
  REQUIRE(retry.ok());
  CHECK(*retry == Bytes(5000, 3));
}

TEST_CASE("frames of another job or a stale epoch are dropped, not delivered") {
  Cluster c(2);
  auto newer = c.eps[1]->Join(c.Spec(1, 2, 5));
  REQUIRE(newer.ok());
  {
    auto stale_sender = c.eps[0]->Join(c.Spec(0, 1, 4));
    REQUIRE(stale_sender.ok());
    REQUIRE((*stale_sender)->Send(1, 0, Bytes(10, 1), DeadlineAfter(1s)).ok());
    auto deadline = std::chrono::steady_clock::now() + 3s;
    while (c.eps[1]->dropped_frames() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  }
  CHECK(c.eps[1]->dropped_frames() >= 1);
  CHECK_FALSE((*newer)->Recv(0, 0, DeadlineAfter(200ms)).ok());
  CHECK(c.eps[1]->Join(c.Spec(1, 1, 4)).status().code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("a peer whose key is not allowlisted gets nothing through") {
  Cluster c(1);
  WanOptions o;
  o.job_id = "job";
  o.keys = Keys();
  o.allowlist = Allowlist::Of({o.keys.public_key, c.keys[0].public_key});
  auto intruder = WanEndpoint::Bind("127.0.0.1:0", o);
  REQUIRE(intruder.ok());
  GroupSpec s{"job", 1, 1, 1, {c.Peer(0), {(*intruder)->endpoint(), o.keys.public_key}}};
  auto sender = (*intruder)->Join(s);
  REQUIRE(sender.ok());
  REQUIRE((*sender)->Send(0, 0, Bytes(100, 3), DeadlineAfter(1s)).ok());
  GroupSpec rs = c.Spec(0);
  rs.peers.push_back({(*intruder)->endpoint(), o.keys.public_key});
  auto r2 = c.eps[0]->Join(rs);
  REQUIRE(r2.ok());
  CHECK((*r2)->Recv(1, 0, DeadlineAfter(700ms)).status().code() == StatusCode::kDeadlineExceeded);
  CHECK(c.eps[0]->rejected_connections() >= 1);
}

TEST_CASE("the probe measures RTT and bandwidth and metrics are exported") {
  prometheus::Registry registry;
  WanOptions o;
  o.metrics = &registry;
  Cluster c(2, o);
  auto p = c.eps[0]->Probe(c.Peer(1), 1 << 20, DeadlineAfter(5s));
  REQUIRE(p.ok());
  CHECK(p->rtt_seconds > 0);
  CHECK(p->rtt_seconds < 1.0);
  CHECK(p->bytes_per_second > 1e6);
  auto m = c.eps[0]->measurements();
  REQUIRE(m.peers.count(c.eps[1]->endpoint()) == 1);
  auto l0 = c.eps[0]->Join(c.Spec(0));
  auto l1 = c.eps[1]->Join(c.Spec(1));
  REQUIRE(l0.ok());
  REQUIRE(l1.ok());
  REQUIRE((*l0)->Send(1, 0, Bytes(300'000, 1), DeadlineAfter(5s)).ok());
  REQUIRE((*l1)->Recv(0, 0, DeadlineAfter(5s)).ok());
  std::string text;
  for (int i = 0; i < 100 && text.find("longhaul_wan_transfer_duration_seconds_count 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
    text = prometheus::TextSerializer().Serialize(registry.Collect());
  }
  CHECK(text.find("longhaul_wan_bytes_sent_total") != std::string::npos);
  CHECK(text.find("longhaul_wan_rtt_seconds") != std::string::npos);
  CHECK(text.find("longhaul_wan_link_bandwidth_bytes_per_second") != std::string::npos);
  CHECK(text.find("longhaul_wan_transfer_duration_seconds_count 1") != std::string::npos);
}

TEST_CASE("with admit_group_peers a listener admits the keys of the groups it joined, also for a peer that came first") {
  WanOptions o;
  o.job_id = "job";
  o.admit_group_peers = true;  // empty allowlists: only group peers get in
  o.timeouts.link_io = 1s;
  o.timeouts.collective = 2s;  // how long a held peer waits to be admitted
  std::vector<CurveKeyPair> keys = {Keys(), Keys(), Keys()};
  std::vector<std::unique_ptr<WanEndpoint>> eps;
  for (const auto& k : keys) {
    o.keys = k;
    auto ep = WanEndpoint::Bind("127.0.0.1:0", o);
    REQUIRE(ep.ok());
    eps.push_back(std::move(*ep));
  }
  // The group is endpoints 0 and 1; endpoint 2 is an outsider that knows 1's
  // endpoint and key but was never in one of 1's groups.
  GroupSpec g{"job", 1, 1, 0, {{eps[0]->endpoint(), keys[0].public_key}, {eps[1]->endpoint(), keys[1].public_key}}};
  auto first = eps[0]->Join(g);
  REQUIRE(first.ok());
  REQUIRE((*first)->Send(1, 5, Bytes(2000, 1), DeadlineAfter(1s)).ok());  // 1 has not joined yet
  GroupSpec outsider{"job", 1, 1, 0, {{eps[2]->endpoint(), keys[2].public_key}, {eps[1]->endpoint(), keys[1].public_key}}};
  auto intruder = eps[2]->Join(outsider);
  REQUIRE(intruder.ok());
  REQUIRE((*intruder)->Send(1, 5, Bytes(2000, 2), DeadlineAfter(1s)).ok());
  g.rank = 1;
  auto second = eps[1]->Join(g);
  REQUIRE(second.ok());
  auto got = (*second)->Recv(0, 5, DeadlineAfter(5s));
  REQUIRE(got.ok());
  CHECK(*got == Bytes(2000, 1));
  // The outsider is held, then refused when the wait ends; nothing of it arrives.
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (eps[1]->rejected_connections() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);  // polling a counter, bounded
  }
  CHECK(eps[1]->rejected_connections() >= 1);
  CHECK((*second)->Recv(0, 6, DeadlineAfter(200ms)).status().code() == StatusCode::kDeadlineExceeded);
}

TEST_CASE("a peer that stops reading holds up the sends to it, not those to the other peers") {
  // Rank 1 is a CURVE listener that never reads: once its queue, the socket
  // buffers and the sender's queue for it are full (about 8 MiB here), sends to
  // it wait. Rank 2 must still get everything rank 0 sends it, though the two
  // transfers go out chunk by chunk in turn and rank 2's is still going then.
  const std::vector<CurveKeyPair> keys = {Keys(), Keys(), Keys()};
  zmq::context_t ctx;
  zmq::socket_t stuck(ctx, zmq::socket_type::router);
  stuck.set(zmq::sockopt::linger, 0);
  stuck.set(zmq::sockopt::rcvhwm, 1);
  stuck.set(zmq::sockopt::rcvbuf, 4096);
  MakeCurveServer(stuck, keys[1]);
  stuck.bind("tcp://127.0.0.1:*");
  WanOptions o;
  o.job_id = "job";
  o.chunk_bytes = 64 << 10;
  o.connections_per_peer = 1;
  o.allowlist = Allowlist::Of({keys[0].public_key, keys[2].public_key});
  std::vector<std::unique_ptr<WanEndpoint>> eps;
  for (int i : {0, 2}) {
    o.keys = keys[i];
    auto ep = WanEndpoint::Bind("127.0.0.1:0", o);
    REQUIRE(ep.ok());
    eps.push_back(std::move(*ep));
  }
  auto spec = [&](int rank) {
    return GroupSpec{"job", 1, 1, rank,
                     {{eps[0]->endpoint(), keys[0].public_key},
                      {stuck.get(zmq::sockopt::last_endpoint), keys[1].public_key},
                      {eps[1]->endpoint(), keys[2].public_key}}};
  };
  auto sender = eps[0]->Join(spec(0));
  auto receiver = eps[1]->Join(spec(2));
  REQUIRE(sender.ok());
  REQUIRE(receiver.ok());
  const auto deadline = DeadlineAfter(20s);
  constexpr size_t kBytes = size_t{24} << 20;  // 384 chunks each
  REQUIRE((*sender)->Send(1, 0, Bytes(kBytes, 1), deadline).ok());  // queued: Send does not wait for delivery
  REQUIRE((*sender)->Send(2, 0, Bytes(kBytes, 2), deadline).ok());
  auto got = (*receiver)->Recv(0, 0, deadline);
  REQUIRE(got.ok());
  CHECK(*got == Bytes(kBytes, 2));
}
