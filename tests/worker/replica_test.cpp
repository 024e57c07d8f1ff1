// RegionReplica: the worker side of a round, with simulated regions in one
// process (sync_policies' InProcessGroup as the WAN, one thread per worker).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <thread>

#include "longhaul/common/checksum.h"
#include "longhaul/worker/adamw_state.h"
#include "longhaul/worker/region_replica.h"
#include "longhaul/trainer/trainer.h"
#include "longhaul/sync_policies/in_process_link.h"
#include "longhaul/trainer/data.h"
#include "support/temp_dir.h"

namespace lw = longhaul::worker;
namespace lt = longhaul::trainer;
namespace ls = longhaul::sync_policies;

namespace {

// Stands for parameters on a GPU: the trainer's own buffer is the "device",
// the replica works on a host copy; counts the copies.
struct FakeMirror final : lw::ParameterMirror {
  std::span<float> device;
  std::vector<float> host;
  int to_host = 0, to_device = 0;
  int fail_to_device = 0;  // this many next copies back fail
  longhaul::Status ToHost() override {
    std::copy(device.begin(), device.end(), host.begin());
    ++to_host;
    return longhaul::Status::Ok();
  }
  longhaul::Status ToDevice() override {
    if (fail_to_device > 0) {
      --fail_to_device;
      return longhaul::Unavailable("injected copy failure");
    }
    std::copy(host.begin(), host.end(), device.begin());
    ++to_device;
    return longhaul::Status::Ok();
  }
};

// AdamW's moments behind host copies, as a device trainer's InnerState keeps them.
struct MirroredMoments final : lw::InnerState {
  explicit MirroredMoments(lt::AdamW& adam) : adam(adam), state(adam) {}
  void Save() override { state.Save(); }
  void Restore() override { state.Restore(); }
  void Rejoined(uint64_t job_step) override { state.Rejoined(job_step); }
  std::vector<std::span<float>> SharedState() override {
    m.assign(adam.first_moment().begin(), adam.first_moment().end());
    v.assign(adam.second_moment().begin(), adam.second_moment().end());
    return {m, v};
  }
  void SharedStateWritten() override {
    std::copy(m.begin(), m.end(), adam.first_moment().begin());
    std::copy(v.begin(), v.end(), adam.second_moment().begin());
  }
  lt::AdamW& adam;
  lw::AdamWState state;
  std::vector<float> m, v;
};

// One region with one worker: data, trainer and replica.
struct SimRegion {
  std::unique_ptr<lt::DataSource> data;
  std::unique_ptr<lt::IntraRegionGroup> group = lt::MakeSingleRankGroup();
  std::unique_ptr<lt::InnerTrainer> trainer;
  std::unique_ptr<lw::AdamWState> adam;
  std::unique_ptr<lw::RegionReplica> replica;
  lw::ReplicaOptions options;
  std::unique_ptr<FakeMirror> mirror;  // UseMirror(): the replica works on a host copy
  std::unique_ptr<MirroredMoments> mirrored_moments;

  SimRegion(uint32_t index, uint32_t count, ls::SyncKind kind, uint32_t h = 3, uint32_t tau = 0) {
    lt::DataOptions d;
    d.seed = 7;
    d.non_iid = true;
    auto ds = lt::MakeDataSource(d, index, count, 0, 1);
    REQUIRE(ds.ok());
    data = std::move(ds.value());
    lt::TrainerOptions t;
    t.model = *lt::ModelPreset("tiny");
    t.batch_size = 8;
    t.seed = 42;
    trainer = std::make_unique<lt::InnerTrainer>(t, *data, *group);
    lw::ReplicaOptions o;
    o.region = std::to_string(index);
    o.region.insert(0, 1, 'r');
    o.schedule.kind = kind;
    o.schedule.inner_steps = h;
    if (kind == ls::SyncKind::kStreamingDiLoCo) o.schedule.fragments = 3, o.schedule.mixing_alpha = 0.5;
    o.schedule.overlap_steps = tau;
    o.compression.codec = ls::Codec::kInt8Block;
    o.collective_timeout = std::chrono::seconds(10);
    o.tensors = trainer->model().tensors();
    options = o;
    Rebuild();
  }
  // A fresh replica over the trainer's current parameters (a restarted worker).
  void Rebuild() {
    adam = std::make_unique<lw::AdamWState>(trainer->optimizer());
    std::span<float> local = trainer->model().params();
    lw::InnerState* inner = adam.get();
    if (mirror) {
      mirror->device = local;
      mirror->host.assign(local.begin(), local.end());
      local = mirror->host;
      mirrored_moments = std::make_unique<MirroredMoments>(trainer->optimizer());
      inner = mirrored_moments.get();
    }
    auto r = lw::RegionReplica::Create(options, local, *group, inner, mirror.get());
    REQUIRE(r.ok());
    replica = std::move(*r);
  }
  void UseMirror() {
    mirror = std::make_unique<FakeMirror>();
    Rebuild();
  }
  // What the built-in worker does per round: H trainer steps, validation on theta.
  longhaul::Result<lw::RoundResult> Run(const lw::RoundInputs& in, ls::CollectiveLink* link) {
    return replica->Run(
        in, link,
        [this]() -> longhaul::Result<lw::RegionReplica::StepFigures> {
          const uint64_t t0 = trainer->tokens();
          LONGHAUL_ASSIGN_OR_RETURN(float loss, trainer->ComputeGradients());
          LONGHAUL_RETURN_IF_ERROR(replica->AllReduceGradients(trainer->gradient()));  // kind sync only
          trainer->ApplyGradients();
          return lw::RegionReplica::StepFigures{loss, trainer->tokens() - t0};
        },
        [this](std::span<const float> theta) -> longhaul::Result<double> { return trainer->ValidationLoss(theta, 1); });
  }
};

// Runs one round on every region concurrently over an in-process WAN.
std::vector<longhaul::Result<lw::RoundResult>> RunRound(std::vector<std::unique_ptr<SimRegion>>& regions, uint32_t round,
                                                        lw::RoundInputs base = {}) {
  ls::InProcessGroup wan(static_cast<int>(regions.size()));
  std::vector<longhaul::Result<lw::RoundResult>> results(regions.size(), longhaul::Internal("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < regions.size(); ++i) {
    threads.emplace_back([&, i] {
      lw::RoundInputs in = base;
      in.round = round;
      in.epoch = 1;
      in.this_region_joining = base.any_joining && static_cast<int>(i) != base.bootstrap_rank;
      results[i] = regions[i]->Run(in, &wan.link(static_cast<int>(i)));
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace

TEST_CASE("region_agent: DiLoCo round: every region ends with the same theta and the outer step moved it", "[replica]") {
  std::vector<std::unique_ptr<SimRegion>> regions;
  for (uint32_t i = 0; i < 3; ++i) regions.push_back(std::make_unique<SimRegion>(i, 3, ls::SyncKind::kDiLoCo));
  const std::string theta0 = longhaul::ParameterHash(regions[0]->replica->theta());
  for (uint32_t round = 1; round <= 2; ++round) {
    auto results = RunRound(regions, round);
    for (auto& r : results) REQUIRE(r.ok());
    CHECK(results[0]->param_hash != theta0);
    for (size_t i = 1; i < results.size(); ++i) CHECK(results[i]->param_hash == results[0]->param_hash);
    CHECK(results[0]->param_hash == longhaul::ParameterHash(regions[2]->replica->theta()));
    CHECK(results[0]->wan_bytes_sent > 0);
    CHECK(results[0]->val_loss > 0);
    CHECK(results[0]->tokens == 3 * 8);
    for (auto& r : regions) r->replica->Commit();
  }
  CHECK(regions[0]->replica->committed_round() == 2);
}

TEST_CASE("region_agent: An aborted round rolls back to theta(t-1) exactly", "[replica]") {
  std::vector<std::unique_ptr<SimRegion>> regions;
  for (uint32_t i = 0; i < 2; ++i) regions.push_back(std::make_unique<SimRegion>(i, 2, ls::SyncKind::kDiLoCo));
  auto first = RunRound(regions, 1);
  REQUIRE(first[0].ok());
  for (auto& r : regions) r->replica->Commit();
  const std::string committed = longhaul::ParameterHash(regions[0]->replica->theta());
  const std::string local = longhaul::ParameterHash(regions[0]->trainer->model().params());

  auto second = RunRound(regions, 2);
  REQUIRE(second[0].ok());
  CHECK(second[0]->param_hash != committed);
  for (auto& r : regions) r->replica->Rollback();
  CHECK(longhaul::ParameterHash(regions[0]->replica->theta()) == committed);
  CHECK(longhaul::ParameterHash(regions[1]->replica->theta()) == committed);
  CHECK(longhaul::ParameterHash(regions[0]->trainer->model().params()) == local);
  CHECK(!regions[0]->replica->pending());
}

TEST_CASE("region_agent: A region whose peer dies fails the round and keeps theta(t-1)", "[replica]") {
  std::vector<std::unique_ptr<SimRegion>> regions;
  for (uint32_t i = 0; i < 2; ++i) regions.push_back(std::make_unique<SimRegion>(i, 2, ls::SyncKind::kDiLoCo, 2));
  const std::string theta0 = longhaul::ParameterHash(regions[0]->replica->theta());
  ls::InProcessGroup wan(2);
  wan.Kill(1);
  lw::RoundInputs in;
  in.round = 1;
  auto r = regions[0]->Run(in, &wan.link(0));
  REQUIRE(!r.ok());
  CHECK(longhaul::ParameterHash(regions[0]->replica->theta()) == theta0);
  CHECK(!regions[0]->replica->pending());
}

TEST_CASE("region_agent: Sync and streaming kinds keep replicas identical too", "[replica]") {
  for (const ls::SyncKind kind : {ls::SyncKind::kSync, ls::SyncKind::kStreamingDiLoCo}) {
    std::vector<std::unique_ptr<SimRegion>> regions;
    for (uint32_t i = 0; i < 2; ++i) regions.push_back(std::make_unique<SimRegion>(i, 2, kind));
    auto results = RunRound(regions, 1);
    REQUIRE(results[0].ok());
    REQUIRE(results[1].ok());
    CHECK(results[0]->param_hash == results[1]->param_hash);
  }
}

TEST_CASE("region_agent: kind sync is data parallelism: 3 regions of batch 8 step like one process with batch 24",
          "[replica][sync]") {
  constexpr int kSteps = 50, kBatch = 8;
  std::vector<std::unique_ptr<SimRegion>> regions;
  for (uint32_t i = 0; i < 3; ++i) {
    regions.push_back(std::make_unique<SimRegion>(i, 3, ls::SyncKind::kSync, /*h=*/1));
    regions.back()->options.compression.codec = ls::Codec::kFp32;  // no codec asked for: fp32
    regions.back()->Rebuild();
  }
  // The reference: one model and one AdamW, each step on the three regions'
  // batches concatenated (the same data streams, in region order).
  std::vector<std::unique_ptr<lt::DataSource>> streams;
  for (uint32_t i = 0; i < 3; ++i) {
    lt::DataOptions d;
    d.seed = 7;
    d.non_iid = true;
    streams.push_back(std::move(lt::MakeDataSource(d, i, 3, 0, 1).value()));
  }
  const lt::ModelConfig config = *lt::ModelPreset("tiny");
  lt::ByteLM model(config);
  model.InitParams(42);
  lt::AdamW adam(regions[0]->trainer->options().adamw, model.num_params());
  std::vector<float> grad(model.num_params());

  double max_diff = 0;
  for (uint32_t step = 1; step <= kSteps; ++step) {
    auto results = RunRound(regions, step);  // H = 1: every step is a round, hashed
    for (auto& r : results) REQUIRE(r.ok());
    for (size_t i = 1; i < results.size(); ++i) REQUIRE(results[i]->param_hash == results[0]->param_hash);
    for (auto& r : regions) r->replica->Commit();
    lt::Batch all{.batch_size = 3 * kBatch, .context = config.context, .inputs = {}, .targets = {}};
    for (auto& stream : streams) {
      const lt::Batch b = stream->NextTrain(kBatch, config.context);
      all.inputs.insert(all.inputs.end(), b.inputs.begin(), b.inputs.end());
      all.targets.insert(all.targets.end(), b.targets.begin(), b.targets.end());
    }
    model.ForwardBackward(all, grad);
    adam.Step(model.params(), grad);
    const auto mine = regions[0]->trainer->model().params();
    for (size_t k = 0; k < mine.size(); ++k) max_diff = std::max<double>(max_diff, std::abs(mine[k] - model.params()[k]));
  }
  INFO("largest parameter difference to the one-process run over " << kSteps << " steps: " << max_diff);
  CHECK(max_diff < 1e-5);  // fp32 rounding of the averaging order, not a different algorithm
  CHECK(regions[0]->trainer->optimizer().step() == kSteps);
}

TEST_CASE("region_agent: a sync step whose gradients were not averaged fails the round, naming the call",
          "[replica][sync]") {
  std::vector<std::unique_ptr<SimRegion>> regions;
  for (uint32_t i = 0; i < 2; ++i) regions.push_back(std::make_unique<SimRegion>(i, 2, ls::SyncKind::kSync, 2));
  const std::string theta0 = longhaul::ParameterHash(regions[0]->replica->theta());
  ls::InProcessGroup wan(1);
  lw::RoundInputs in;
  in.round = 1;
  auto& r = *regions[0];
  auto result = r.replica->Run(in, &wan.link(0), [&]() -> longhaul::Result<lw::RegionReplica::StepFigures> {
    LONGHAUL_ASSIGN_OR_RETURN(float loss, r.trainer->Step());  // the optimizer step without the exchange
    return lw::RegionReplica::StepFigures{loss, 8};
  });
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == longhaul::StatusCode::kFailedPrecondition);
  CHECK_THAT(result.status().message(), Catch::Contains("sync_gradients") && Catch::Contains("inner step 1"));
  CHECK(longhaul::ParameterHash(r.replica->theta()) == theta0);
  CHECK(longhaul::ParameterHash(r.trainer->model().params()) == theta0);  // rolled back
}

TEST_CASE("region_agent: a region joining a sync job receives AdamW's moments and steps in lockstep",
          "[replica][sync]") {
  std::vector<std::unique_ptr<SimRegion>> regions;
  for (uint32_t i = 0; i < 2; ++i) regions.push_back(std::make_unique<SimRegion>(i, 2, ls::SyncKind::kSync, 2));
  for (uint32_t round = 1; round <= 2; ++round) {
    auto results = RunRound(regions, round);
    REQUIRE(results[0].ok());
    for (auto& r : regions) r->replica->Commit();
  }
  // Region 1 restarts: fresh parameters and zero moments; it joins round 3.
  regions[1] = std::make_unique<SimRegion>(1, 2, ls::SyncKind::kSync, 2);
  regions[1]->trainer->model().InitParams(999);
  regions[1]->Rebuild();
  lw::RoundInputs in;
  in.any_joining = true;
  in.bootstrap_rank = 0;
  auto joined = RunRound(regions, 3, in);
  REQUIRE(joined[0].ok());
  REQUIRE(joined[1].ok());
  CHECK(joined[0]->param_hash == joined[1]->param_hash);  // zero moments would have stepped differently
  for (auto& r : regions) r->replica->Commit();
  auto next = RunRound(regions, 4);
  REQUIRE(next[0].ok());
  REQUIRE(next[1].ok());
  CHECK(next[0]->param_hash == next[1]->param_hash);
  const auto m0 = regions[0]->trainer->optimizer().first_moment();
  const auto m1 = regions[1]->trainer->optimizer().first_moment();
  CHECK(std::equal(m0.begin(), m0.end(), m1.begin()));
}

TEST_CASE("region_agent: Streaming DiLoCo with overlap trains while fragments are in flight, replicas identical",
          "[replica]") {
  // H=6, P=3, tau=1: fragments 0 and 1 are sent at steps 2 and 4 and applied one
  // inner step later; fragment 2 is sent at step 6 and applied at the round's end.
  auto run = [](uint32_t tau) {
    std::vector<std::unique_ptr<SimRegion>> regions;
    for (uint32_t i = 0; i < 2; ++i) regions.push_back(std::make_unique<SimRegion>(i, 2, ls::SyncKind::kStreamingDiLoCo, 6, tau));
    std::string hash;
    for (uint32_t round = 1; round <= 2; ++round) {
      auto results = RunRound(regions, round);
      REQUIRE(results[0].ok());
      REQUIRE(results[1].ok());
      CHECK(results[0]->param_hash == results[1]->param_hash);
      CHECK(results[0]->wan_bytes_sent > 0);
      for (auto& r : regions) r->replica->Commit();
      hash = results[0]->param_hash;
    }
    return hash;
  };
  // The overlap changes what is mixed (the local fragment moved on meanwhile).
  CHECK(run(1) != run(0));
}

TEST_CASE("region_agent: A joining region receives theta and outer state from the bootstrap region", "[replica]") {
  std::vector<std::unique_ptr<SimRegion>> regions;
  for (uint32_t i = 0; i < 2; ++i) regions.push_back(std::make_unique<SimRegion>(i, 2, ls::SyncKind::kDiLoCo, 2));
  auto r1 = RunRound(regions, 1);
  REQUIRE(r1[0].ok());
  for (auto& r : regions) r->replica->Commit();
  // Region 1 "restarts" with fresh state (a different seed) and joins round 2.
  regions[1] = std::make_unique<SimRegion>(1, 2, ls::SyncKind::kDiLoCo, 2);
  regions[1]->trainer->model().InitParams(999);
  regions[1]->Rebuild();
  lw::RoundInputs in;
  in.any_joining = true;
  in.bootstrap_rank = 0;
  auto r2 = RunRound(regions, 2, in);
  REQUIRE(r2[0].ok());
  REQUIRE(r2[1].ok());
  CHECK(r2[0]->param_hash == r2[1]->param_hash);
  // The joiner continues the job's learning-rate schedule (round 2 ends at step 4).
  CHECK(regions[1]->trainer->optimizer().step() == 4);
  CHECK(regions[1]->trainer->optimizer().CurrentLr() == regions[0]->trainer->optimizer().CurrentLr());
}

TEST_CASE("region_agent: A checkpoint restores theta and the outer state", "[replica]") {
  const longhaul::testing::TempDir tmp("replica-ckpt");
  const auto& dir = tmp.path();
  std::vector<std::unique_ptr<SimRegion>> regions;
  for (uint32_t i = 0; i < 2; ++i) regions.push_back(std::make_unique<SimRegion>(i, 2, ls::SyncKind::kDiLoCo, 2));
  REQUIRE(RunRound(regions, 1)[0].ok());
  for (auto& r : regions) r->replica->Commit();
  const auto path = dir / "round-1.safetensors";
  REQUIRE(regions[0]->replica->WriteCheckpoint(path, {{"round", "1"}}).ok());

  // Restored into fresh replicas, the next round matches the uninterrupted one.
  std::vector<std::unique_ptr<SimRegion>> restored;
  for (uint32_t i = 0; i < 2; ++i) {
    restored.push_back(std::make_unique<SimRegion>(i, 2, ls::SyncKind::kDiLoCo, 2));
    auto round = restored.back()->replica->RestoreCheckpoint(path);
    REQUIRE(round.ok());
    CHECK(*round == 1);
    CHECK(longhaul::ParameterHash(restored.back()->replica->theta()) ==
          longhaul::ParameterHash(regions[0]->replica->theta()));
  }
  auto bad = restored[0]->replica->RestoreCheckpoint(dir / "missing.safetensors");
  CHECK(!bad.ok());
}

namespace {

std::vector<float> Copy(std::span<const float> s) { return {s.begin(), s.end()}; }

// The largest |a - b| relative to max(|b|, floor).
double MaxRelativeError(std::span<const float> a, std::span<const float> b, double floor) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double{a[i]} - b[i]) / std::max(std::abs(double{b[i]}), floor));
  return worst;
}

}  // namespace

TEST_CASE("region_agent: inner moments due in a round are replaced by their mean over the regions (DES-LOC)",
          "[replica][moments]") {
  // Two identical sets of regions; `twin` keeps its moments its own, so its
  // round-1 moments are what `des` averaged (the same steps from the same theta).
  std::vector<std::unique_ptr<SimRegion>> des, twin;
  for (uint32_t i = 0; i < 3; ++i) {
    twin.push_back(std::make_unique<SimRegion>(i, 3, ls::SyncKind::kDiLoCo));
    des.push_back(std::make_unique<SimRegion>(i, 3, ls::SyncKind::kDiLoCo));
    des.back()->options.moment_sync = {.first_moment_sync_rounds = 2, .second_moment_sync_rounds = 1};
    des.back()->Rebuild();
  }
  auto d1 = RunRound(des, 1);
  auto t1 = RunRound(twin, 1);
  for (size_t i = 0; i < 3; ++i) REQUIRE(d1[i].ok());
  for (size_t i = 0; i < 3; ++i) REQUIRE(t1[i].ok());
  auto m = [](auto& r) { return r->trainer->optimizer().first_moment(); };
  auto v = [](auto& r) { return r->trainer->optimizer().second_moment(); };
  std::vector<float> mean(v(twin[0]).size(), 0.0f);
  for (auto& r : twin)
    for (size_t j = 0; j < mean.size(); ++j) mean[j] += v(r)[j] / 3.0f;
  // Round 1: v is due (every round): every region holds the same mean, to bf16's precision.
  for (size_t i = 0; i < 3; ++i) CHECK(std::equal(v(des[i]).begin(), v(des[i]).end(), v(des[0]).begin()));
  double largest = 0;
  for (float x : mean) largest = std::max(largest, double{x});
  CHECK(MaxRelativeError(v(des[0]), mean, 1e-3 * largest) < 0.02);
  CHECK(MaxRelativeError(v(twin[0]), mean, 1e-3 * largest) > 0.1);  // the regions' own moments did differ
  // m is not due (every 2 rounds): each region keeps its own, bit for bit.
  for (size_t i = 0; i < 3; ++i) CHECK(std::equal(m(des[i]).begin(), m(des[i]).end(), m(twin[i]).begin()));
  CHECK(!std::equal(m(des[0]).begin(), m(des[0]).end(), m(des[1]).begin()));
  // The moment's bytes count: 3 regions in a ring send 2 x 2/3 of the vector, 2 bytes a value.
  const uint64_t extra = d1[0]->wan_bytes_sent - t1[0]->wan_bytes_sent;
  const uint64_t n = v(des[0]).size();
  CHECK(extra >= n * 2 * 2 * 2 / 3);
  CHECK(extra <= n * 2 * 2 * 2 / 3 + 1024);
  CHECK(d1[0]->param_hash == d1[1]->param_hash);
  for (auto& r : des) r->replica->Commit();

  // Round 2: both are due; a rollback restores the round's starting moments.
  const std::vector<float> m1 = Copy(m(des[0])), v1 = Copy(v(des[0]));
  auto d2 = RunRound(des, 2);
  for (size_t i = 0; i < 3; ++i) REQUIRE(d2[i].ok());
  for (size_t i = 0; i < 3; ++i) CHECK(std::equal(m(des[i]).begin(), m(des[i]).end(), m(des[0]).begin()));
  CHECK(!std::equal(v1.begin(), v1.end(), v(des[0]).begin()));
  for (auto& r : des) r->replica->Rollback();
  CHECK(std::equal(m1.begin(), m1.end(), m(des[0]).begin()));
  CHECK(std::equal(v1.begin(), v1.end(), v(des[0]).begin()));
}

TEST_CASE("region_agent: averaging inner moments is refused where it cannot run, naming why", "[replica][moments]") {
  SimRegion region(0, 1, ls::SyncKind::kSync);
  lw::ReplicaOptions o = region.options;
  o.moment_sync.second_moment_sync_rounds = 3;
  auto sync = lw::RegionReplica::Create(o, region.trainer->model().params(), *region.group, region.adam.get());
  REQUIRE(!sync.ok());
  CHECK_THAT(sync.status().message(), Catch::Contains("kind sync does not average the inner moments"));
  o.schedule.kind = ls::SyncKind::kDiLoCo;
  auto no_state = lw::RegionReplica::Create(o, region.trainer->model().params(), *region.group, nullptr);
  REQUIRE(!no_state.ok());
  CHECK_THAT(no_state.status().message(),
             Catch::Contains("second moment across regions, and the worker gave 0 optimizer state"));
  o.moment_sync.first_moment_sync_rounds = 4;  // m without v in rounds 4, 8, ...
  auto m_alone = lw::RegionReplica::Create(o, region.trainer->model().params(), *region.group, region.adam.get());
  REQUIRE(!m_alone.ok());
  CHECK_THAT(m_alone.status().message(), Catch::Contains("must be a multiple of second_moment_sync_rounds 3"));
  o.moment_sync.first_moment_sync_rounds = 6;
  CHECK(lw::RegionReplica::Create(o, region.trainer->model().params(), *region.group, region.adam.get()).ok());
}

TEST_CASE("region_agent: a round plan sets the round's inner steps and codec, every region alike", "[replica][plan]") {
  std::vector<std::unique_ptr<SimRegion>> regions;
  for (uint32_t i = 0; i < 3; ++i) regions.push_back(std::make_unique<SimRegion>(i, 3, ls::SyncKind::kDiLoCo));
  auto spec = RunRound(regions, 1);
  for (auto& r : spec) REQUIRE(r.ok());
  for (auto& r : regions) r->replica->Commit();
  CHECK(spec[0]->tokens == 3 * 8);

  lw::RoundInputs plan;
  plan.inner_steps = 6;
  plan.codec = ls::Codec::kInt4Block;
  plan.first_step = 3;
  auto planned = RunRound(regions, 2, plan);
  for (auto& r : planned) REQUIRE(r.ok());
  for (size_t i = 1; i < planned.size(); ++i) CHECK(planned[i]->param_hash == planned[0]->param_hash);
  CHECK(planned[0]->tokens == 6 * 8);
  // int4 sends half of int8's bits (scales aside).
  CHECK(planned[0]->wan_bytes_sent < spec[0]->wan_bytes_sent * 6 / 10);
  CHECK(regions[0]->replica->inner_steps() == 3);  // between rounds: the last committed round's
  for (auto& r : regions) r->replica->Commit();
  CHECK(regions[0]->replica->inner_steps() == 6);

  auto back = RunRound(regions, 3);  // no plan: the job's H and codec again
  for (auto& r : back) REQUIRE(r.ok());
  CHECK(back[0]->tokens == 3 * 8);
  CHECK(back[0]->wan_bytes_sent == spec[0]->wan_bytes_sent);
  CHECK(back[1]->param_hash == back[0]->param_hash);
}

TEST_CASE("region_agent: a round plan the schedule cannot run fails the round's start and changes nothing",
          "[replica][plan]") {
  SimRegion region(0, 1, ls::SyncKind::kStreamingDiLoCo, 6);  // P = 3
  const std::string theta0 = longhaul::ParameterHash(region.replica->theta());
  ls::InProcessGroup wan(1);
  lw::RoundInputs in;
  in.round = 1;
  in.inner_steps = 7;  // not a multiple of the fragments
  const auto started = region.replica->BeginRound(in, &wan.link(0));
  REQUIRE_FALSE(started.ok());
  CHECK_THAT(started.message(), Catch::Contains("round plan of 7 inner steps"));
  CHECK_FALSE(region.replica->in_round());
  CHECK(region.replica->inner_steps() == 6);
  CHECK(longhaul::ParameterHash(region.replica->theta()) == theta0);
  in.inner_steps = 12;  // a multiple runs
  auto r = region.Run(in, &wan.link(0));
  REQUIRE(r.ok());
  CHECK(r->tokens == 12 * 8);
}

namespace {

// One time-budgeted round (budget 0.1 s, at most 20 steps) of DiLoCo H=10
// regions whose steps take step_seconds[i] of compute and report `tokens`
// each, with plain averaging (sgd, lr 1, fp32): theta(1) is then the weighted
// mean of the regions' local parameters at their rounds' ends.
struct BudgetedRound {
  std::vector<std::unique_ptr<SimRegion>> regions;
  std::vector<longhaul::Result<lw::RoundResult>> results;
  std::vector<std::vector<float>> final_local;

  BudgetedRound(const std::vector<double>& step_seconds, uint64_t tokens) {
    const uint32_t n = static_cast<uint32_t>(step_seconds.size());
    for (uint32_t i = 0; i < n; ++i) {
      regions.push_back(std::make_unique<SimRegion>(i, n, ls::SyncKind::kDiLoCo, 10));
      regions[i]->options.outer = {.name = "sgd", .lr = 1.0f, .momentum = 0.0f};
      regions[i]->options.compression.codec = ls::Codec::kFp32;
      regions[i]->Rebuild();
    }
    ls::InProcessGroup wan(static_cast<int>(n));
    results.assign(n, longhaul::Internal("not run"));
    final_local.resize(n);
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        SimRegion& r = *regions[i];
        lw::RoundInputs in;
        in.round = 1;
        in.epoch = 1;
        in.compute_budget_seconds = 0.1;
        in.max_inner_steps = 20;
        results[i] = [&]() -> longhaul::Result<lw::RoundResult> {
          LONGHAUL_RETURN_IF_ERROR(r.replica->BeginRound(in, &wan.link(static_cast<int>(i))));
          for (;;) {
            LONGHAUL_ASSIGN_OR_RETURN(float loss, r.trainer->ComputeGradients());
            r.trainer->ApplyGradients();
            auto params = r.trainer->model().params();
            final_local[i].assign(params.begin(), params.end());
            LONGHAUL_ASSIGN_OR_RETURN(bool last, r.replica->AfterInnerStep(loss, tokens, step_seconds[i]));
            if (last) break;
          }
          return r.replica->EndRound();
        }();
      });
    }
    for (auto& t : threads) t.join();
  }

  // The largest |theta - sum(w_i local_i) / sum(w_i)| over the parameters.
  double WorstDeviation(const std::vector<double>& weights) const {
    const auto theta = regions[0]->replica->theta();
    double total = 0, worst = 0;
    for (double w : weights) total += w;
    for (size_t k = 0; k < theta.size(); ++k) {
      double want = 0;
      for (size_t i = 0; i < weights.size(); ++i) want += weights[i] * final_local[i][k];
      worst = std::max(worst, std::abs(theta[k] - want / total));
    }
    return worst;
  }
};

}  // namespace

TEST_CASE("region_agent: a time-budgeted round runs the steps that fit each region, and averages by tokens",
          "[replica][budget]") {
  // Region 2 steps twice as slowly; the budget is 10 steps of the others.
  BudgetedRound round({0.01, 0.01, 0.02}, 8);
  const auto& results = round.results;
  for (auto& r : results) REQUIRE(r.ok());
  CHECK(results[0]->inner_steps == 10);
  CHECK(results[1]->inner_steps == 10);
  CHECK(results[2]->inner_steps == 5);
  CHECK(results[2]->tokens == 5 * 8);
  CHECK(results[1]->param_hash == results[0]->param_hash);
  CHECK(results[2]->param_hash == results[0]->param_hash);
  // theta(1) = (10 local_0 + 10 local_1 + 5 local_2) / 25, up to fp32 rounding.
  CHECK(round.WorstDeviation({10, 10, 5}) < 1e-5);
}

TEST_CASE("region_agent: a time-budgeted round is refused for a kind that exchanges mid-round", "[replica][budget]") {
  SimRegion region(0, 1, ls::SyncKind::kStreamingDiLoCo, 6);
  ls::InProcessGroup wan(1);
  lw::RoundInputs in;
  in.round = 1;
  in.compute_budget_seconds = 1;
  const auto started = region.replica->BeginRound(in, &wan.link(0));
  CHECK_THAT(started.message(), Catch::Contains("time-budgeted round needs kind diloco"));
  CHECK_FALSE(region.replica->in_round());
}

TEST_CASE("region_agent: a round plan's overlap runs the round as a job with that overlap would", "[replica][plan]") {
  auto round_hash = [](uint32_t job_tau, std::optional<uint32_t> plan_tau) {
    std::vector<std::unique_ptr<SimRegion>> regions;
    for (uint32_t i = 0; i < 2; ++i)
      regions.push_back(std::make_unique<SimRegion>(i, 2, ls::SyncKind::kStreamingDiLoCo, 6, job_tau));
    lw::RoundInputs in;
    in.overlap_steps = plan_tau;
    auto results = RunRound(regions, 1, in);
    REQUIRE(results[0].ok());
    REQUIRE(results[1].ok());
    CHECK(results[0]->param_hash == results[1]->param_hash);
    return results[0]->param_hash;
  };
  const std::string planned = round_hash(0, 1);
  CHECK(planned == round_hash(1, std::nullopt));  // tau=1 from the plan is tau=1 from the job
  CHECK(planned != round_hash(0, std::nullopt));
}

TEST_CASE("region_agent: a time-budgeted round whose regions report no tokens averages by steps", "[replica][budget]") {
  BudgetedRound round({0.01, 0.02}, /*tokens=*/0);
  const auto& results = round.results;
  for (auto& r : results) REQUIRE(r.ok());
  REQUIRE(results[0]->inner_steps == 10);
  REQUIRE(results[1]->inner_steps == 5);
  CHECK(results[1]->param_hash == results[0]->param_hash);
  // theta(1) = (10 local_0 + 5 local_1) / 15: weighted by steps.
  CHECK(round.WorstDeviation({10, 5}) < 1e-5);
}

TEST_CASE("region_agent: parameters kept elsewhere behind a mirror train exactly as host ones, copied only at sync points",
          "[replica][mirror]") {
  struct Case {
    ls::SyncKind kind;
    uint32_t h, tau;
  };
  for (const Case c : {Case{ls::SyncKind::kDiLoCo, 3, 0}, Case{ls::SyncKind::kStreamingDiLoCo, 6, 1},
                       Case{ls::SyncKind::kSync, 2, 0}}) {
    INFO("kind " << static_cast<int>(c.kind));
    // Round 1 commits, round 2 rolls back, runs again and commits, and in
    // round 3 region 1 restarts from other parameters and joins.
    auto run = [&c](bool mirrored) {
      std::vector<std::unique_ptr<SimRegion>> regions;
      for (uint32_t i = 0; i < 2; ++i) {
        regions.push_back(std::make_unique<SimRegion>(i, 2, c.kind, c.h, c.tau));
        if (mirrored) regions.back()->UseMirror();
      }
      std::vector<std::string> hashes;
      const uint32_t rounds[] = {1, 2, 2, 3};
      for (int attempt = 0; attempt < 4; ++attempt) {
        lw::RoundInputs in;
        if (attempt == 3) {
          regions[1] = std::make_unique<SimRegion>(1, 2, c.kind, c.h, c.tau);
          regions[1]->trainer->model().InitParams(999);
          if (mirrored) regions[1]->UseMirror();
          in.any_joining = true;
          in.bootstrap_rank = 0;
        }
        auto results = RunRound(regions, rounds[attempt], in);
        REQUIRE(results[0].ok());
        REQUIRE(results[1].ok());
        CHECK(results[0]->param_hash == results[1]->param_hash);
        hashes.push_back(results[0]->param_hash);
        for (auto& r : regions) attempt == 1 ? r->replica->Rollback() : r->replica->Commit();
      }
      for (auto& r : regions) hashes.push_back(longhaul::ParameterHash(r->trainer->model().params()));
      if (mirrored && c.kind == ls::SyncKind::kDiLoCo) {
        // Round start and end only: two copies up, one back (and one more back
        // for the rollback), never one per inner step.
        CHECK(regions[0]->mirror->to_host == 4 * 2);
        CHECK(regions[0]->mirror->to_device == 4 + 1);
      }
      return hashes;
    };
    const std::vector<std::string> host = run(false);
    CHECK(run(true) == host);
    CHECK(host[1] != host[2]);  // round 3 trained on, from round 1's theta
  }
}

TEST_CASE("region_agent: a failed copy back of rolled-back parameters fails the next round's start, then is redone",
          "[replica][mirror]") {
  // Kind local (no WAN): round 1 commits, round 2 rolls back, round 2 runs again.
  auto run = [](bool fail) {
    SimRegion region(0, 1, ls::SyncKind::kLocal, 3);
    region.UseMirror();
    lw::RoundInputs in;
    in.round = 1;
    REQUIRE(region.Run(in, nullptr).ok());
    region.replica->Commit();
    in.round = 2;
    REQUIRE(region.Run(in, nullptr).ok());
    region.mirror->fail_to_device = fail ? 1 : 0;
    region.replica->Rollback();  // the "device" keeps round 2's parameters when the copy fails
    if (fail) {
      const longhaul::Status refused = region.replica->BeginRound(in, nullptr);
      CHECK(refused.code() == longhaul::StatusCode::kUnavailable);
      CHECK(refused.message().find("injected copy failure") != std::string::npos);
    }
    auto again = region.Run(in, nullptr);  // pushes the rolled-back parameters before it reads any
    REQUIRE(again.ok());
    return again->param_hash;
  };
  CHECK(run(true) == run(false));
}
