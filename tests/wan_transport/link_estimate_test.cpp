// LinkEstimator: what the WAN endpoint reports about a link, from the transfers a
// job makes anyway. Pure arithmetic first, then an endpoint sending through an
// emulated link (the in-process LinkEmulator behind longhaul-linkem) whose rate
// and delay are known.
#include <thread>

#include "longhaul/sync_policies/cross_region.h"
#include "longhaul/wan_transport/link_emulator.h"
#include "longhaul/wan_transport/link_matrix.h"
#include "wan_transport/wan_test_util.h"

using namespace longhaul;
using namespace longhaul::wan_transport;
using namespace longhaul::wan_transport::testing;
using namespace std::chrono_literals;

TEST_CASE("the RTT is the least recent round trip: queueing inflates a sample, it never deflates one") {
  LinkEstimator e;
  e.AddRtt("p", 0.050);
  e.AddRtt("p", 0.300);  // queued behind a transfer
  CHECK(e.Get("p").rtt_seconds == Approx(0.050));
  e.AddRtt("p", 0.045);
  CHECK(e.Get("p").rtt_seconds == Approx(0.045));
  // The window forgets: a link whose delay grew is seen within kRttWindow samples.
  for (size_t i = 0; i < LinkEstimator::kRttWindow; ++i) e.AddRtt("p", 0.120);
  CHECK(e.Get("p").rtt_seconds == Approx(0.120));
  e.AddRtt("p", -1);  // no round trip: ignored
  CHECK(e.Get("p").samples == LinkEstimator::kRttWindow + 3);
  CHECK(e.Get("other").samples == 0);
}

TEST_CASE("a busy period's bytes over the time from its marker's send plus one RTT to its last ack give the link's rate") {
  LinkEstimator e;
  // Three transfers of 1 MB overlap (several connections, any order of acks):
  // one period, its clock started by the lead probe sent at 9.96 and acked 40 ms later.
  const auto a = e.Queued("p");
  const auto b = e.Queued("p");
  CHECK(a.opens);
  CHECK_FALSE(b.opens);
  CHECK(b.period == a.period);
  e.MarkerAcked("p", a.period, 9.96, 10.0);
  CHECK(e.Get("p").rtt_seconds == Approx(0.04));
  e.Done("p", a.period, 1'000'000, true, 10.3);
  const auto c = e.Queued("p");  // still busy: joins the period
  CHECK(c.period == a.period);
  e.Done("p", c.period, 1'000'000, true, 10.5);
  // Still open, with b's bytes on their way: until a first period ends, its
  // part acked so far stands for the link (2 MB acked in the 0.5 s from its start).
  CHECK(e.Get("p").bytes_per_second == Approx(4e6));
  CHECK(e.Snapshot().peers["p"].bytes_per_second == Approx(4e6));
  e.Done("p", b.period, 1'000'000, true, 10.6);
  CHECK(e.Get("p").bytes_per_second == Approx(5e6));
  // The next period's lead came back late, behind the period's bytes on another
  // connection: its clock still starts one least RTT after the send. The EWMA
  // blends it (0.7 * 5e6 + 0.3 * 10e6).
  const auto d = e.Queued("p");
  CHECK(d.opens);
  CHECK(d.period != a.period);
  e.MarkerAcked("p", d.period, 19.96, 20.09);
  e.MarkerAcked("p", d.period, 19.96, 20.0);  // only the first marker counts
  CHECK(e.Get("p").rtt_seconds == Approx(0.04));
  e.MarkerAcked("p", d.period, 19.96, 19.97, true);  // on a new connection: no round trip
  CHECK(e.Get("p").rtt_seconds == Approx(0.04));
  e.Done("p", d.period, 1'000'000, true, 20.1);
  CHECK(e.Get("p").bytes_per_second == Approx(6.5e6));
  // A link whose rate dropped 4x: one period is blended (it may have had
  // gaps), the second in a row replaces the estimate.
  auto period_at = [&](double start, double bytes_per_second) {
    const auto f = e.Queued("p");
    e.MarkerAcked("p", f.period, start - 0.04, start);
    e.Done("p", f.period, 1'000'000, true, start + 1e6 / bytes_per_second);
  };
  period_at(30.0, 1.625e6);
  CHECK(e.Get("p").bytes_per_second == Approx(0.7 * 6.5e6 + 0.3 * 1.625e6));
  period_at(40.0, 1.625e6);
  CHECK(e.Get("p").bytes_per_second == Approx(1.625e6));
  // One low period between normal ones is blended only.
  period_at(50.0, 1.625e6);
  period_at(60.0, 0.5e6);
  CHECK(e.Get("p").bytes_per_second == Approx(0.7 * 1.625e6 + 0.3 * 0.5e6));
  period_at(70.0, 1.625e6);
  CHECK(e.Get("p").bytes_per_second > 1.2e6);
}

TEST_CASE("periods that cannot be timed teach nothing") {
  LinkEstimator e;
  SECTION("a failed transfer") {
    const auto a = e.Queued("p");
    const auto b = e.Queued("p");
    e.MarkerAcked("p", a.period, 0.9, 1.0);
    e.Done("p", a.period, 1'000'000, true, 1.2);
    e.Done("p", b.period, 1'000'000, false, 1.3);
  }
  SECTION("no marker ack") {
    const auto a = e.Queued("p");
    e.Done("p", a.period, 1'000'000, true, 1.2);
  }
  SECTION("too few bytes") {
    const auto a = e.Queued("p");
    e.MarkerAcked("p", a.period, 0.9, 1.0);
    e.Done("p", a.period, LinkEstimator::kTimedBytes - 1, true, 1.01);
  }
  SECTION("events of a period that is over") {
    const auto a = e.Queued("p");
    e.Done("p", a.period, 0, false, 1.0);
    const auto b = e.Queued("p");
    e.MarkerAcked("p", a.period, 1.9, 2.0);            // stale: b's period has no marker
    e.Done("p", a.period, 1'000'000, true, 2.1);        // stale: ignored
    e.Done("p", b.period, 1'000'000, true, 2.2);
  }
  CHECK(e.Get("p").bytes_per_second == 0);
}

TEST_CASE("transfers through an emulated link report its rate and round trip, also queued back to back") {
  const double rate = 5e6, one_way = 0.020;  // 40 Mbit/s, 40 ms RTT
  Cluster c(2);
  LinkEmulatorOptions lo;
  lo.forward = c.eps[1]->endpoint().substr(6);  // strip tcp://
  lo.rate_bytes_per_second = rate;
  lo.delay = std::chrono::microseconds(static_cast<long>(one_way * 1e6));
  auto relay = LinkEmulator::Start(lo);
  REQUIRE(relay.ok());
  const PeerSpec via{"tcp://" + (*relay)->listen_address(), c.keys[1].public_key};
  GroupSpec s0 = c.Spec(0), s1 = c.Spec(1);
  s0.peers[1] = via;
  auto l0 = c.eps[0]->Join(s0);
  auto l1 = c.eps[1]->Join(s1);
  REQUIRE(l0.ok());
  REQUIRE(l1.ok());
  // Eight 512 KiB messages sent at once: each queues behind the ones before it,
  // so no message's ack time tells the rate (~0.1 s each at 5 MB/s); one busy period does.
  const auto deadline = DeadlineAfter(30s);
  const size_t bytes = size_t{512} << 10;
  for (int i = 0; i < 8; ++i) REQUIRE((*l0)->Send(1, 3, Bytes(bytes, i), deadline).ok());
  for (int i = 0; i < 8; ++i) {
    auto got = (*l1)->Recv(0, 3, deadline);
    REQUIRE(got.ok());
    CHECK(got->size() == bytes);
  }
  REQUIRE(c.eps[0]->Flush(deadline).ok());
  const LinkEstimate e = c.eps[0]->measurements().peers[via.endpoint];
  CAPTURE(e.bytes_per_second, e.rtt_seconds, e.samples);
  CHECK(e.samples == 1);  // one busy period (the lead opened the connection: no round trip)
  CHECK(e.bytes_per_second == Approx(rate).epsilon(0.15));
  CHECK(e.rtt_seconds == 0);  // the only lead waited for the connection's handshakes: no round trip
  // One message after another: each opens its own period with its own lead.
  for (int i = 0; i < 3; ++i) {
    REQUIRE((*l0)->Send(1, 4, Bytes(bytes, i), deadline).ok());
    REQUIRE((*l1)->Recv(0, 4, deadline).ok());
    REQUIRE(c.eps[0]->Flush(deadline).ok());
  }
  const LinkEstimate f = c.eps[0]->measurements().peers[via.endpoint];
  CAPTURE(f.bytes_per_second, f.rtt_seconds, f.samples);
  CHECK(f.samples == 7);
  CHECK(f.bytes_per_second == Approx(rate).epsilon(0.15));
  CHECK(f.rtt_seconds >= 2 * one_way);
  CHECK(f.rtt_seconds < 2 * one_way + 0.015);
}

TEST_CASE("a ring all-reduce measures every link of the ring, round after round") {
  // Three regions, each behind its own emulated link (the bench's setup):
  // into region r at rates[r], one way delays[r]. Slow enough that the codec's
  // CPU between hops (a sanitizer build's too) leaves the links no gaps.
  const std::vector<double> rates = {3e6, 1.5e6, 6e6}, delays = {0.010, 0.020, 0.015};
  Cluster c(3);
  std::vector<std::unique_ptr<LinkEmulator>> relays;
  std::vector<PeerSpec> via;
  for (int r = 0; r < 3; ++r) {
    LinkEmulatorOptions lo;
    lo.forward = c.eps[r]->endpoint().substr(6);
    lo.rate_bytes_per_second = rates[r];
    lo.delay = std::chrono::microseconds(static_cast<long>(delays[r] * 1e6));
    auto relay = LinkEmulator::Start(lo);
    REQUIRE(relay.ok());
    via.push_back({"tcp://" + (*relay)->listen_address(), c.keys[r].public_key});
    relays.push_back(std::move(*relay));
  }
  for (uint32_t round = 1; round <= 3; ++round) {
    std::vector<std::unique_ptr<sync_policies::CollectiveLink>> links;
    for (int r = 0; r < 3; ++r) {
      auto l = c.eps[r]->Join({"job", round, 1, r, via});
      REQUIRE(l.ok());
      links.push_back(std::move(*l));
    }
    std::vector<std::vector<float>> data(3, std::vector<float>(size_t{1} << 20, 1.0f));
    std::vector<Status> status(3, Status::Ok());
    std::vector<std::thread> threads;
    const auto deadline = DeadlineAfter(60s);
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] {
        status[r] = sync_policies::AllReduceMean(*links[r], data[r], {.codec = sync_policies::Codec::kInt8Block}, deadline);
      });
    for (auto& t : threads) t.join();
    for (const Status& s : status) REQUIRE(s.ok());
    for (auto& ep : c.eps) REQUIRE(ep->Flush(deadline).ok());
  }
  for (int r = 0; r < 3; ++r) {
    const int next = (r + 1) % 3;
    const LinkEstimate e = c.eps[r]->measurements().peers[via[next].endpoint];
    CAPTURE(r, e.bytes_per_second, e.rtt_seconds, e.samples);
    CHECK(e.bytes_per_second == Approx(rates[next]).epsilon(0.2));
    CHECK(e.rtt_seconds >= 2 * delays[next]);
    CHECK(e.rtt_seconds < 2 * delays[next] + 0.015);
  }
}
