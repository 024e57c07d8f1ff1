#include "longhaul/sync_policies/cross_region.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "longhaul/sync_policies/in_process_link.h"
#include "sync_policies/random_vector.h"

using namespace longhaul;
using namespace longhaul::sync_policies;
using longhaul::sync_policies::testing::RandomVector;

namespace {

struct Run {
  std::vector<std::vector<float>> data;
  std::vector<Status> status;
  std::vector<CollectiveStats> stats;
};

// One thread per participant; `jitter_seed` != 0 delays each start randomly so
// messages arrive in a different order.
Run AllReduce(int world, size_t n, const CompressionOptions& options, uint32_t jitter_seed = 0,
              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  InProcessGroup group(world);
  Run run{std::vector<std::vector<float>>(world), std::vector<Status>(world), std::vector<CollectiveStats>(world)};
  for (int r = 0; r < world; ++r) run.data[r] = RandomVector(n, 1000 + r);
  Deadline deadline = DeadlineAfter(timeout);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      if (jitter_seed) std::this_thread::sleep_for(std::chrono::microseconds((jitter_seed * 7919 + r * 104729) % 3000));
      run.status[r] = AllReduceMean(group.link(r), run.data[r], options, deadline, &run.stats[r]);
    });
  }
  for (auto& t : threads) t.join();
  return run;
}

std::vector<double> SerialMean(int world, size_t n) {
  std::vector<double> mean(n, 0.0);
  for (int r = 0; r < world; ++r) {
    auto v = RandomVector(n, 1000 + r);
    for (size_t i = 0; i < n; ++i) mean[i] += v[i];
  }
  for (auto& x : mean) x /= world;
  return mean;
}

float MaxAbsInput(int world, size_t n) {
  float m = 0;
  for (int r = 0; r < world; ++r)
    for (float x : RandomVector(n, 1000 + r)) m = std::max(m, std::fabs(x));
  return m;
}

void RequireBitwiseIdentical(const Run& run) {
  for (size_t r = 1; r < run.data.size(); ++r)
    REQUIRE(std::memcmp(run.data[r].data(), run.data[0].data(), run.data[0].size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("Ring all-reduce over 2..8 participants equals the serial mean within codec error, bitwise identical",
          "[cross_region]") {
  struct Case {
    Codec codec;
    double per_hop;  // worst relative error of one quantisation, as a share of the block's absmax
  };
  const size_t n = 3001;  // not divisible by most world sizes: uneven chunks
  for (Case c : {Case{Codec::kFp32, 1e-6}, Case{Codec::kBf16, 1.0 / 256}, Case{Codec::kInt8Block, 1.0 / 254},
                 Case{Codec::kInt4Block, 1.0 / 14}, Case{Codec::kFp4E3M0, 1.0 / 3 + 0.012}}) {
    for (int world = 2; world <= 8; ++world) {
      INFO("codec " << CodecName(c.codec) << ", world " << world);
      Run run = AllReduce(world, n, {.codec = c.codec, .block_size = 64});
      for (const Status& s : run.status) REQUIRE(s.ok());
      RequireBitwiseIdentical(run);
      // Hop k re-quantises a partial sum of k inputs (|.| <= k * max|x|) and the
      // owner quantises the mean once: mean error <= (world/2 + 1) * per_hop * max|x|.
      auto mean = SerialMean(world, n);
      double tol = (world / 2.0 + 1.0) * c.per_hop * MaxAbsInput(world, n) * 1.01 + 1e-6;
      double worst = 0;
      for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(run.data[0][i] - mean[i]));
      CHECK(worst <= tol);
      CHECK(run.stats[0].bytes_sent > 0);
    }
  }
}

TEST_CASE("Chunks of more than one piece are pipelined and still give the bitwise-identical mean", "[cross_region]") {
  const int world = 3;
  const size_t chunk = kRingPieceFloats + 1000, n = world * chunk;  // every chunk: one full piece and a short one
  for (Codec codec : {Codec::kFp32, Codec::kInt8Block}) {
    INFO("codec " << CodecName(codec));
    Run run = AllReduce(world, n, {.codec = codec}, 5);
    for (const Status& s : run.status) REQUIRE(s.ok());
    RequireBitwiseIdentical(run);
    auto mean = SerialMean(world, n);
    double tol = codec == Codec::kFp32 ? 1e-5 : (world / 2.0 + 1.0) / 254 * MaxAbsInput(world, n) * 1.01;
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(run.data[1][i] - mean[i]));
    CHECK(worst <= tol);
    if (codec == Codec::kFp32) {
      // 2(world-1) chunks sent, each as 2 messages with a 24-byte header.
      CHECK(run.stats[0].bytes_sent == 2 * (world - 1) * (chunk * sizeof(float) + 2 * 24));
    }
  }
}

namespace {
// Counts the buffers a participant takes from its link and what becomes of
// them, as a pooled link (the WAN endpoint's) sees it: sent, given back unsent,
// or still out; and which received messages are given back.
class CountingLink final : public CollectiveLink {
 public:
  explicit CountingLink(CollectiveLink& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  uint64_t bytes_sent() const override { return inner_.bytes_sent(); }
  Status Send(int peer, uint32_t tag, std::span<const std::byte> data, Deadline deadline) override {
    return inner_.Send(peer, tag, data, deadline);
  }
  Result<std::vector<std::byte>> Recv(int peer, uint32_t tag, Deadline deadline) override {
    auto r = inner_.Recv(peer, tag, deadline);
    if (r.ok()) received_.insert(r->data());
    return r;
  }
  std::vector<std::byte> Buffer(size_t n) override {
    std::vector<std::byte> b(n);
    out_.insert(b.data());
    return b;
  }
  Status SendOwned(int peer, uint32_t tag, std::vector<std::byte>&& data, Deadline deadline) override {
    if (out_.erase(data.data()) == 1) ++sent_;
    return inner_.Send(peer, tag, data, deadline);
  }
  void Recycle(std::vector<std::byte>&& buffer) override {
    if (out_.erase(buffer.data()) == 1) ++given_back_unsent_;
    if (received_.erase(buffer.data()) == 1) ++given_back_received_;
  }

  std::set<const std::byte*> out_, received_;  // taken and neither sent nor given back; received and kept
  int sent_ = 0, given_back_unsent_ = 0, given_back_received_ = 0;

 private:
  CollectiveLink& inner_;
};
}  // namespace

TEST_CASE("A ring round keeps its own encoded chunk in link buffers and gives back every buffer it kept",
          "[cross_region]") {
  // A pooled link pays for fresh memory per message; what the ring keeps past a
  // send (its own chunk, encoded once, decoded at the end) must come from the
  // link and go back to it, or every round faults in a third of the model.
  const int world = 3;
  const size_t chunk = kRingPieceFloats + 1000, n = world * chunk;  // every chunk: two pieces
  for (Codec codec : {Codec::kFp32, Codec::kInt8Block}) {
    INFO("codec " << CodecName(codec));
    InProcessGroup group(world);
    std::vector<std::unique_ptr<CountingLink>> links;
    for (int r = 0; r < world; ++r) links.push_back(std::make_unique<CountingLink>(group.link(r)));
    std::vector<std::vector<float>> data(world);
    std::vector<Status> status(world);
    std::vector<std::thread> threads;
    Deadline deadline = DeadlineAfter(std::chrono::seconds(20));
    for (int r = 0; r < world; ++r) {
      data[r] = RandomVector(n, 500 + r);
      threads.emplace_back([&, r] { status[r] = AllReduceMean(*links[r], data[r], {.codec = codec}, deadline); });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) {
      INFO("rank " << r);
      REQUIRE(status[r].ok());
      const CountingLink& l = *links[r];
      CHECK(l.sent_ == 2 * (world - 1) * 2);  // every message goes out in a link buffer
      CHECK(l.given_back_unsent_ == 2);       // the own chunk's two pieces, kept and given back
      CHECK(l.out_.empty());
      CHECK(l.given_back_received_ == 2 * (world - 1) * 2);
      CHECK(l.received_.empty());
    }
  }
}

TEST_CASE("int8 all-reduce sends about a quarter of the fp32 bytes", "[cross_region]") {
  Run fp32 = AllReduce(4, 8192, {.codec = Codec::kFp32});
  Run int8 = AllReduce(4, 8192, {.codec = Codec::kInt8Block, .block_size = 256});
  double ratio = static_cast<double>(int8.stats[1].bytes_sent) / static_cast<double>(fp32.stats[1].bytes_sent);
  CHECK(ratio > 0.25);
  CHECK(ratio < 0.27);
}

TEST_CASE("All-reduce results do not depend on arrival order", "[cross_region]") {
  for (Codec codec : {Codec::kInt8Block, Codec::kTopK, Codec::kTopK2Bit}) {
    Run a = AllReduce(5, 2000, {.codec = codec, .topk_fraction = 0.1}, 0);
    Run b = AllReduce(5, 2000, {.codec = codec, .topk_fraction = 0.1}, 3);
    Run c = AllReduce(5, 2000, {.codec = codec, .topk_fraction = 0.1}, 11);
    RequireBitwiseIdentical(a);
    REQUIRE(std::memcmp(a.data[0].data(), b.data[3].data(), 2000 * sizeof(float)) == 0);
    REQUIRE(std::memcmp(a.data[4].data(), c.data[1].data(), 2000 * sizeof(float)) == 0);
  }
}

TEST_CASE("Sparse all-reduce is the rank-ordered mean of every region's sparse payload", "[cross_region]") {
  for (int world = 2; world <= 6; ++world) {
    for (Codec sparse : {Codec::kTopK, Codec::kTopK2Bit}) {
      INFO(CodecName(sparse) << ", world " << world);
      CompressionOptions options{.codec = sparse, .topk_fraction = 0.05};
      Run run = AllReduce(world, 1000, options);
      for (const Status& s : run.status) REQUIRE(s.ok());
      RequireBitwiseIdentical(run);
      auto codec = Compressor::Create(options);
      std::vector<float> expected(1000, 0.0f), decoded(1000);
      std::vector<std::byte> bytes;
      for (int r = 0; r < world; ++r) {
        (*codec)->Encode(RandomVector(1000, 1000 + r), bytes);
        REQUIRE((*codec)->Decode(bytes, decoded).ok());
        for (size_t i = 0; i < 1000; ++i) expected[i] += decoded[i];
      }
      for (auto& x : expected) x /= static_cast<float>(world);
      CHECK(run.data[0] == expected);
      // Each region forwards world - 1 payloads (its own first), each one frame:
      // the codec's EncodedBytes and the 24-byte header.
      CHECK(run.stats[0].bytes_sent == (world - 1) * ((*codec)->EncodedBytes(1000) + 24));
    }
  }
}

TEST_CASE("Top-k all-reduce carries each region's error feedback", "[cross_region]") {
  const int world = 3;
  const size_t n = 500;
  InProcessGroup group(world);
  std::vector<ErrorFeedback> feedback(world);
  std::vector<std::vector<float>> data(world);
  std::vector<Status> status(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    data[r] = RandomVector(n, 50 + r);
    threads.emplace_back([&, r] {
      status[r] = AllReduceMean(group.link(r), data[r], {.codec = Codec::kTopK, .topk_fraction = 0.1},
                                DeadlineAfter(std::chrono::seconds(20)), nullptr, &feedback[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    REQUIRE(status[r].ok());
    REQUIRE(feedback[r].residual().size() == n);
    // The residual holds exactly the entries that were not sent.
    auto input = RandomVector(n, 50 + r);
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) kept += feedback[r].residual()[i] == 0.0f;
    CHECK(kept == 50);
  }
}

TEST_CASE("A dead peer fails the all-reduce, names the peer, and leaves data untouched", "[cross_region]") {
  const int world = 4;
  InProcessGroup group(world);
  group.Kill(2);
  std::vector<std::vector<float>> data(world), before(world);
  std::vector<Status> status(world);
  std::vector<std::thread> threads;
  for (int r : {0, 1, 3}) {
    data[r] = before[r] = RandomVector(1000, r);
    threads.emplace_back([&, r] {
      status[r] = AllReduceMean(group.link(r), data[r], {}, DeadlineAfter(std::chrono::milliseconds(300)));
    });
  }
  for (auto& t : threads) t.join();
  for (int r : {0, 1, 3}) {
    CHECK_FALSE(status[r].ok());
    CHECK(data[r] == before[r]);
  }
  CHECK(status[1].code() == StatusCode::kUnavailable);  // sends to rank 2
  CHECK(status[1].message().find("peer rank 2") != std::string::npos);
  CHECK(status[3].code() == StatusCode::kUnavailable);  // receives from rank 2
  CHECK(status[3].message().find("peer rank 2") != std::string::npos);
  CHECK(status[0].message().find("peer rank 3") != std::string::npos);  // its left neighbour gave up
}

namespace {
// A participant whose link dies at its n-th Send, as a region crashing mid-collective.
class DyingLink final : public CollectiveLink {
 public:
  DyingLink(InProcessGroup& group, int rank, int fatal_send) : group_(group), rank_(rank), fatal_send_(fatal_send) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_.size(); }
  uint64_t bytes_sent() const override { return group_.link(rank_).bytes_sent(); }
  Status Send(int peer, uint32_t tag, std::span<const std::byte> data, Deadline deadline) override {
    if (++sends_ == fatal_send_) {
      group_.Kill(rank_);
      return Unavailable("injected crash of rank " + std::to_string(rank_));
    }
    return group_.link(rank_).Send(peer, tag, data, deadline);
  }
  Result<std::vector<std::byte>> Recv(int peer, uint32_t tag, Deadline deadline) override {
    return group_.link(rank_).Recv(peer, tag, deadline);
  }

 private:
  InProcessGroup& group_;
  int rank_, fatal_send_, sends_ = 0;
};
}  // namespace

TEST_CASE("A region crashing mid-collective leaves every participant's data untouched", "[cross_region]") {
  // World 4: rank 1 dies at its 4th send, the first of the all-gather, after the
  // reduce-scatter completed and while others already decode all-gather chunks.
  const int world = 4;
  InProcessGroup group(world);
  DyingLink dying(group, 1, 4);
  std::vector<std::vector<float>> data(world), before(world);
  std::vector<Status> status(world);
  std::vector<std::thread> threads;
  Deadline deadline = DeadlineAfter(std::chrono::milliseconds(500));
  for (int r = 0; r < world; ++r) {
    data[r] = before[r] = RandomVector(1000, 70 + r);
    threads.emplace_back([&, r] {
      CollectiveLink& link = r == 1 ? static_cast<CollectiveLink&>(dying) : group.link(r);
      status[r] = AllReduceMean(link, data[r], {.codec = Codec::kInt8Block}, deadline);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r << ": " << status[r].ToString());
    CHECK_FALSE(status[r].ok());
    CHECK(data[r] == before[r]);
  }
  CHECK(status[1].message().find("injected crash") != std::string::npos);
  CHECK(status[2].code() == StatusCode::kUnavailable);  // waits on rank 1's all-gather chunk
  CHECK(status[2].message().find("peer rank 1") != std::string::npos);
}

TEST_CASE("A silent peer makes the all-reduce time out naming it", "[cross_region]") {
  InProcessGroup group(2);
  std::vector<float> data{1, 2, 3}, before = data;
  auto s = AllReduceMean(group.link(0), data, {}, DeadlineAfter(std::chrono::milliseconds(100)));
  CHECK(s.code() == StatusCode::kDeadlineExceeded);
  CHECK(s.message().find("peer rank 1") != std::string::npos);
  CHECK(data == before);
}

TEST_CASE("Participants that disagree on the codec get a data-loss error, not garbage", "[cross_region]") {
  InProcessGroup group(2);
  std::vector<float> a = RandomVector(100, 1), b = RandomVector(100, 2), a0 = a, b0 = b;
  Status sa, sb;
  Deadline deadline = DeadlineAfter(std::chrono::milliseconds(500));
  std::thread ta([&] { sa = AllReduceMean(group.link(0), a, {.codec = Codec::kInt8Block}, deadline); });
  std::thread tb([&] { sb = AllReduceMean(group.link(1), b, {.codec = Codec::kBf16}, deadline); });
  ta.join();
  tb.join();
  CHECK(sa.code() == StatusCode::kDataLoss);
  CHECK(sa.message().find("peer rank 1") != std::string::npos);
  CHECK(sb.code() == StatusCode::kDataLoss);
  CHECK(a == a0);
  CHECK(b == b0);
}

TEST_CASE("World size 1 returns the data unchanged, tiny vectors work with empty chunks", "[cross_region]") {
  InProcessGroup solo(1);
  std::vector<float> data{0.1f, 0.2f, 0.3f}, before = data;
  REQUIRE(AllReduceMean(solo.link(0), data, {.codec = Codec::kInt4Block}, DeadlineAfter(std::chrono::seconds(1))).ok());
  CHECK(data == before);
  Run run = AllReduce(6, 3, {.codec = Codec::kFp32});  // 3 floats over 6 participants
  for (const Status& s : run.status) REQUIRE(s.ok());
  RequireBitwiseIdentical(run);
  auto mean = SerialMean(6, 3);
  for (size_t i = 0; i < 3; ++i) CHECK(run.data[2][i] == Approx(mean[i]).margin(1e-6));
}

TEST_CASE("Broadcast copies the root's data exactly to every participant", "[cross_region]") {
  const int world = 5, root = 2;
  InProcessGroup group(world);
  std::vector<std::vector<float>> data(world);
  std::vector<Status> status(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    data[r] = RandomVector(777, 300 + r);
    threads.emplace_back(
        [&, r] { status[r] = Broadcast(group.link(r), root, data[r], DeadlineAfter(std::chrono::seconds(20))); });
  }
  for (auto& t : threads) t.join();
  auto expected = RandomVector(777, 300 + root);
  for (int r = 0; r < world; ++r) {
    REQUIRE(status[r].ok());
    CHECK(data[r] == expected);
  }
  InProcessGroup two(2);
  std::vector<float> x{1};
  CHECK(Broadcast(two.link(0), 5, x, DeadlineAfter(std::chrono::seconds(1))).code() == StatusCode::kInvalidArgument);
}
