// The CollectiveLink contract (sync_policies/link.h), checked the same way on
// every implementation: the in-process one the algorithm tests use and the WAN
// group link (CURVE over loopback). A new implementation gets a Group below and
// joins the TEMPLATE_TEST_CASE lists.
#include <catch2/catch.hpp>

#include <thread>

#include "longhaul/sync_policies/in_process_link.h"
#include "wan_transport/wan_test_util.h"

using namespace longhaul;
using namespace longhaul::wan_transport::testing;
using namespace std::chrono_literals;
using sync_policies::CollectiveLink;

namespace {

// n participants of one implementation, each one's link.
struct InProcessGroup {
  explicit InProcessGroup(int n) : group(n) {
    for (int r = 0; r < n; ++r) links.push_back(&group.link(r));
  }
  sync_policies::InProcessGroup group;
  std::vector<CollectiveLink*> links;
};

struct WanGroup {
  explicit WanGroup(int n) : cluster(n) {
    for (int r = 0; r < n; ++r) {
      auto l = cluster.eps[r]->Join(cluster.Spec(r));
      REQUIRE(l.ok());
      owned.push_back(std::move(*l));
      links.push_back(owned.back().get());
    }
  }
  Cluster cluster;
  std::vector<std::unique_ptr<CollectiveLink>> owned;
  std::vector<CollectiveLink*> links;
};

}  // namespace

TEMPLATE_TEST_CASE("link contract: rank and world size, and every participant may send before it receives",
                   "[link][conformance]", InProcessGroup, WanGroup) {
  TestType g(3);
  for (int r = 0; r < 3; ++r) {
    CHECK(g.links[r]->rank() == r);
    CHECK(g.links[r]->world_size() == 3);
  }
  const auto deadline = DeadlineAfter(10s);
  // A ring: all send (buffered, never waiting for the receiver), then all receive.
  const std::vector<size_t> sizes = {0, 1, 4096, 300'000};
  for (int r = 0; r < 3; ++r)
    for (size_t i = 0; i < sizes.size(); ++i)
      REQUIRE(g.links[r]->Send((r + 1) % 3, 5, Bytes(sizes[i], r * 10 + static_cast<int>(i)), deadline).ok());
  for (int r = 0; r < 3; ++r) {
    const int from = (r + 2) % 3;
    for (size_t i = 0; i < sizes.size(); ++i) {  // in order per (sender, receiver, tag)
      auto got = g.links[r]->Recv(from, 5, deadline);
      REQUIRE(got.ok());
      CHECK(*got == Bytes(sizes[i], from * 10 + static_cast<int>(i)));
    }
  }
  CHECK(g.links[0]->bytes_sent() == 0 + 1 + 4096 + 300'000);  // payload only
}

TEMPLATE_TEST_CASE("link contract: tags are independent streams", "[link][conformance]", InProcessGroup, WanGroup) {
  TestType g(2);
  const auto deadline = DeadlineAfter(10s);
  REQUIRE(g.links[0]->Send(1, 1, Bytes(100, 1), deadline).ok());
  REQUIRE(g.links[0]->Send(1, 2, Bytes(200, 2), deadline).ok());
  REQUIRE(g.links[0]->Send(1, 1, Bytes(300, 3), deadline).ok());
  // Tag 2 first although tag 1's messages came before it.
  auto two = g.links[1]->Recv(0, 2, deadline);
  REQUIRE(two.ok());
  CHECK(*two == Bytes(200, 2));
  auto a = g.links[1]->Recv(0, 1, deadline);
  auto b = g.links[1]->Recv(0, 1, deadline);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == Bytes(100, 1));
  CHECK(*b == Bytes(300, 3));
}

TEMPLATE_TEST_CASE("link contract: owned buffers go out whole and received ones can be recycled",
                   "[link][conformance]", InProcessGroup, WanGroup) {
  TestType g(2);
  const auto deadline = DeadlineAfter(10s);
  for (size_t n : {size_t{0}, size_t{17}, size_t{1} << 20}) {
    std::vector<std::byte> out = g.links[0]->Buffer(n);
    REQUIRE(out.size() == n);
    const auto want = Bytes(n, static_cast<int>(n % 251));
    std::copy(want.begin(), want.end(), out.begin());
    REQUIRE(g.links[0]->SendOwned(1, 9, std::move(out), deadline).ok());
    auto got = g.links[1]->Recv(0, 9, deadline);
    REQUIRE(got.ok());
    CHECK(*got == want);
    g.links[1]->Recycle(std::move(*got));
  }
}

TEMPLATE_TEST_CASE("link contract: a silent peer fails the receive by its deadline, naming the peer",
                   "[link][conformance]", InProcessGroup, WanGroup) {
  TestType g(2);
  const auto t0 = std::chrono::steady_clock::now();
  auto got = g.links[0]->Recv(1, 0, DeadlineAfter(300ms));
  const auto waited = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(got.ok());
  CHECK((got.status().code() == StatusCode::kDeadlineExceeded || got.status().code() == StatusCode::kUnavailable));
  CHECK_THAT(got.status().message(), Catch::Contains("rank 1"));
  CHECK(waited >= 250ms);
  CHECK(waited < 10s);
}

TEMPLATE_TEST_CASE("link contract: a peer outside the group is an error, not a crash", "[link][conformance]",
                   InProcessGroup, WanGroup) {
  TestType g(2);
  const auto deadline = DeadlineAfter(1s);
  CHECK_FALSE(g.links[0]->Send(2, 0, Bytes(10, 1), deadline).ok());
  CHECK_FALSE(g.links[0]->Send(-1, 0, Bytes(10, 1), deadline).ok());
  CHECK_FALSE(g.links[0]->Recv(7, 0, deadline).ok());
}
