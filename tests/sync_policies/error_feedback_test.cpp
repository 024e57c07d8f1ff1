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

TEST_CASE("Error feedback makes topk2's transmitted sum approach the true sum over rounds", "[error_feedback]") {
  // Updates with a direction of their own (a drift per entry under unit noise),
  // as pseudo-gradients have: the true sum grows with the rounds, the residual
  // stays bounded, so the transmitted sum's relative gap shrinks. Without
  // feedback 98% of each update and the quantisation error are lost for good.
  const size_t n = 1000;
  auto created = Compressor::Create({.codec = Codec::kTopK2Bit, .topk_fraction = 0.0156});
  REQUIRE(created.ok());
  const Compressor* codec = created->get();
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 1.0f), drift_of(0.0f, 0.2f);
  std::vector<float> drift(n), update(n), decoded(n);
  for (auto& d : drift) d = drift_of(rng);
  std::vector<double> true_sum(n, 0.0), sent_sum(n, 0.0), sent_plain(n, 0.0);
  ErrorFeedback feedback;
  std::vector<std::byte> bytes;
  const auto relative_gap = [&](const std::vector<double>& sent) {
    double gap = 0, total = 0;
    for (size_t i = 0; i < n; ++i) {
      gap += std::fabs(true_sum[i] - sent[i]);
      total += std::fabs(true_sum[i]);
    }
    return gap / total;
  };
  double gap_at_100 = 0;
  for (int round = 1; round <= 400; ++round) {
    for (size_t i = 0; i < n; ++i) update[i] = drift[i] + noise(rng);
    for (size_t i = 0; i < n; ++i) true_sum[i] += update[i];
    feedback.Compress(*codec, update, bytes);
    REQUIRE(codec->Decode(bytes, decoded).ok());
    for (size_t i = 0; i < n; ++i) sent_sum[i] += decoded[i];
    codec->Encode(update, bytes);
    REQUIRE(codec->Decode(bytes, decoded).ok());
    for (size_t i = 0; i < n; ++i) sent_plain[i] += decoded[i];
    if (round == 100) gap_at_100 = relative_gap(sent_sum);
  }
  double residual = 0;
  for (size_t i = 0; i < n; ++i) {
    // What was not sent is exactly the residual (up to float rounding).
    REQUIRE(std::fabs(true_sum[i] - sent_sum[i] - feedback.residual()[i]) < 1e-3);
    residual += std::fabs(feedback.residual()[i]);
  }
  const double gap = relative_gap(sent_sum), gap_plain = relative_gap(sent_plain);
  INFO("relative gap after 100 rounds " << gap_at_100 << ", after 400 " << gap << ", without feedback " << gap_plain);
  CHECK(gap < 0.5 * gap_at_100);
  CHECK(gap < 0.25 * gap_plain);
  CHECK(residual / n < 8.0);  // bounded: about 4 (unit noise, each entry sent every ~64 rounds)
}

TEST_CASE("A staged residual takes effect only on Commit, so a failed exchange keeps the one it started from",
          "[error_feedback]") {
  auto codec = Compressor::Create({.codec = Codec::kTopK, .topk_fraction = 0.5});
  REQUIRE(codec.ok());
  const std::vector<float> first = {1, 2, 3, 4}, second = {5, 0, 0, 1};
  ErrorFeedback staged, twin;  // twin: the same updates through Compress
  std::vector<std::byte> bytes, again, twin_bytes;
  staged.Compress(**codec, first, bytes);
  twin.Compress(**codec, first, twin_bytes);
  const std::vector<float> committed(staged.residual().begin(), staged.residual().end());

  staged.Stage(**codec, second, bytes);
  CHECK(std::vector<float>(staged.residual().begin(), staged.residual().end()) == committed);
  staged.Stage(**codec, second, again);  // the exchange failed and is retried
  CHECK(again == bytes);
  CHECK(std::vector<float>(staged.residual().begin(), staged.residual().end()) == committed);

  staged.Commit();
  twin.Compress(**codec, second, twin_bytes);
  CHECK(bytes == twin_bytes);
  CHECK(std::vector<float>(staged.residual().begin(), staged.residual().end()) ==
        std::vector<float>(twin.residual().begin(), twin.residual().end()));
  CHECK(staged.residual()[0] == 0.0f);  // 5 + the kept 1 was among the two largest: sent
  CHECK(staged.residual()[3] == 1.0f);  // 0 + 1 was not
  staged.Commit();  // nothing staged: no change
  CHECK(std::vector<float>(staged.residual().begin(), staged.residual().end()) ==
        std::vector<float>(twin.residual().begin(), twin.residual().end()));

  staged.Stage(**codec, second, bytes);
  staged.Reset();  // a new shard: nothing staged survives it
  staged.Commit();
  CHECK(staged.residual().empty());
}
