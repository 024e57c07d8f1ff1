// Model buffers (BatchNorm running statistics) in RegionReplica: no outer step,
// averaged over every region at the round's end, covered by the hash.
#include <catch2/catch.hpp>

#include <thread>

#include "longhaul/common/checksum.h"
#include "longhaul/worker/region_replica.h"
#include "longhaul/sync_policies/in_process_link.h"

namespace lw = longhaul::worker;
namespace lt = longhaul::trainer;
namespace ls = longhaul::sync_policies;

namespace {

constexpr size_t kParams = 6, kBuffers = 2;

// A region whose "training" moves its parameters and running statistics by
// region-specific amounts, so that unsynchronised buffers would differ.
struct FakeRegion {
  std::vector<float> values;  // kParams parameters, then kBuffers buffers
  std::unique_ptr<lt::IntraRegionGroup> group = lt::MakeSingleRankGroup();
  std::unique_ptr<lw::RegionReplica> replica;
  int index;

  FakeRegion(int i, ls::SyncKind kind) : values(kParams + kBuffers, 1.0f), index(i) {
    lw::ReplicaOptions o;
    o.region = std::to_string(i);
    o.region.insert(0, 1, 'r');  // not "r" + ...: GCC 12 -O3 warns falsely (-Wrestrict) on that
    o.schedule.kind = kind;
    o.schedule.inner_steps = 2;
    o.compression.codec = ls::Codec::kFp32;
    o.buffers = kBuffers;
    auto r = lw::RegionReplica::Create(o, values, *group);
    REQUIRE(r.ok());
    replica = std::move(*r);
  }
  std::span<float> buffers() { return std::span<float>(values).subspan(kParams); }

  // BeginRound, 2 inner steps, EndRound. Returns the round's result and the
  // buffers as training left them (before the round's end averaged them).
  longhaul::Result<lw::RoundResult> Round(ls::CollectiveLink& link, std::vector<float>* trained) {
    LONGHAUL_RETURN_IF_ERROR(replica->BeginRound({.round = 1, .epoch = 1}, &link));
    for (int step = 1; step <= 2; ++step) {
      std::vector<float> grad(values.size(), 0.1f * static_cast<float>(index + 1));
      LONGHAUL_RETURN_IF_ERROR(replica->AllReduceGradients(grad));  // kind sync only
      for (size_t i = 0; i < kParams; ++i) values[i] -= grad[i];
      for (size_t b = 0; b < kBuffers; ++b)  // a running mean of what this region saw
        buffers()[b] = 0.9f * buffers()[b] + 0.1f * static_cast<float>(10 * index + step + static_cast<int>(b));
      LONGHAUL_RETURN_IF_ERROR(replica->AfterInnerStep(1.0f, 1, 0.0).status());
    }
    trained->assign(buffers().begin(), buffers().end());
    return replica->EndRound();
  }
};

std::vector<std::vector<float>> RunRound(std::vector<std::unique_ptr<FakeRegion>>& regions,
                                         std::vector<longhaul::Result<lw::RoundResult>>* results) {
  ls::InProcessGroup wan(static_cast<int>(regions.size()));
  std::vector<std::vector<float>> trained(regions.size());
  results->assign(regions.size(), longhaul::Internal("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < regions.size(); ++i)
    threads.emplace_back([&, i] { (*results)[i] = regions[i]->Round(wan.link(static_cast<int>(i)), &trained[i]); });
  for (auto& t : threads) t.join();
  return trained;
}

}  // namespace

TEST_CASE("region_agent: model buffers take no outer step and end every round as the mean over regions",
          "[replica][buffers]") {
  for (ls::SyncKind kind : {ls::SyncKind::kDiLoCo, ls::SyncKind::kStreamingDiLoCo, ls::SyncKind::kSync}) {
    INFO(ls::SyncKindName(kind));
    std::vector<std::unique_ptr<FakeRegion>> regions;
    for (int i = 0; i < 2; ++i) regions.push_back(std::make_unique<FakeRegion>(i, kind));
    std::vector<longhaul::Result<lw::RoundResult>> results;
    const auto trained = RunRound(regions, &results);
    for (auto& r : results) REQUIRE(r.ok());
    REQUIRE(trained[0] != trained[1]);  // the regions' statistics differed before the round's end
    CHECK(results[0]->param_hash == results[1]->param_hash);
    for (size_t b = 0; b < kBuffers; ++b) {
      const float mean = (trained[0][b] + trained[1][b]) / 2;
      for (auto& region : regions) {
        CHECK(region->replica->theta()[kParams + b] == Approx(mean).epsilon(1e-6));
        CHECK(region->buffers()[b] == region->replica->theta()[kParams + b]);  // the model holds it too
      }
    }
    // The parameters' entries were synchronised by the kind's own rule, not by the buffers'.
    const float param = regions[0]->replica->theta()[0];
    CHECK(param == regions[1]->replica->theta()[0]);
    if (kind == ls::SyncKind::kSync) CHECK(param == Approx(1.0f - 2 * 0.15f));  // mean gradient 0.15, 2 steps
  }
}

TEST_CASE("region_agent: the hash covers the buffers, and a rolled-back round restores them", "[replica][buffers]") {
  std::vector<std::unique_ptr<FakeRegion>> regions;
  for (int i = 0; i < 2; ++i) regions.push_back(std::make_unique<FakeRegion>(i, ls::SyncKind::kDiLoCo));
  const std::vector<float> before = regions[0]->values;
  std::vector<longhaul::Result<lw::RoundResult>> results;
  RunRound(regions, &results);
  REQUIRE(results[0].ok());
  std::vector<float> theta(regions[0]->replica->theta().begin(), regions[0]->replica->theta().end());
  theta[kParams] += 1.0f;  // only a buffer differs
  CHECK(longhaul::ParameterHash(theta) != results[0]->param_hash);
  regions[0]->replica->Rollback();
  CHECK(regions[0]->values == before);
}

TEST_CASE("region_agent: local regions keep their own buffers, buffers need parameters beside them",
          "[replica][buffers]") {
  std::vector<std::unique_ptr<FakeRegion>> regions;
  for (int i = 0; i < 2; ++i) regions.push_back(std::make_unique<FakeRegion>(i, ls::SyncKind::kLocal));
  std::vector<longhaul::Result<lw::RoundResult>> results;
  const auto trained = RunRound(regions, &results);
  for (auto& r : results) REQUIRE(r.ok());
  for (int i = 0; i < 2; ++i) CHECK(std::vector<float>(regions[i]->buffers().begin(), regions[i]->buffers().end()) == trained[i]);

  std::vector<float> values(4, 0.0f);
  auto group = lt::MakeSingleRankGroup();
  lw::ReplicaOptions o;
  o.region = "eu";
  o.buffers = 4;
  auto r = lw::RegionReplica::Create(o, values, *group);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("4 buffer floats leave none of the 4 for parameters"));
}
