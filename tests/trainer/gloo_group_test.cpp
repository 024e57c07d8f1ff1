// Gloo intra-region group: ranks in threads over loopback TCP, FileStore rendezvous.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <thread>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <limits>

#include "longhaul/trainer/data.h"
#include "longhaul/trainer/intra_region.h"
#include "longhaul/trainer/trainer.h"
#include "support/temp_dir.h"

using namespace longhaul;
using namespace longhaul::trainer;

namespace {

// Runs fn(group) on `size` ranks in threads; returns each rank's failure text (empty = ok).
template <typename F>
std::vector<std::string> RunRanks(int size, const std::string& prefix, F fn) {
  const longhaul::testing::TempDir tmp("gloo");
  const auto& dir = tmp.path();
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      GlooGroupOptions o;
      o.store_dir = dir;
      o.prefix = prefix;
      o.rank = r;
      o.size = size;
      o.timeout = std::chrono::seconds(10);
      auto group = MakeGlooGroup(o);
      if (!group.ok()) {
        errors[r] = group.status().ToString();
        return;
      }
      errors[r] = fn(**group);
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("trainer: gloo group: all-reduce mean, all-gather and broadcast are exact", "[trainer][gloo]") {
  for (int size : {2, 3, 4}) {
    INFO("size " << size);
    const auto errors = RunRanks(size, "collectives-" + std::to_string(size), [size](IntraRegionGroup& g) -> std::string {
      if (g.size() != size) return "wrong size";
      // All-reduce mean: rank r holds (r + 1) * (i + 1); mean = (size + 1) / 2 * (i + 1).
      std::vector<float> v(1000);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((g.rank() + 1) * (i + 1));
      if (auto st = g.AllReduceMean(v); !st.ok()) return st.ToString();
      for (size_t i = 0; i < v.size(); ++i)
        if (v[i] != static_cast<float>((size + 1) * 0.5 * (i + 1))) return "all-reduce wrong at " + std::to_string(i);
      // All-gather: shard of rank r is {r*10, r*10+1, r*10+2}.
      std::vector<float> mine = {g.rank() * 10.0f, g.rank() * 10.0f + 1, g.rank() * 10.0f + 2};
      std::vector<float> all(3 * size);
      if (auto st = g.AllGather(mine, all); !st.ok()) return st.ToString();
      for (int r = 0; r < size; ++r)
        for (int k = 0; k < 3; ++k)
          if (all[r * 3 + k] != r * 10.0f + k) return "all-gather wrong";
      std::vector<float> wrong(5);
      if (g.AllGather(mine, wrong).code() != StatusCode::kInvalidArgument) return "size mismatch accepted";
      // Broadcast from the last rank.
      std::vector<float> b(7, static_cast<float>(g.rank()));
      if (auto st = g.Broadcast(b, size - 1); !st.ok()) return st.ToString();
      for (float x : b)
        if (x != static_cast<float>(size - 1)) return "broadcast wrong";
      if (auto st = g.Barrier(); !st.ok()) return st.ToString();
      return "";
    });
    for (int r = 0; r < size; ++r) {
      INFO("rank " << r);
      CHECK(errors[r] == "");
    }
  }
}

TEST_CASE("trainer: gloo group: a missing peer is a timeout Status, not a crash", "[trainer][gloo]") {
  const longhaul::testing::TempDir tmp("gloo-lone");
  const auto& dir = tmp.path();
  GlooGroupOptions o;
  o.store_dir = dir;
  o.prefix = "lonely";
  o.rank = 0;
  o.size = 2;
  o.timeout = std::chrono::milliseconds(300);
  auto group = MakeGlooGroup(o);
  REQUIRE_FALSE(group.ok());
  INFO(group.status().ToString());
  CHECK((group.status().code() == StatusCode::kDeadlineExceeded || group.status().code() == StatusCode::kUnavailable));
}

TEST_CASE("trainer: gloo group: size 1 needs no rendezvous, bad options are rejected", "[trainer][gloo]") {
  GlooGroupOptions o;
  auto single = MakeGlooGroup(o);
  REQUIRE(single.ok());
  std::vector<float> v = {1, 2};
  CHECK((*single)->AllReduceMean(v).ok());
  CHECK(v[1] == 2.0f);
  o.size = 2;
  o.rank = 2;
  CHECK(MakeGlooGroup(o).status().message().find("rank") != std::string::npos);
  o.rank = 0;
  o.store_dir = "/tmp";
  CHECK(MakeGlooGroup(o).status().message().find("prefix") != std::string::npos);
}

TEST_CASE("trainer: two workers of a region stay bitwise identical through inner steps", "[trainer][gloo]") {
  std::vector<std::vector<float>> params(2);
  std::vector<float> losses(2);
  const auto errors = RunRanks(2, "trainer-sync", [&](IntraRegionGroup& g) -> std::string {
    auto data = MakeDataSource(DataOptions{}, 0, 1, static_cast<uint32_t>(g.rank()), 2);
    if (!data.ok()) return data.status().ToString();
    TrainerOptions opts{*ModelPreset("tiny"), {}, 4, 11};
    InnerTrainer trainer(opts, **data, g);
    for (int i = 0; i < 5; ++i) {
      auto loss = trainer.Step();
      if (!loss.ok()) return loss.status().ToString();
      losses[g.rank()] = *loss;
    }
    params[g.rank()].assign(trainer.model().params().begin(), trainer.model().params().end());
    return "";
  });
  REQUIRE(errors[0] == "");
  REQUIRE(errors[1] == "");
  CHECK(losses[0] == losses[1]);  // region-mean loss
  REQUIRE(params[0].size() == params[1].size());
  CHECK(std::memcmp(params[0].data(), params[1].data(), params[0].size() * sizeof(float)) == 0);
  // Different data per worker, yet identical replicas: the gradient really was averaged.
  auto single = MakeSingleRankGroup();
  auto data = MakeDataSource(DataOptions{}, 0, 1, 0, 2);
  REQUIRE(data.ok());
  InnerTrainer alone(TrainerOptions{*ModelPreset("tiny"), {}, 4, 11}, **data, *single);
  for (int i = 0; i < 5; ++i) REQUIRE(alone.Step().ok());
  CHECK(std::memcmp(params[0].data(), alone.model().params().data(), params[0].size() * sizeof(float)) != 0);
}

TEST_CASE("trainer: gloo group rendezvous through a RendezvousStore instead of a directory", "[trainer][gloo]") {
  auto store = MakeInProcessRendezvousStore();
  const int size = 3;
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      GlooGroupOptions o;
      o.store = store;
      o.prefix = "served";
      o.rank = r;
      o.size = size;
      o.timeout = std::chrono::seconds(10);
      auto group = MakeGlooGroup(o);
      if (!group.ok()) {
        errors[r] = group.status().ToString();
        return;
      }
      std::vector<float> v = {static_cast<float>(r)};
      if (auto st = (*group)->AllReduceMean(v); !st.ok()) errors[r] = st.ToString();
      else if (v[0] != 1.0f) errors[r] = "mean of 0,1,2 is not 1";
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) CHECK(errors[r] == "");
  // A store whose keys never appear: a deadline, reported as a Status.
  GlooGroupOptions lonely;
  lonely.store = MakeInProcessRendezvousStore();
  lonely.prefix = "lonely";
  lonely.size = 2;
  lonely.timeout = std::chrono::milliseconds(200);
  auto failed = MakeGlooGroup(lonely);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("not set within") != std::string::npos);
}

TEST_CASE("trainer: a rank whose loss is not finite still joins the gradient all-reduce, and every rank's step "
          "fails alike",
          "[trainer][gloo]") {
  // Before: the rank checked its own loss first and returned, and its peer
  // waited in the all-reduce for the group's whole timeout (10 s here).
  const auto start = std::chrono::steady_clock::now();
  const auto errors = RunRanks(2, "nan-loss", [](IntraRegionGroup& g) -> std::string {
    DataOptions data;
    data.seed = 3;
    auto source = MakeDataSource(data, 0, 1, static_cast<uint32_t>(g.rank()), 2);
    if (!source.ok()) return source.status().ToString();
    InnerTrainer trainer(TrainerOptions{*ModelPreset("tiny"), {}, 8, 1}, **source, g);
    if (g.rank() == 1) {
      for (float& p : trainer.model().params()) p = std::numeric_limits<float>::quiet_NaN();
    }
    auto step = trainer.ComputeGradients();
    if (step.ok()) return "the step succeeded";
    if (step.status().code() != StatusCode::kDataLoss) return "not DataLoss: " + step.status().ToString();
    return "";
  });
  CHECK(errors == std::vector<std::string>{"", ""});
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}
