#include "longhaul/sync_policies/ring_order.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <set>

using namespace longhaul;
using namespace longhaul::sync_policies;

namespace {

double Bottleneck(const BandwidthMatrix& m, const std::vector<int>& order) {
  double b = 1e300;
  for (size_t k = 0; k < order.size(); ++k)
    b = std::min(b, m.bytes_per_second[order[k]][order[(k + 1) % order.size()]]);
  return b;
}

double BruteForce(const BandwidthMatrix& m) {
  std::vector<int> perm(m.size());
  for (int i = 0; i < m.size(); ++i) perm[i] = i;
  double best = -1;
  do best = std::max(best, Bottleneck(m, perm));
  while (std::next_permutation(perm.begin() + 1, perm.end()));
  return best;
}

BandwidthMatrix Random(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(1e6, 1e9);
  BandwidthMatrix m{std::vector<std::vector<double>>(n, std::vector<double>(n, 0))};
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) m.bytes_per_second[i][j] = dist(rng);
  return m;
}

void RequireRing(const RingOrder& r, int n) {
  REQUIRE(static_cast<int>(r.order.size()) == n);
  REQUIRE(std::set<int>(r.order.begin(), r.order.end()).size() == static_cast<size_t>(n));
  REQUIRE(*std::min_element(r.order.begin(), r.order.end()) == 0);
  REQUIRE(*std::max_element(r.order.begin(), r.order.end()) == n - 1);
}

}  // namespace

TEST_CASE("Ring order avoids the slow link of a hand-made matrix", "[ring_order]") {
  // Four regions; 0->1 and 2->3 are slow (10 MB/s), everything else 1 GB/s.
  // Ring 0->2->1->3->0 avoids both slow directions.
  const double G = 1e9, S = 1e7;
  BandwidthMatrix m{{{0, S, G, G}, {G, 0, G, G}, {G, G, 0, S}, {G, G, G, 0}}};
  auto r = ChooseRingOrder(m);
  REQUIRE(r.ok());
  RequireRing(*r, 4);
  CHECK(r->bottleneck_bytes_per_second == G);
  CHECK(Bottleneck(m, r->order) == G);
  CHECK(r->reason.find("exact search over 6 rings") != std::string::npos);
}

TEST_CASE("Ring order with asymmetric links uses the fast direction", "[ring_order]") {
  // 3 regions: clockwise 0->1->2->0 is fast, the reverse slow.
  BandwidthMatrix m{{{0, 100, 1}, {1, 0, 100}, {100, 1, 0}}};
  auto r = ChooseRingOrder(m);
  REQUIRE(r.ok());
  CHECK(r->order == std::vector<int>{0, 1, 2});
  CHECK(r->bottleneck_bytes_per_second == 100);
  CHECK(r->reason.find("bottleneck") != std::string::npos);
}

TEST_CASE("Exact ring order equals brute force on random matrices up to 8", "[ring_order]") {
  for (int n = 2; n <= 8; ++n) {
    auto m = Random(n, static_cast<uint32_t>(n));
    auto r = ChooseRingOrder(m);
    REQUIRE(r.ok());
    RequireRing(*r, n);
    CHECK(r->bottleneck_bytes_per_second == BruteForce(m));
    CHECK(Bottleneck(m, r->order) == r->bottleneck_bytes_per_second);
  }
}

TEST_CASE("Ten participants are searched exactly", "[ring_order]") {
  // A hidden fast ring 0->3->6->9->2->5->8->1->4->7->0 in a slow background.
  std::vector<int> hidden{0, 3, 6, 9, 2, 5, 8, 1, 4, 7};
  BandwidthMatrix m = Random(10, 99);
  for (auto& row : m.bytes_per_second)
    for (auto& b : row) b = b / 1e3;  // background 1-1000 kB/s
  for (int k = 0; k < 10; ++k) m.bytes_per_second[hidden[k]][hidden[(k + 1) % 10]] = 5e8 + k;
  auto r = ChooseRingOrder(m);
  REQUIRE(r.ok());
  CHECK(r->order == hidden);
  CHECK(r->reason.find("exact search over 362880 rings") != std::string::npos);
}

TEST_CASE("Beyond ten participants the heuristic finds a hidden fast ring", "[ring_order]") {
  const int n = 16;
  std::mt19937 rng(5);
  std::vector<int> hidden(n);
  for (int i = 0; i < n; ++i) hidden[i] = i;
  std::shuffle(hidden.begin() + 1, hidden.end(), rng);
  BandwidthMatrix m = Random(n, 17);
  for (auto& row : m.bytes_per_second)
    for (auto& b : row) b = b / 1e3;
  for (int k = 0; k < n; ++k) m.bytes_per_second[hidden[k]][hidden[(k + 1) % n]] = 5e8;
  auto r = ChooseRingOrder(m);
  REQUIRE(r.ok());
  RequireRing(*r, n);
  CHECK(r->bottleneck_bytes_per_second == 5e8);
  CHECK(r->reason.find("heuristic") != std::string::npos);
  // On a random matrix it is at least as good as the identity ring.
  auto random = Random(24, 3);
  auto rr = ChooseRingOrder(random);
  REQUIRE(rr.ok());
  RequireRing(*rr, 24);
  std::vector<int> identity(24);
  for (int i = 0; i < 24; ++i) identity[i] = i;
  CHECK(rr->bottleneck_bytes_per_second >= Bottleneck(random, identity));
}

TEST_CASE("Ring order rejects malformed matrices", "[ring_order]") {
  CHECK_FALSE(ChooseRingOrder(BandwidthMatrix{}).ok());
  auto ragged = ChooseRingOrder(BandwidthMatrix{{{0, 1}, {1}}});
  REQUIRE_FALSE(ragged.ok());
  CHECK(ragged.status().message().find("row 1") != std::string::npos);
  auto negative = ChooseRingOrder(BandwidthMatrix{{{0, -1}, {1, 0}}});
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.status().message().find("[0][1]") != std::string::npos);
  auto single = ChooseRingOrder(BandwidthMatrix{{{0}}});
  REQUIRE(single.ok());
  CHECK(single->order == std::vector<int>{0});
}
