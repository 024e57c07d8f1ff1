// End to end on a GPU (label gpu: skipped without a usable CUDA device): real
// orchestrator, agents and longhaul-worker processes whose regions agree on
// NCCL and train the built-in model in device memory.
#include <catch2/catch.hpp>

#include "real_cluster.h"

using namespace longhaul;
using namespace longhaul::testing;
using namespace std::chrono_literals;

TEST_CASE("e2e gpu: a 2-region job with intra_region nccl trains on the GPU and commits identical replicas",
          "[e2e][gpu]") {
  RealCluster c("e2e-gpu", {.gpus = true});
  c.StartOrchestrator();
  const std::vector<std::string> regions = {kClusterRegions[0], kClusterRegions[1]};
  for (const auto& r : regions) c.StartAgent(r);
  v1::JobSpec spec = c.Spec(3, 40);  // enough steps past AdamW's warm-up for the loss to fall (it does on CPUs)
  spec.clear_regions();
  for (const auto& r : regions) spec.add_regions(r);
  spec.set_region_count(2);
  spec.set_min_regions(2);
  spec.set_intra_region(v1::INTRA_REGION_NCCL);  // one worker per region: NCCL refuses two ranks on one GPU
  const std::string job = c.Submit(spec);
  const v1::JobStatus st = c.WaitFor(job, JobDone, 300s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  CHECK(st.round() == 3);
  CHECK(st.val_loss() > st.loss_floor());
  const auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 3);
  for (const auto& r : rounds) CHECK(r.participants.size() == 2);  // each commit: both hashes agreed
  CHECK(rounds.back().loss < rounds.front().loss);                  // it trained
  REQUIRE(st.regions_size() == 2);
  const std::string metrics = HttpGet(c.ep.metrics);
  for (const auto& region : st.regions()) {
    INFO(region.region());
    CHECK(region.intra_region() == v1::INTRA_REGION_NCCL);
    CHECK(region.intra_region_reason() == "the job asks for nccl");
    CHECK_THAT(metrics, Catch::Contains("longhaul_region_intra_region_backend{backend=\"nccl\",job=\"" + job +
                                        "\",region=\"" + region.region() + "\"} 1"));
  }
}

// A region on the GPU and a region on CPUs in one job: the outer step runs on
// the host in both, and kind sync's AdamW step is bit for bit the same on the
// device as on the host, so their replicas must agree at every commit.
TEST_CASE("e2e gpu: a GPU region and a CPU region commit the same hashes, DiLoCo and kind sync",
          "[e2e][gpu]") {
  for (const std::string kind : {"diloco", "sync"}) {
    INFO("kind " << kind);
    RealCluster c("e2e-gpu-mixed", {.gpus = true});
    c.StartOrchestrator();
    c.StartAgent(kClusterRegions[0]);  // sees the GPU
    c.options.gpus = false;            // the next agent and its workers see none
    c.StartAgent(kClusterRegions[1]);
    v1::JobSpec spec = c.Spec(kind == "sync" ? 8 : 3, kind == "sync" ? 1 : 5);
    spec.clear_regions();
    spec.add_regions(kClusterRegions[0]);
    spec.add_regions(kClusterRegions[1]);
    spec.set_region_count(2);
    spec.set_min_regions(2);
    spec.mutable_sync()->set_kind(kind);
    if (kind == "sync") spec.mutable_compression()->set_codec(v1::CODEC_FP32);
    const std::string job = c.Submit(spec);
    const v1::JobStatus st = c.WaitFor(job, JobDone, 300s);
    INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
    REQUIRE(st.state() == "succeeded");
    for (const auto& r : c.Rounds(job)) CHECK(r.participants.size() == 2);  // both hashes agreed
    REQUIRE(st.regions_size() == 2);
    for (const auto& region : st.regions()) {
      INFO(region.region());
      CHECK(region.intra_region() ==
            (region.region() == kClusterRegions[0] ? v1::INTRA_REGION_NCCL : v1::INTRA_REGION_GLOO));
    }
  }
}
