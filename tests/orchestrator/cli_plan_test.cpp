// `longhaul plan` (CliPlan): the table, the JSON document, bad input.
#include <catch2/catch.hpp>

#include <sstream>

#include "longhaul/orchestrator/cli.h"

using namespace longhaul::orchestrator;

TEST_CASE("cli: plan prints every candidate with its prediction and marks the one to run", "[cli][plan]") {
  std::ostringstream out, err;
  CliContext ctx;
  ctx.out = &out;
  ctx.err = &err;
  const PlanRequest r{.params = 1e9, .step_seconds = 0.1, .regions = 3, .bandwidth_gbit = 1, .rtt_ms = 80};
  REQUIRE(CliPlan(ctx, r) == kExitOk);
  const std::string text = out.str();
  CHECK_THAT(text, Catch::Contains("sync fp32 (data parallel)") && Catch::Contains("(below target)"));
  CHECK_THAT(text, Catch::Contains("\n* ") && Catch::Contains("\nplan: "));
  std::ostringstream json;
  ctx.out = &json;
  ctx.json = true;
  REQUIRE(CliPlan(ctx, r) == kExitOk);
  CHECK_THAT(json.str(), Catch::StartsWith("{\"target_cu\":0.95,\"regions\":3,\"bandwidth_gbit\":1,\"rtt_ms\":80,"
                                           "\"candidates\":[{\"name\":\"sync fp32 (data parallel)\""));
  CHECK_THAT(json.str(), Catch::Contains("\"meets_target\":true") && Catch::Contains("\"reason\":"));
}

TEST_CASE("cli: plan refuses a plan it cannot model, as a usage error", "[cli][plan]") {
  std::ostringstream out, err;
  CliContext ctx;
  ctx.out = &out;
  ctx.err = &err;
  PlanRequest r{.params = 1e9, .step_seconds = 0.1, .regions = 2, .bandwidth_gbit = 1};
  r.regions = 1;
  CHECK(CliPlan(ctx, r) == kExitUsage);
  CHECK_THAT(err.str(), Catch::Contains("longhaul: ") && Catch::Contains("at least 2 regions"));
  r.regions = 2;
  r.bandwidth_gbit = 0;  // neither a link nor a job file to measure one
  CHECK(CliPlan(ctx, r) == kExitUsage);
  CHECK_THAT(err.str(), Catch::Contains("plan needs --bandwidth-gbit"));
}

TEST_CASE("cli: status shows an adaptive job's round plan, its predicted CU, re-plans and why", "[cli][replan]") {
  longhaul::v1::JobStatus s;
  s.set_job_id("job-000001");
  s.set_state("running");
  s.mutable_spec()->mutable_sync()->mutable_adaptive()->set_target_utilisation(0.6);
  s.mutable_plan()->set_inner_steps(400);
  s.mutable_plan()->set_codec(longhaul::v1::CODEC_INT4_BLOCK);
  s.mutable_plan()->set_predicted_cu(0.654);
  s.mutable_plan()->set_reason("H=200 int8 predicted at CU 40.0% misses the target 60.0%");
  s.set_replans(3);
  const std::string text = RenderJobStatus(s, false);
  CHECK_THAT(text, Catch::Contains("plan H=400 int4, predicted CU 65.4% (target 60%, 3 re-plan(s)): H=200 int8 "
                                   "predicted at CU 40.0% misses the target 60.0%"));
  // Without sync.adaptive there is nothing to say beyond the spec.
  s.mutable_spec()->mutable_sync()->clear_adaptive();
  CHECK_THAT(RenderJobStatus(s, false), !Catch::Contains("plan H="));
}

TEST_CASE("status: each region's intra-region backend and its reason, once its workers are up", "[cli]") {
  longhaul::v1::JobStatus s;
  s.set_job_id("job-2");
  s.set_total_rounds(4);
  auto* up = s.add_regions();
  up->set_region("eu-west");
  up->set_intra_region(longhaul::v1::INTRA_REGION_GLOO);
  up->set_intra_region_reason("auto: not nccl, worker rank 0 sees no CUDA device");
  s.add_regions()->set_region("us-east");  // its workers are not up yet
  const std::string text = RenderJobStatus(s, false);
  CHECK_THAT(text, Catch::Contains("intra-region gloo: auto: not nccl, worker rank 0 sees no CUDA device"));
  CHECK(text.find("intra-region") == text.rfind("intra-region"));  // us-east has none to show
}
