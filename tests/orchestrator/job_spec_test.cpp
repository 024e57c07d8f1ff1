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

TEST_CASE("a spec with neither worker nor model_preset runs the built-in trainer on the tiny preset", "[job_spec]") {
  auto spec = ParseJobSpecYaml("name: x\nrounds: 2\n", "job.yaml");
  REQUIRE(spec.ok());
  CHECK(spec->model_preset() == "tiny");
  CHECK_FALSE(spec->has_worker());
  CHECK(ValidateJobSpec(DefaultJobSpec()).ok());
}

TEST_CASE("a built-in worker's dimensions parse and override its preset", "[job_spec][worker]") {
  auto spec = ParseJobSpecYaml("name: x\nrounds: 2\nworker: {preset: small, context: 32, hidden: 512}\n", "job.yaml");
  REQUIRE(spec.ok());
  REQUIRE(spec->worker().has_builtin());
  const auto& b = spec->worker().builtin();
  CHECK(b.preset() == "small");
  CHECK(b.context() == 32);
  CHECK(b.hidden() == 512);
  CHECK(b.embed() == 0);  // the preset's
  CHECK(b.layers() == 0);
  CHECK(spec->model_preset() == "small");  // both spellings agree on the wire

  auto dims_only = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  embed: 24\n  layers: 2\n", "job.yaml");
  REQUIRE(dims_only.ok());
  CHECK(dims_only->worker().builtin().preset() == "tiny");
  CHECK(dims_only->worker().builtin().embed() == 24);

  auto legacy = ParseJobSpecYaml("name: x\nmodel_preset: small\nrounds: 2\nworker: {layers: 2}\n", "job.yaml");
  REQUIRE(legacy.ok());
  CHECK(legacy->worker().builtin().preset() == "small");

  auto big = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  preset: tiny\n  layers: 65\n", "job.yaml");
  REQUIRE_FALSE(big.ok());
  CHECK_THAT(big.status().message(),
             Catch::Contains("line 5") && Catch::Contains("'worker.layers'") && Catch::Contains("65"));
  auto preset = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  preset: huge\n", "job.yaml");
  REQUIRE_FALSE(preset.ok());
  CHECK_THAT(preset.status().message(),
             Catch::Contains("line 4") && Catch::Contains("'worker.preset'") && Catch::Contains("huge"));
}

TEST_CASE("a command worker parses with its environment and working directory", "[job_spec][worker]") {
  auto spec = ParseJobSpecYaml(
      "name: x\nrounds: 2\n"
      "worker:\n"
      "  command: [python3, train.py, --flag, '3']\n"
      "  env: {HF_HOME: /cache/hf, _DEBUG: '1'}\n"
      "  working_dir: scripts\n",
      "job.yaml");
  REQUIRE(spec.ok());
  REQUIRE(spec->worker().has_command());
  const auto& c = spec->worker().command();
  REQUIRE(c.argv_size() == 4);
  CHECK(c.argv(0) == "python3");
  CHECK(c.argv(2) == "--flag");
  CHECK(c.argv(3) == "3");
  CHECK(c.env().at("HF_HOME") == "/cache/hf");
  CHECK(c.env().at("_DEBUG") == "1");
  CHECK(c.working_dir() == "scripts");
  CHECK(spec->model_preset().empty());
  CHECK_FALSE(spec->has_data());  // no data section: the program brings its own
}

TEST_CASE("a command job needs no data but is given the data it names; a built-in job needs data",
          "[job_spec][worker]") {
  auto with_data = ParseJobSpecYaml(
      "name: x\nrounds: 2\nworker: {command: [./train]}\ndata:\n  text_file: {path: /data/corpus.txt}\n", "job.yaml");
  REQUIRE(with_data.ok());
  CHECK(with_data->data().text_file().path() == "/data/corpus.txt");

  v1::JobSpec command = DefaultJobSpec();
  command.clear_model_preset();
  command.clear_data();
  command.mutable_worker()->mutable_command()->add_argv("./train");
  CHECK(ValidateJobSpec(command).ok());

  v1::JobSpec builtin = DefaultJobSpec();
  builtin.clear_data();
  auto st = ValidateJobSpec(builtin);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("'data'"));
  builtin.mutable_worker()->mutable_builtin()->set_embed(32);
  CHECK_FALSE(ValidateJobSpec(builtin).ok());
}

TEST_CASE("an unknown field inside worker is an error naming it and its line", "[job_spec][worker]") {
  auto spec = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  command: [python3]\n  workdir: /tmp\n", "job.yaml");
  REQUIRE_FALSE(spec.ok());
  CHECK_THAT(spec.status().message(),
             Catch::Contains("job.yaml line 5") && Catch::Contains("unknown field 'worker.workdir'"));
  auto builtin = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  preset: tiny\n  embedding: 8\n", "job.yaml");
  REQUIRE_FALSE(builtin.ok());
  CHECK_THAT(builtin.status().message(),
             Catch::Contains("line 5") && Catch::Contains("unknown field 'worker.embedding'"));
  auto env_only = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  preset: tiny\n  env: {A: b}\n", "job.yaml");
  REQUIRE_FALSE(env_only.ok());
  CHECK_THAT(env_only.status().message(), Catch::Contains("line 5") && Catch::Contains("'worker.env'"));
}

TEST_CASE("a command worker may not set the variables the agent gives every worker", "[job_spec][worker]") {
  auto rank = ParseJobSpecYaml(
      "name: x\nrounds: 2\nworker:\n  command: [python3]\n  env:\n    OK: yes\n    RANK: '3'\n", "job.yaml");
  REQUIRE_FALSE(rank.ok());
  CHECK_THAT(rank.status().message(), Catch::Contains("line 7") && Catch::Contains("'worker.env.RANK'"));
  auto longhaul =
      ParseJobSpecYaml("name: x\nrounds: 2\nworker: {command: [python3], env: {LONGHAUL_REGION: eu}}\n", "job.yaml");
  REQUIRE_FALSE(longhaul.ok());
  CHECK_THAT(longhaul.status().message(), Catch::Contains("'worker.env.LONGHAUL_REGION'"));
  auto name = ParseJobSpecYaml("name: x\nrounds: 2\nworker: {command: [python3], env: {2FAST: x}}\n", "job.yaml");
  REQUIRE_FALSE(name.ok());
  CHECK_THAT(name.status().message(), Catch::Contains("2FAST"));

  v1::JobSpec wire = DefaultJobSpec();
  wire.clear_model_preset();
  auto* c = wire.mutable_worker()->mutable_command();
  c->add_argv("python3");
  c->mutable_env()->insert({"MASTER_PORT", "1"});
  CHECK_THAT(ValidateJobSpec(wire).message(), Catch::Contains("worker.env.MASTER_PORT"));
  c->mutable_env()->clear();
  (*c->mutable_env())["BIG"] = std::string(5000, 'v');
  const std::string msg = ValidateJobSpec(wire).message();
  CHECK_THAT(msg, Catch::Contains("worker.env.BIG") && Catch::Contains("5000 characters"));
  CHECK(msg.size() < 300);  // quotes only a prefix of the value
}

TEST_CASE("an empty command, or an empty entry in it, is rejected", "[job_spec][worker]") {
  auto empty = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  command: []\n", "job.yaml");
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.status().message(),
             Catch::Contains("line 4") && Catch::Contains("'worker.command' must be a non-empty list"));
  auto blank = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  command: [python3, '']\n", "job.yaml");
  REQUIRE_FALSE(blank.ok());
  CHECK_THAT(blank.status().message(), Catch::Contains("'worker.command[1]'"));
  auto scalar = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  command: python3 train.py\n", "job.yaml");
  REQUIRE_FALSE(scalar.ok());
  CHECK_THAT(scalar.status().message(), Catch::Contains("must be a non-empty list"));
  v1::JobSpec wire = DefaultJobSpec();
  wire.clear_model_preset();
  wire.mutable_worker()->mutable_command();
  CHECK_THAT(ValidateJobSpec(wire).message(), Catch::Contains("worker.command"));
}

TEST_CASE("a preset together with a command, or two disagreeing presets, are rejected", "[job_spec][worker]") {
  auto both = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 2\nworker: {command: [python3]}\n", "job.yaml");
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(both.status().message(),
             Catch::Contains("line 2") && Catch::Contains("'model_preset'") && Catch::Contains("worker.command"));
  auto inside = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  command: [python3]\n  preset: small\n", "job.yaml");
  REQUIRE_FALSE(inside.ok());
  CHECK_THAT(inside.status().message(), Catch::Contains("line 5") && Catch::Contains("'worker.preset'"));
  auto disagree = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 2\nworker: {preset: small}\n", "job.yaml");
  REQUIRE_FALSE(disagree.ok());
  CHECK_THAT(disagree.status().message(), Catch::Contains("disagrees"));
  CHECK(ParseJobSpecYaml("name: x\nmodel_preset: small\nrounds: 2\nworker: {preset: small}\n", "job.yaml").ok());

  v1::JobSpec wire = DefaultJobSpec();  // model_preset: tiny
  wire.mutable_worker()->mutable_command()->add_argv("python3");
  CHECK_THAT(ValidateJobSpec(wire).message(), Catch::Contains("model_preset"));
}

TEST_CASE("the PyTorch example job spec parses as a command worker", "[job_spec][worker]") {
  auto spec = LoadJobSpecFile(std::string(LONGHAUL_SOURCE_DIR) + "/examples/pytorch/job.yaml");
  REQUIRE(spec.ok());
  REQUIRE(spec->worker().has_command());
  CHECK(spec->worker().command().argv(0) == "/usr/bin/python3");
  CHECK(spec->data().has_text_file());
}
