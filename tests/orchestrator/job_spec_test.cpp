#include <catch2/catch.hpp>

#include "longhaul/orchestrator/job_spec.h"

using namespace longhaul;
using namespace longhaul::orchestrator;

namespace {
const char* kGood = R"(name: demo
model_preset: tiny
rounds: 12
regions: [eu-west, us-east, ap-south]
min_regions: 2
workers_per_region: 2
data:
  synthetic: {seed: 7, branching: 3, order: 2}
inner: {lr: 0.002, batch_size: 4}
outer: {name: nesterov, lr: 0.7, momentum: 0.9}
sync: {kind: diloco, inner_steps: 25}
compression: {codec: int8, block_size: 128}
checkpoint_interval: 4
)";
}

TEST_CASE("a complete job spec parses with every field and defaults for the rest", "[job_spec]") {
  auto spec = ParseJobSpecYaml(kGood, "job.yaml");
  REQUIRE(spec.ok());
  CHECK(spec->name() == "demo");
  CHECK(spec->rounds() == 12);
  CHECK(spec->regions_size() == 3);
  CHECK(spec->region_count() == 3);
  CHECK(spec->workers_per_region() == 2);
  CHECK(spec->data().synthetic().branching() == 3);
  CHECK(spec->inner().lr() == Approx(0.002));
  CHECK(spec->inner().beta2() == Approx(0.95));  // default
  CHECK(spec->sync().inner_steps() == 25);
  CHECK(spec->compression().codec() == v1::CODEC_INT8_BLOCK);
  CHECK(spec->compression().block_size() == 128);
  CHECK(spec->checkpoint_interval() == 4);
}

TEST_CASE("an unknown field is an error naming the field and its line", "[job_spec]") {
  auto spec = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 3\nsync:\n  kind: diloco\n  inner_step: 5\n", "job.yaml");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(spec.status().message(), Catch::Contains("job.yaml line 6") && Catch::Contains("unknown field 'sync.inner_step'"));
}

TEST_CASE("a wrong type is an error naming the field, the value and its line", "[job_spec]") {
  auto spec = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: ten\n", "job.yaml");
  REQUIRE_FALSE(spec.ok());
  CHECK_THAT(spec.status().message(), Catch::Contains("line 3") && Catch::Contains("'rounds'") && Catch::Contains("'ten'"));
  auto list = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 2\nregions: eu-west\n", "job.yaml");
  REQUIRE_FALSE(list.ok());
  CHECK_THAT(list.status().message(), Catch::Contains("line 4") && Catch::Contains("'regions' must be a list"));
  auto lr = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 2\ninner:\n  lr: fast\n", "job.yaml");
  REQUIRE_FALSE(lr.ok());
  CHECK_THAT(lr.status().message(), Catch::Contains("line 5") && Catch::Contains("'inner.lr' must be a number"));
}

TEST_CASE("a missing required field is named", "[job_spec]") {
  auto spec = ParseJobSpecYaml("name: x\nmodel_preset: tiny\n", "job.yaml");
  REQUIRE_FALSE(spec.ok());
  CHECK_THAT(spec.status().message(), Catch::Contains("missing required field 'rounds'") && Catch::Contains("line 1"));
  auto path = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 1\ndata:\n  text_file:\n    validation_fraction: 0.1\n",
                               "job.yaml");
  REQUIRE_FALSE(path.ok());
  CHECK_THAT(path.status().message(), Catch::Contains("'data.text_file.path'") && Catch::Contains("line 6"));
}

TEST_CASE("semantic errors name the field and the bad value", "[job_spec]") {
  auto kind = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 2\nsync: {kind: gossip}\n", "job.yaml");
  REQUIRE_FALSE(kind.ok());
  CHECK_THAT(kind.status().message(), Catch::Contains("sync.kind") && Catch::Contains("gossip"));
  auto codec = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 2\ncompression:\n  codec: zip\n", "job.yaml");
  REQUIRE_FALSE(codec.ok());
  CHECK_THAT(codec.status().message(), Catch::Contains("line 5") && Catch::Contains("zip"));
  auto minr = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 2\nregion_count: 2\nmin_regions: 3\n", "job.yaml");
  REQUIRE_FALSE(minr.ok());
  CHECK_THAT(minr.status().message(), Catch::Contains("min_regions"));
  auto dup = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 2\nregions: [a, a]\n", "job.yaml");
  REQUIRE_FALSE(dup.ok());
  CHECK_THAT(dup.status().message(), Catch::Contains("twice"));
}

TEST_CASE("broken YAML and empty files are reported, never thrown", "[job_spec]") {
  auto bad = ParseJobSpecYaml("name: [unclosed\nrounds: 1\n", "job.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("not valid YAML"));
  CHECK_FALSE(ParseJobSpecYaml("", "job.yaml").ok());
  CHECK_FALSE(ParseJobSpecYaml("- a\n- b\n", "job.yaml").ok());
  CHECK(LoadJobSpecFile("/nonexistent/job.yaml").status().code() == StatusCode::kNotFound);
}

TEST_CASE("the documented example job spec parses", "[job_spec]") {
  auto spec = LoadJobSpecFile(std::string(LONGHAUL_SOURCE_DIR) + "/deploy/examples/diloco-3-regions.yaml");
  REQUIRE(spec.ok());
  CHECK(spec->sync().kind() == "diloco");
  CHECK(RequiredRegions(*spec) == 3);
}
