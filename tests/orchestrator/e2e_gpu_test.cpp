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
  RealCluster c("e2e-gpu");
  c.StartOrchestrator();
  const std::vector<std::string> regions = {kClusterRegions[0], kClusterRegions[1]};
  for (const auto& r : regions) c.StartAgent(r);
  v1::JobSpec spec = c.Spec(3, 5);
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
  CHECK(st.val_loss() < 5.0);  // below a uniform guess over 256 bytes (5.55 nats): it trained
  for (const auto& r : c.Rounds(job)) CHECK(r.participants.size() == 2);  // each commit: both hashes agreed
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
