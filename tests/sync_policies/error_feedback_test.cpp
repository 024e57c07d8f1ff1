#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "longhaul/sync_policies/compressor.h"

using namespace longhaul::sync_policies;

TEST_CASE("Error feedback makes the sum of transmitted updates track the sum of true updates", "[error_feedback]") {
  const size_t n = 2000;
  auto codec = Compressor::Create({.codec = Codec::kTopK, .topk_fraction = 0.05});
  REQUIRE(codec.ok());
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  ErrorFeedback feedback;
  std::vector<double> true_sum(n, 0.0), sent_sum(n, 0.0), sent_sum_plain(n, 0.0);
  std::vector<float> update(n), decoded(n);
  std::vector<std::byte> bytes;
  const int rounds = 200;
  for (int round = 0; round < rounds; ++round) {
    for (auto& x : update) x = dist(rng);
    for (size_t i = 0; i < n; ++i) true_sum[i] += update[i];
    feedback.Compress(**codec, update, bytes);
    REQUIRE((*codec)->Decode(bytes, decoded).ok());
    for (size_t i = 0; i < n; ++i) sent_sum[i] += decoded[i];
    (*codec)->Encode(update, bytes);  // the same codec without feedback
    REQUIRE((*codec)->Decode(bytes, decoded).ok());
    for (size_t i = 0; i < n; ++i) sent_sum_plain[i] += decoded[i];
  }
  // Invariant: true sum - transmitted sum == residual (up to float rounding).
  double gap = 0, gap_plain = 0, total = 0;
  for (size_t i = 0; i < n; ++i) {
    REQUIRE(std::fabs(true_sum[i] - sent_sum[i] - feedback.residual()[i]) < 1e-3);
    gap += std::fabs(true_sum[i] - sent_sum[i]);
    gap_plain += std::fabs(true_sum[i] - sent_sum_plain[i]);
    total += std::fabs(true_sum[i]);
  }
  // The residual stays bounded while the sums grow, so the relative gap shrinks;
  // without feedback the dropped mass just accumulates.
  CHECK(gap / total < 0.5 * gap_plain / total);
  CHECK(gap / n < 10.0);
}

TEST_CASE("Error feedback restarts when the shard size changes", "[error_feedback]") {
  auto codec = Compressor::Create({.codec = Codec::kTopK, .topk_fraction = 0.5});
  REQUIRE(codec.ok());
  ErrorFeedback feedback;
  std::vector<std::byte> bytes;
  feedback.Compress(**codec, std::vector<float>{1, 2, 3, 4}, bytes);
  CHECK(feedback.residual().size() == 4);
  CHECK(feedback.residual()[0] == 1.0f);  // not sent (smaller half)
  CHECK(feedback.residual()[3] == 0.0f);  // sent
  feedback.Compress(**codec, std::vector<float>{1, 1}, bytes);
  CHECK(feedback.residual().size() == 2);
}
