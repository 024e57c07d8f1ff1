#include "longhaul/proto/job_defaults.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/proto/wire_enums.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include "support/temp_dir.h"

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

TEST_CASE("defaults: a 0 written in the file stays 0, what is left out comes from the one table", "[job_spec][defaults]") {
  auto spec = ParseJobSpecYaml(
      "name: z\nrounds: 3\nseed: 0\ncheckpoint_interval: 0\n"
      "inner: {weight_decay: 0, beta1: 0, beta2: 0, warmup_steps: 0}\n"
      "outer: {momentum: 0}\nsync: {kind: streaming_diloco, inner_steps: 4, fragments: 2, mixing_alpha: 0}\n",
      "job.yaml");
  REQUIRE(spec.ok());
  CHECK(spec->seed() == 0);
  CHECK(spec->inner().weight_decay() == 0);
  CHECK(spec->inner().beta1() == 0);
  CHECK(spec->inner().beta2() == 0);
  CHECK(spec->outer().momentum() == 0);
  CHECK(spec->sync().mixing_alpha() == 0);
  CHECK(spec->inner().lr() == Approx(longhaul::proto::job_defaults::kInnerLr));  // left out
  CHECK(spec->outer().lr() == Approx(longhaul::proto::job_defaults::kOuterLr));
  CHECK(spec->compression().codec() == v1::CODEC_INT8_BLOCK);
  // The synchronous baseline without a compression section sends fp32 gradients.
  auto sync = ParseJobSpecYaml("name: s\nrounds: 3\nsync: {kind: sync}\n", "job.yaml");
  REQUIRE(sync.ok());
  CHECK(sync->compression().codec() == v1::CODEC_FP32);
  CHECK(sync->sync().inner_steps() == longhaul::proto::job_defaults::kInnerSteps);  // one H default, everywhere
  // What the YAML reader fills is what the orchestrator fills at admission: the same table.
  v1::JobSpec wire;
  wire.set_rounds(3);
  wire.mutable_sync()->set_kind("sync");
  longhaul::proto::FillJobDefaults(&wire);
  auto yaml = ParseJobSpecYaml("name: job\nrounds: 3\nsync: {kind: sync}\n", "job.yaml");
  REQUIRE(yaml.ok());
  CHECK(yaml->DebugString() == wire.DebugString());
}

TEST_CASE("intra_region: auto by default, nccl or gloo when asked, anything else named with its line", "[job_spec]") {
  auto unset = ParseJobSpecYaml("name: x\nrounds: 3\n", "job.yaml");
  REQUIRE(unset.ok());
  CHECK(unset->intra_region() == longhaul::proto::job_defaults::kIntraRegion);
  CHECK(unset->intra_region() == v1::INTRA_REGION_AUTO);
  for (auto [text, value] : {std::pair{"auto", v1::INTRA_REGION_AUTO}, std::pair{"nccl", v1::INTRA_REGION_NCCL},
                             std::pair{"gloo", v1::INTRA_REGION_GLOO}}) {
    auto spec = ParseJobSpecYaml(std::string("name: x\nrounds: 3\nintra_region: ") + text + "\n", "job.yaml");
    REQUIRE(spec.ok());
    CHECK(spec->intra_region() == value);
    CHECK(longhaul::proto::IntraRegionName(value) == text);
  }
  auto bad = ParseJobSpecYaml("name: x\nrounds: 3\nintra_region: cuda\n", "job.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("line 3") &&
                                         Catch::Contains("intra_region: 'cuda' is not one of auto, nccl, gloo"));
  // A wire spec with a value the names do not know is refused at admission.
  v1::JobSpec wire = DefaultJobSpec();
  wire.set_intra_region(static_cast<v1::IntraRegion>(9));
  auto refused = ValidateJobSpec(wire);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.message(), Catch::Contains("intra_region") && Catch::Contains("one of auto, nccl, gloo"));
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
  auto frag = ParseJobSpecYaml("name: x\nmodel_preset: tiny\nrounds: 2\nsync: {kind: diloco, fragments: 4}\n", "job.yaml");
  REQUIRE_FALSE(frag.ok());
  CHECK_THAT(frag.status().message(), Catch::Contains("sync.fragments") && Catch::Contains("only streaming_diloco"));
  auto grace = ParseJobSpecYaml("name: x\nrounds: 2\nworker: {exit_grace_s: 3601}\n", "job.yaml");
  REQUIRE_FALSE(grace.ok());
  CHECK_THAT(grace.status().message(), Catch::Contains("worker.exit_grace_s") && Catch::Contains("3601"));
  auto decay = ParseJobSpecYaml("name: x\nrounds: 2\nouter: {lr_decay: exponential}\n", "job.yaml");
  REQUIRE_FALSE(decay.ok());
  CHECK_THAT(decay.status().message(), Catch::Contains("outer.lr_decay") && Catch::Contains("exponential"));
  auto fraction = ParseJobSpecYaml("name: x\nrounds: 2\nouter: {final_lr_fraction: 2}\n", "job.yaml");
  REQUIRE_FALSE(fraction.ok());
  CHECK_THAT(fraction.status().message(), Catch::Contains("outer.final_lr_fraction"));
}

TEST_CASE("the outer schedule's fields parse, unset they come from the table (no schedule)", "[job_spec][defaults]") {
  auto spec = ParseJobSpecYaml(
      "name: s\nrounds: 100\nouter: {warmup_rounds: 5, lr_decay: cosine, final_lr_fraction: 0, "
      "momentum_warmup_rounds: 10, momentum_restart_rounds: 25}\n",
      "job.yaml");
  INFO(spec.status().message());
  REQUIRE(spec.ok());
  CHECK(spec->outer().warmup_rounds() == 5);
  CHECK(spec->outer().lr_decay() == "cosine");
  CHECK(spec->outer().final_lr_fraction() == 0);  // a 0 written stays 0
  CHECK(spec->outer().momentum_warmup_rounds() == 10);
  CHECK(spec->outer().momentum_restart_rounds() == 25);
  auto plain = ParseJobSpecYaml("name: s\nrounds: 3\n", "job.yaml");
  REQUIRE(plain.ok());
  namespace d = longhaul::proto::job_defaults;
  CHECK(plain->outer().warmup_rounds() == d::kOuterWarmupRounds);
  CHECK(plain->outer().lr_decay() == d::kOuterLrDecay);
  CHECK(plain->outer().final_lr_fraction() == Approx(d::kOuterFinalLrFraction));
  CHECK(plain->outer().momentum_warmup_rounds() == d::kOuterMomentumWarmupRounds);
  CHECK(plain->outer().momentum_restart_rounds() == d::kOuterMomentumRestartRounds);
}

TEST_CASE("the inner moments' sync periods parse for diloco kinds, are refused for the others, default never",
          "[job_spec][defaults]") {
  auto spec = ParseJobSpecYaml(
      "name: s\nrounds: 100\ninner: {first_moment_sync_rounds: 6, second_moment_sync_rounds: 3}\n", "job.yaml");
  INFO(spec.status().message());
  REQUIRE(spec.ok());
  CHECK(spec->inner().first_moment_sync_rounds() == 6);
  CHECK(spec->inner().second_moment_sync_rounds() == 3);
  auto plain = ParseJobSpecYaml("name: s\nrounds: 3\nsync: {kind: streaming_diloco, fragments: 2}\n", "job.yaml");
  REQUIRE(plain.ok());
  namespace d = longhaul::proto::job_defaults;
  CHECK(plain->inner().first_moment_sync_rounds() == d::kInnerFirstMomentSyncRounds);
  CHECK(plain->inner().second_moment_sync_rounds() == d::kInnerSecondMomentSyncRounds);
  auto sync = ParseJobSpecYaml("name: s\nrounds: 3\nsync: {kind: sync}\ninner: {second_moment_sync_rounds: 2}\n",
                               "job.yaml");
  REQUIRE_FALSE(sync.ok());
  CHECK_THAT(sync.status().message(),
             Catch::Contains("inner.second_moment_sync_rounds") && Catch::Contains("must be 0 for sync"));
  auto huge = ParseJobSpecYaml("name: s\nrounds: 3\ninner: {first_moment_sync_rounds: 2000000}\n", "job.yaml");
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.status().message(), Catch::Contains("inner.first_moment_sync_rounds") && Catch::Contains("0..1000000"));
  auto m_alone = ParseJobSpecYaml("name: s\nrounds: 3\ninner: {first_moment_sync_rounds: 4, second_moment_sync_rounds: 8}\n",
                                  "job.yaml");
  REQUIRE_FALSE(m_alone.ok());
  CHECK_THAT(m_alone.status().message(), Catch::Contains("inner.first_moment_sync_rounds 4 must be a multiple of "
                                                         "second_moment_sync_rounds 8"));
}

TEST_CASE("worker.exit_grace_s parses beside either kind of worker, unset it is the table's", "[job_spec][worker]") {
  auto command = ParseJobSpecYaml("name: x\nrounds: 2\nworker: {command: [python3, t.py], exit_grace_s: 0}\n", "job.yaml");
  REQUIRE(command.ok());
  CHECK(command->worker().has_exit_grace_s());
  CHECK(command->worker().exit_grace_s() == 0);
  auto builtin = ParseJobSpecYaml("name: x\nrounds: 2\nworker: {preset: tiny, exit_grace_s: 5}\n", "job.yaml");
  REQUIRE(builtin.ok());
  CHECK(builtin->worker().exit_grace_s() == 5);
  CHECK(builtin->worker().builtin().preset() == "tiny");
  auto unset = ParseJobSpecYaml("name: x\nrounds: 2\n", "job.yaml");
  REQUIRE(unset.ok());
  CHECK(unset->worker().exit_grace_s() == longhaul::proto::job_defaults::kWorkerExitGraceS);
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
  CHECK(spec->worker().builtin().preset() == "tiny");  // the complete spec names what runs
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

TEST_CASE("a command job needs no data but is given the data it names, a built-in job needs data",
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
  CHECK_THAT(msg, Catch::Contains("worker.env.BIG") && Catch::Contains("5000 bytes"));
  CHECK(msg.size() < 300);  // quotes only a prefix of the value
}

TEST_CASE("a command worker's environment may not change how programs are loaded or interpreted", "[job_spec][worker]") {
  for (const char* name : {"LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "GCONV_PATH", "PYTHONSTARTUP", "PYTHONHOME",
                           "BASH_ENV", "NODE_OPTIONS"}) {
    INFO(name);
    auto spec = ParseJobSpecYaml("name: x\nrounds: 2\nworker: {command: [python3], env: {" + std::string(name) +
                                     ": /tmp/x}}\n",
                                 "job.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK_THAT(spec.status().message(),
               Catch::Contains("'worker.env." + std::string(name) + "'") && Catch::Contains("loaded or interpreted"));
  }
  auto fine = ParseJobSpecYaml("name: x\nrounds: 2\nworker: {command: [python3], env: {HF_HOME: /cache, OMP_NUM_THREADS: '2'}}\n",
                               "job.yaml");
  CHECK(fine.ok());
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

// ---------------------------------------------------------------- hardening

namespace {

// A built-in spec with one extra line, for errors on line 3.
std::string WithLine(const std::string& line) { return "name: x\nrounds: 2\n" + line + "\n"; }

std::string ErrorOf(const Result<v1::JobSpec>& r) { return r.ok() ? std::string("(ok)") : r.status().message(); }

bool HasByte(const std::string& s, unsigned char b) { return s.find(static_cast<char>(b)) != std::string::npos; }

}  // namespace

TEST_CASE("a key given twice is an error naming the key and both lines", "[job_spec][limits]") {
  auto top = ParseJobSpecYaml("name: x\nrounds: 2\nseed: 1\nrounds: 3\n", "job.yaml");
  REQUIRE_FALSE(top.ok());
  CHECK(top.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(ErrorOf(top), Catch::Contains("job.yaml line 4") && Catch::Contains("'rounds' is given twice") &&
                               Catch::Contains("lines 2 and 4"));
  auto nested =
      ParseJobSpecYaml("name: x\nrounds: 2\nsync:\n  kind: diloco\n  inner_steps: 4\n  kind: sync\n", "job.yaml");
  CHECK_THAT(ErrorOf(nested), Catch::Contains("'sync.kind' is given twice") && Catch::Contains("lines 4 and 6"));
  auto flow = ParseJobSpecYaml(WithLine("inner: {lr: 0.1, lr: 0.2}"), "job.yaml");
  CHECK_THAT(ErrorOf(flow), Catch::Contains("'inner.lr' is given twice") && Catch::Contains("lines 3 and 3"));
  auto env = ParseJobSpecYaml("name: x\nrounds: 2\nworker:\n  command: [python3]\n  env:\n    A: '1'\n    A: '2'\n",
                              "job.yaml");
  CHECK_THAT(ErrorOf(env), Catch::Contains("'worker.env.A' is given twice") && Catch::Contains("lines 6 and 7"));
  auto region = ParseJobSpecYaml("name: x\nrounds: 2\nregions:\n  - eu\n  - us\n  - eu\n", "job.yaml");
  CHECK_THAT(ErrorOf(region), Catch::Contains("'eu' twice") && Catch::Contains("lines 4 and 6"));
}

TEST_CASE("a second YAML document is an error naming its line", "[job_spec][limits]") {
  auto two = ParseJobSpecYaml("name: x\nrounds: 2\n---\nname: y\nrounds: 3\n", "job.yaml");
  REQUIRE_FALSE(two.ok());
  CHECK_THAT(ErrorOf(two), Catch::Contains("job.yaml line 3") && Catch::Contains("second YAML document"));
  auto empty_second = ParseJobSpecYaml("---\nname: x\nrounds: 2\n---\n", "job.yaml");
  CHECK_THAT(ErrorOf(empty_second), Catch::Contains("line 4") && Catch::Contains("second YAML document"));
  auto inline_second = ParseJobSpecYaml("--- {name: x, rounds: 2}\n--- {name: y, rounds: 2}\n", "job.yaml");
  CHECK_THAT(ErrorOf(inline_second), Catch::Contains("line 2") && Catch::Contains("second YAML document"));
  // Explicit start and end markers around one document are fine.
  CHECK(ParseJobSpecYaml("---\nname: x\nrounds: 2\n...\n", "job.yaml").ok());
}

TEST_CASE("input on which yaml-cpp's LoadAll never returns is an error naming its line, not a hang",
          "[job_spec][limits][fuzz]") {
  // Found by fuzz/job_spec_fuzz (yaml-cpp 0.7, yaml-cpp#1040): LoadAll looped
  // for ever on a lone ',' while its memory grew.
  for (const char* yaml : {",", "name: x\n,\n", "[a, b]\n,"}) {
    INFO(yaml);
    auto spec = ParseJobSpecYaml(yaml, "job.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK_THAT(ErrorOf(spec), Catch::Contains("job.yaml line"));
  }
}

TEST_CASE("every string field has a length limit, checked with the value's line", "[job_spec][limits]") {
  struct Case {
    std::string yaml, field;
    size_t limit;
  };
  const std::string cmd = "worker:\n  command: [python3]\n  ";
  auto value = [](size_t n) { return std::string(n, 'a'); };
  const std::vector<Case> cases = {
      {"name: " + value(129) + "\nrounds: 2\n", "'name' must be at most 128 bytes", 1},
      {WithLine("model_preset: " + value(65)), "'model_preset' must be at most 64 bytes", 3},
      {WithLine("regions: [eu, " + value(129) + "]"), "'regions' must be at most 128 bytes", 3},
      {WithLine("data: {text_file: {path: " + value(4097) + "}}"), "'data.text_file.path' must be at most 4096", 3},
      {WithLine("inner: {name: " + value(65) + "}"), "'inner.name' must be at most 64 bytes", 3},
      {WithLine("outer: {name: " + value(65) + "}"), "'outer.name' must be at most 64 bytes", 3},
      {WithLine("outer: {lr_decay: " + value(65) + "}"), "'outer.lr_decay' must be at most 64 bytes", 3},
      {WithLine("sync: {kind: " + value(65) + "}"), "'sync.kind' must be at most 64 bytes", 3},
      {WithLine("compression: {codec: " + value(65) + "}"), "'compression.codec' must be at most 64 bytes", 3},
      {WithLine("worker: {preset: " + value(65) + "}"), "'worker.preset' must be at most 64 bytes", 3},
      {WithLine("worker: {command: [python3, " + value(4097) + "]}"), "'worker.command[1]' must be at most 4096", 3},
      {WithLine(cmd + "env: {A: " + value(4097) + "}"), "'worker.env.A' must be at most 4096 bytes", 5},
      {WithLine(cmd + "env: {" + value(257) + ": x}"), "'worker.env' names must be at most 256 bytes", 5},
      {WithLine(cmd + "working_dir: " + value(4097)), "'worker.working_dir' must be at most 4096 bytes", 5},
  };
  for (const auto& c : cases) {
    INFO(c.field);
    auto spec = ParseJobSpecYaml(c.yaml, "job.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().code() == StatusCode::kInvalidArgument);
    const std::string msg = ErrorOf(spec);
    CHECK_THAT(msg, Catch::Contains(c.field) && Catch::Contains("line " + std::to_string(c.limit)));
    CHECK_THAT(msg, Catch::Contains("aaaaaaaaaa...'") && Catch::Contains(" bytes)"));  // a prefix, then the length
    CHECK(msg.size() < 200);
  }
  // At the limit is fine.
  CHECK(ParseJobSpecYaml("name: " + value(128) + "\nrounds: 2\n", "job.yaml").ok());
}

TEST_CASE("lists have a count limit", "[job_spec][limits]") {
  std::string regions = "regions: [r0";
  for (int i = 1; i < 65; ++i) regions += ", r" + std::to_string(i);
  auto many = ParseJobSpecYaml(WithLine(regions + "]"), "job.yaml");
  CHECK_THAT(ErrorOf(many),
             Catch::Contains("line 3") && Catch::Contains("'regions' must have at most 64 names, got 65"));
  std::string argv = "worker: {command: [python3";
  for (int i = 0; i < 256; ++i) argv += ", a";
  CHECK_THAT(ErrorOf(ParseJobSpecYaml(WithLine(argv + "]}"), "job.yaml")),
             Catch::Contains("'worker.command' must have at most 256 entries, got 257"));
  std::string env = "worker:\n  command: [python3]\n  env: {V0: x";
  for (int i = 1; i < 257; ++i) env += ", V" + std::to_string(i) + ": x";
  CHECK_THAT(ErrorOf(ParseJobSpecYaml(WithLine(env + "}"), "job.yaml")),
             Catch::Contains("'worker.env' must have at most 256 entries, got 257"));
}

TEST_CASE("strings must be valid UTF-8, and the error names the field", "[job_spec][limits]") {
  const std::string bad = "caf\xc3";  // a truncated two-byte sequence
  auto name = ParseJobSpecYaml("name: " + bad + "\nrounds: 2\n", "job.yaml");
  REQUIRE_FALSE(name.ok());
  CHECK_THAT(ErrorOf(name), Catch::Contains("line 1") && Catch::Contains("'name' must be valid UTF-8"));
  CHECK_FALSE(HasByte(ErrorOf(name), 0xc3));  // the message itself stays valid UTF-8
  CHECK_THAT(ErrorOf(ParseJobSpecYaml(WithLine("regions: [eu, \"\xff\"]"), "job.yaml")),
             Catch::Contains("'regions' must be valid UTF-8"));
  CHECK_THAT(ErrorOf(ParseJobSpecYaml(WithLine("worker: {command: [python3, \"\xed\xa0\x80\"]}"), "job.yaml")),
             Catch::Contains("'worker.command[1]' must be valid UTF-8"));  // an encoded surrogate
  CHECK_THAT(ErrorOf(ParseJobSpecYaml(WithLine("worker: {command: [python3], env: {A: \"\xc0\xaf\"}}"), "job.yaml")),
             Catch::Contains("'worker.env.A' must be valid UTF-8"));  // an overlong '/'
  auto nul = ParseJobSpecYaml(WithLine("worker: {command: [python3], working_dir: \"a\\0b\"}"), "job.yaml");
  CHECK_THAT(ErrorOf(nul), Catch::Contains("'worker.working_dir' must not contain a NUL byte"));
  // Any valid UTF-8 is fine, and is quoted as written.
  auto ok =
      ParseJobSpecYaml("name: \"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80\"\nrounds: 2\n", "job.yaml");
  REQUIRE(ok.ok());
  CHECK(ok->name() == "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80");
  CHECK_THAT(ErrorOf(ParseJobSpecYaml(WithLine("sync: {kind: \"gr\xc3\xa8ve\"}"), "job.yaml")),
             Catch::Contains("'gr\xc3\xa8ve'"));
}

TEST_CASE("error messages quote at most a short prefix of a bad value", "[job_spec][limits]") {
  const std::string huge(5000, '9');
  const std::string word(5000, 'z');
  const std::vector<std::string> specs = {
      "name: x\nrounds: " + huge + "x\n",
      WithLine("inner: {lr: " + word + "}"),
      WithLine("data: {synthetic: {non_iid: " + word + "}}"),
      WithLine(std::string(1000, 'z') + ": 1"),  // YAML keys are at most 1024 characters
      WithLine("sync: {kind: " + std::string(60, 'k') + "}"),
      WithLine("outer: {name: " + std::string(60, 'o') + "}"),
  };
  for (const auto& y : specs) {
    const std::string msg = ErrorOf(ParseJobSpecYaml(y, "job.yaml"));
    INFO(msg.substr(0, 300));
    CHECK_THAT(msg, Catch::Contains("...'"));
    CHECK(msg.size() < 300);
  }
}

TEST_CASE("specs from the wire get the same limits as the YAML reader", "[job_spec][limits]") {
  v1::JobSpec long_name = DefaultJobSpec();
  long_name.set_name(std::string(129, 'n'));
  CHECK_THAT(ValidateJobSpec(long_name).message(), Catch::Contains("'name' must be at most 128 bytes"));
  v1::JobSpec bad_utf8 = DefaultJobSpec();
  bad_utf8.set_name("x\xff");
  CHECK_THAT(ValidateJobSpec(bad_utf8).message(), Catch::Contains("'name' must be valid UTF-8"));
  v1::JobSpec regions = DefaultJobSpec();
  for (int i = 0; i < 65; ++i) regions.add_regions(std::string("r").append(std::to_string(i)));
  regions.set_region_count(65);
  CHECK_THAT(ValidateJobSpec(regions).message(), Catch::Contains("'regions' must have at most 64 names"));
  v1::JobSpec twice = DefaultJobSpec();
  twice.add_regions("eu");
  twice.add_regions("eu");
  twice.set_region_count(2);
  CHECK_THAT(ValidateJobSpec(twice).message(), Catch::Contains("twice"));

  // Every string field of JobSpec, found by reflection, rejects a 5000-byte value:
  // a field added to the proto without a limit fails here.
  using google::protobuf::FieldDescriptor;
  std::vector<std::string> checked;
  std::function<void(const google::protobuf::Descriptor*, std::vector<const FieldDescriptor*>)> walk;
  walk = [&](const google::protobuf::Descriptor* d, std::vector<const FieldDescriptor*> path) {
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      auto p = path;
      p.push_back(f);
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_map()) {
        walk(f->message_type(), p);
        continue;
      }
      const bool map = f->is_map();
      if (!map && f->cpp_type() != FieldDescriptor::CPPTYPE_STRING) continue;
      for (int side = 0; side < (map ? 2 : 1); ++side) {
        std::string name;
        for (const auto* q : p) name += (name.empty() ? "" : ".") + q->name();
        if (map) name += side == 0 ? ".key" : ".value";
        INFO(name);
        // A valid base: a command worker for the worker.command fields, else the default.
        v1::JobSpec spec = DefaultJobSpec();
        if (name.rfind("worker.command", 0) == 0) {
          spec.clear_model_preset();
          spec.mutable_worker()->mutable_command()->add_argv("python3");
        }
        REQUIRE(ValidateJobSpec(spec).ok());
        google::protobuf::Message* m = &spec;
        for (size_t k = 0; k + 1 < p.size(); ++k) m = m->GetReflection()->MutableMessage(m, p[k]);
        const std::string big(5000, 'A');
        if (map) {
          google::protobuf::Message* entry = m->GetReflection()->AddMessage(m, f);
          const auto* kd = entry->GetDescriptor();
          entry->GetReflection()->SetString(entry, kd->FindFieldByName("key"), side == 0 ? big : "NAME");
          entry->GetReflection()->SetString(entry, kd->FindFieldByName("value"), side == 1 ? big : "v");
        } else if (f->is_repeated()) {
          m->GetReflection()->AddString(m, f, big);
        } else {
          m->GetReflection()->SetString(m, f, big);
        }
        const Status st = ValidateJobSpec(spec);
        CHECK_FALSE(st.ok());
        CHECK_THAT(st.message(), Catch::Contains("at most"));
        checked.push_back(name);
      }
    }
  };
  walk(v1::JobSpec::descriptor(), {});
  CHECK(checked.size() >= 12);  // name, model_preset, regions, data, optimizers, sync, worker...
}

TEST_CASE("a job file must be a regular file of at most 1 MiB, nothing blocks or exhausts memory",
          "[job_spec][limits]") {
  namespace fs = std::filesystem;
  const longhaul::testing::TempDir tmp("jobfile");
  const fs::path& dir = tmp.path();
  auto dir_spec = LoadJobSpecFile(dir);
  CHECK(dir_spec.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(ErrorOf(dir_spec), Catch::Contains("is a directory"));
  CHECK_THAT(ErrorOf(LoadJobSpecFile("/dev/zero")), Catch::Contains("is a character device"));
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  auto fifo = LoadJobSpecFile(dir / "fifo");  // no writer: opening it blocking would wait forever
  CHECK_THAT(ErrorOf(fifo), Catch::Contains("is a FIFO"));
  {
    std::ofstream big(dir / "big.yaml");
    big << "name: x\nrounds: 2\n# " << std::string((1 << 20) - 20, 'c') << "\n";
  }
  auto big = LoadJobSpecFile(dir / "big.yaml");
  CHECK(big.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(ErrorOf(big),
             Catch::Contains("job file " + (dir / "big.yaml").string() + " is 1048577 bytes; the limit is 1 MiB"));
  CHECK_THAT(ErrorOf(ParseJobSpecYaml(std::string((1 << 20) + 1, ' '), "job.yaml")),
             Catch::Contains("the limit is 1 MiB"));
  CHECK(LoadJobSpecFile(dir / "missing.yaml").status().code() == StatusCode::kNotFound);
  // Deep nesting is refused by the parser, not by a stack overflow.
  CHECK_FALSE(
      ParseJobSpecYaml(WithLine("data: " + std::string(200000, '[') + std::string(200000, ']')), "job.yaml").ok());
}

// ---------------------------------------------------------------- sync.adaptive

namespace {

// A built-in spec whose `sync` section is the given block-style lines (from line 3).
std::string WithSync(const std::string& lines) { return "name: x\nrounds: 2\nsync:\n" + lines; }

}  // namespace

TEST_CASE("sync.adaptive parses into its fields, and left out re-planning is off", "[job_spec][adaptive]") {
  auto spec = ParseJobSpecYaml(
      WithLine("sync: {kind: diloco, inner_steps: 25, adaptive: {target_utilisation: 0.6, max_inner_steps: 200, "
               "codecs: [int8, int4]}}"),
      "job.yaml");
  INFO(ErrorOf(spec));
  REQUIRE(spec.ok());
  REQUIRE(spec->sync().has_adaptive());
  const v1::AdaptiveSync& a = spec->sync().adaptive();
  CHECK(a.target_utilisation() == Approx(0.6));
  CHECK(a.max_inner_steps() == 200);
  REQUIRE(a.codecs_size() == 2);
  CHECK(a.codecs(0) == v1::CODEC_INT8_BLOCK);
  CHECK(a.codecs(1) == v1::CODEC_INT4_BLOCK);
  CHECK(spec->sync().inner_steps() == 25);  // the spec's H stays the first round's

  // Only the target is required: no max_inner_steps keeps H, no codecs keeps compression.codec.
  auto minimal = ParseJobSpecYaml(WithSync("  kind: streaming_diloco\n  inner_steps: 8\n  fragments: 2\n"
                                           "  adaptive:\n    target_utilisation: 1\n"),
                                  "job.yaml");
  INFO(ErrorOf(minimal));
  REQUIRE(minimal.ok());
  REQUIRE(minimal->sync().has_adaptive());
  CHECK(minimal->sync().adaptive().target_utilisation() == 1);
  CHECK(minimal->sync().adaptive().max_inner_steps() == 0);
  CHECK(minimal->sync().adaptive().codecs_size() == 0);

  // The spec's codec need not be in the list: it is the plan the job starts with.
  auto other = ParseJobSpecYaml(
      WithLine("sync: {adaptive: {target_utilisation: 0.5, codecs: [fp4, int4]}}\ncompression: {codec: bf16}"),
      "job.yaml");
  INFO(ErrorOf(other));
  CHECK(other.ok());

  auto off = ParseJobSpecYaml(WithLine("sync: {kind: diloco, inner_steps: 25}"), "job.yaml");
  REQUIRE(off.ok());
  CHECK_FALSE(off->sync().has_adaptive());
  CHECK_FALSE(DefaultJobSpec().sync().has_adaptive());  // the defaults table adds nothing
}

TEST_CASE("an unknown field inside sync.adaptive is an error naming it and its line", "[job_spec][adaptive]") {
  auto spec = ParseJobSpecYaml(
      WithSync("  kind: diloco\n  adaptive:\n    target_utilisation: 0.5\n    max_steps: 100\n"), "job.yaml");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(ErrorOf(spec), Catch::Contains("job.yaml line 7") &&
                                Catch::Contains("unknown field 'sync.adaptive.max_steps'") &&
                                Catch::Contains("known here: codecs, max_inner_steps, max_overlap_steps, target_utilisation"));
  auto twice = ParseJobSpecYaml(
      WithSync("  adaptive:\n    target_utilisation: 0.5\n    target_utilisation: 0.7\n"), "job.yaml");
  CHECK_THAT(ErrorOf(twice),
             Catch::Contains("'sync.adaptive.target_utilisation' is given twice") && Catch::Contains("lines 5 and 6"));
}

TEST_CASE("sync.adaptive's YAML errors name the field and its line", "[job_spec][adaptive]") {
  auto missing = ParseJobSpecYaml(WithSync("  kind: diloco\n  adaptive:\n    max_inner_steps: 40\n"), "job.yaml");
  CHECK_THAT(ErrorOf(missing), Catch::Contains("job.yaml line 6") &&
                                   Catch::Contains("missing required field 'sync.adaptive.target_utilisation'"));
  auto empty = ParseJobSpecYaml(WithLine("sync: {adaptive: {}}"), "job.yaml");
  CHECK_THAT(ErrorOf(empty),
             Catch::Contains("line 3") && Catch::Contains("missing required field 'sync.adaptive.target_utilisation'"));
  auto word = ParseJobSpecYaml(WithSync("  adaptive:\n    target_utilisation: high\n"), "job.yaml");
  CHECK_THAT(ErrorOf(word),
             Catch::Contains("line 5") && Catch::Contains("'sync.adaptive.target_utilisation' must be a number"));
  auto steps = ParseJobSpecYaml(WithSync("  adaptive:\n    target_utilisation: 0.5\n    max_inner_steps: -4\n"),
                                "job.yaml");
  CHECK_THAT(ErrorOf(steps), Catch::Contains("line 6") && Catch::Contains("'sync.adaptive.max_inner_steps'") &&
                                 Catch::Contains("'-4'"));
  auto scalar = ParseJobSpecYaml(WithSync("  adaptive: 0.6\n"), "job.yaml");
  CHECK_THAT(ErrorOf(scalar), Catch::Contains("line 4") && Catch::Contains("'sync.adaptive' must be a mapping"));

  auto unknown = ParseJobSpecYaml(
      WithSync("  adaptive:\n    target_utilisation: 0.5\n    codecs:\n      - int8\n      - zip\n"), "job.yaml");
  CHECK_THAT(ErrorOf(unknown), Catch::Contains("job.yaml line 8") && Catch::Contains("'sync.adaptive.codecs[1]'") &&
                                   Catch::Contains("'zip'"));
  auto spelt = ParseJobSpecYaml(WithLine("sync: {adaptive: {target_utilisation: 0.5, codecs: [int8_block]}}"),
                                "job.yaml");
  CHECK_THAT(ErrorOf(spelt), Catch::Contains("line 3") && Catch::Contains("'sync.adaptive.codecs[0]' must be one of") &&
                                 Catch::Contains("'int8_block'"));
  auto not_list = ParseJobSpecYaml(WithSync("  adaptive:\n    target_utilisation: 0.5\n    codecs: int8\n"),
                                   "job.yaml");
  CHECK_THAT(ErrorOf(not_list),
             Catch::Contains("line 6") && Catch::Contains("'sync.adaptive.codecs' must be a list of codec names"));
  auto nested = ParseJobSpecYaml(WithLine("sync: {adaptive: {target_utilisation: 0.5, codecs: [[int8]]}}"), "job.yaml");
  CHECK_THAT(ErrorOf(nested), Catch::Contains("'sync.adaptive.codecs[0]' must be a codec name"));
  auto many = ParseJobSpecYaml(
      WithLine("sync: {adaptive: {target_utilisation: 0.5, codecs: [fp32, bf16, int8, int4, fp4, topk, topk2, int8]}}"),
      "job.yaml");
  CHECK_THAT(ErrorOf(many),
             Catch::Contains("line 3") && Catch::Contains("'sync.adaptive.codecs' must have at most 7 codecs, got 8"));
  auto long_name = ParseJobSpecYaml(
      WithLine("sync: {adaptive: {target_utilisation: 0.5, codecs: [" + std::string(65, 'c') + "]}}"), "job.yaml");
  CHECK_THAT(ErrorOf(long_name), Catch::Contains("'sync.adaptive.codecs' must be at most 64 bytes"));
}

TEST_CASE("sync.adaptive's bounds are validated with messages naming the field", "[job_spec][adaptive]") {
  auto adaptive = [](const std::string& fields) {
    return ParseJobSpecYaml(WithLine("sync: {kind: diloco, inner_steps: 20, adaptive: {" + fields + "}}"), "job.yaml");
  };
  for (const char* target : {"0", "-0.5", "1.01", "inf"}) {
    INFO(target);
    CHECK_THAT(ErrorOf(adaptive(std::string("target_utilisation: ") + target)),
               Catch::Contains("'sync.adaptive.target_utilisation' must be in (0, 1]"));
  }
  CHECK(adaptive("target_utilisation: 1").ok());
  CHECK(adaptive("target_utilisation: 0.01").ok());

  CHECK_THAT(ErrorOf(adaptive("target_utilisation: 0.5, max_inner_steps: 10")),
             Catch::Contains("'sync.adaptive.max_inner_steps' must be 0") && Catch::Contains("20..1000000") &&
                 Catch::Contains("got 10"));
  CHECK_THAT(ErrorOf(adaptive("target_utilisation: 0.5, max_inner_steps: 1000001")),
             Catch::Contains("'sync.adaptive.max_inner_steps'") && Catch::Contains("got 1000001"));
  CHECK(adaptive("target_utilisation: 0.5, max_inner_steps: 0").ok());
  CHECK(adaptive("target_utilisation: 0.5, max_inner_steps: 20").ok());
  CHECK(adaptive("target_utilisation: 0.5, max_inner_steps: 1000000").ok());

  // Every codec a round may use must find valid compression options, not only compression.codec.
  auto blocks = ParseJobSpecYaml(
      WithLine("sync: {adaptive: {target_utilisation: 0.5, codecs: [bf16, int4]}}\n"
               "compression: {codec: fp32, block_size: 4}"),
      "job.yaml");
  CHECK_THAT(ErrorOf(blocks), Catch::Contains("'compression.block_size' must be in 8..1048576") &&
                                  Catch::Contains("sync.adaptive.codecs[1] is int4") && Catch::Contains("got 4"));
  CHECK(ParseJobSpecYaml(WithLine("sync: {kind: diloco}\ncompression: {codec: fp32, block_size: 4}"), "job.yaml").ok());
}

TEST_CASE("sync.adaptive is refused for the kinds sync and local", "[job_spec][adaptive]") {
  for (const char* kind : {"sync", "local"}) {
    INFO(kind);
    auto spec = ParseJobSpecYaml(
        WithLine(std::string("sync: {kind: ") + kind + ", adaptive: {target_utilisation: 0.5}}"), "job.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK_THAT(ErrorOf(spec), Catch::Contains("'sync.adaptive' applies only to sync.kind diloco or streaming_diloco") &&
                                  Catch::Contains("got sync.kind '" + std::string(kind) + "'"));
  }
  CHECK(ParseJobSpecYaml(WithLine("sync: {kind: diloco, adaptive: {target_utilisation: 0.5}}"), "job.yaml").ok());
}

TEST_CASE("streaming_diloco's max_inner_steps must be a multiple of its fragments", "[job_spec][adaptive]") {
  auto streaming = [](uint32_t max_inner_steps) {
    return ParseJobSpecYaml(
        WithLine("sync: {kind: streaming_diloco, inner_steps: 8, fragments: 4, adaptive: {target_utilisation: 0.5, "
                 "max_inner_steps: " + std::to_string(max_inner_steps) + "}}"),
        "job.yaml");
  };
  CHECK_THAT(ErrorOf(streaming(30)), Catch::Contains("'sync.adaptive.max_inner_steps' must be a multiple of "
                                                     "sync.fragments (4) for streaming_diloco, got 30"));
  CHECK(streaming(32).ok());
  CHECK(streaming(36).ok());  // not a power-of-two multiple of H: the doubling stops there
  CHECK(streaming(0).ok());
}

TEST_CASE("sync.adaptive.codecs may not name a codec twice", "[job_spec][adaptive]") {
  auto dup = ParseJobSpecYaml(WithLine("sync: {adaptive: {target_utilisation: 0.5, codecs: [int8, int4, int8]}}"),
                              "job.yaml");
  REQUIRE_FALSE(dup.ok());
  CHECK_THAT(ErrorOf(dup), Catch::Contains("'sync.adaptive.codecs' must not list a codec twice, got 'int8'"));
  auto alias = ParseJobSpecYaml(WithLine("sync: {adaptive: {target_utilisation: 0.5, codecs: [none, fp32]}}"),
                                "job.yaml");
  CHECK_THAT(ErrorOf(alias), Catch::Contains("must not list a codec twice, got 'fp32'"));  // none is fp32
}

TEST_CASE("specs from the wire get the same sync.adaptive checks as the YAML reader", "[job_spec][adaptive]") {
  v1::JobSpec base = DefaultJobSpec();  // diloco, H 20, int8
  base.mutable_sync()->mutable_adaptive()->set_target_utilisation(0.6);
  REQUIRE(ValidateJobSpec(base).ok());

  v1::JobSpec no_target = base;
  no_target.mutable_sync()->mutable_adaptive()->clear_target_utilisation();
  CHECK_THAT(ValidateJobSpec(no_target).message(),
             Catch::Contains("'sync.adaptive.target_utilisation' must be in (0, 1]"));
  v1::JobSpec unset = base;
  unset.mutable_sync()->mutable_adaptive()->add_codecs(v1::CODEC_INT4_BLOCK);
  unset.mutable_sync()->mutable_adaptive()->add_codecs(v1::CODEC_UNSPECIFIED);
  CHECK_THAT(ValidateJobSpec(unset).message(),
             Catch::Contains("'sync.adaptive.codecs[1]' must be one of") && Catch::Contains("got nothing"));
  v1::JobSpec unknown = base;
  unknown.mutable_sync()->mutable_adaptive()->mutable_codecs()->Add(42);
  CHECK_THAT(ValidateJobSpec(unknown).message(),
             Catch::Contains("'sync.adaptive.codecs[0]' must be one of") && Catch::Contains("got 42"));
  v1::JobSpec many = base;
  for (int i = 0; i < 8; ++i) many.mutable_sync()->mutable_adaptive()->add_codecs(v1::CODEC_BF16);
  CHECK_THAT(ValidateJobSpec(many).message(), Catch::Contains("'sync.adaptive.codecs' must have at most 7 codecs"));
  v1::JobSpec twice = base;
  twice.mutable_sync()->mutable_adaptive()->add_codecs(v1::CODEC_TOPK);
  twice.mutable_sync()->mutable_adaptive()->add_codecs(v1::CODEC_TOPK);
  CHECK_THAT(ValidateJobSpec(twice).message(), Catch::Contains("must not list a codec twice, got 'topk'"));
  v1::JobSpec sparse = base;
  sparse.mutable_sync()->mutable_adaptive()->add_codecs(v1::CODEC_TOPK);
  sparse.mutable_compression()->set_topk_fraction(0);
  CHECK_THAT(ValidateJobSpec(sparse).message(),
             Catch::Contains("'compression.topk_fraction' must be in (0, 1]") &&
                 Catch::Contains("sync.adaptive.codecs[0] is topk"));
  v1::JobSpec local = base;
  local.mutable_sync()->set_kind("local");
  local.mutable_compression()->set_codec(v1::CODEC_FP32);
  CHECK_THAT(ValidateJobSpec(local).message(), Catch::Contains("'sync.adaptive'") && Catch::Contains("'local'"));
  v1::JobSpec small = base;
  small.mutable_sync()->mutable_adaptive()->set_max_inner_steps(19);
  CHECK_THAT(ValidateJobSpec(small).message(), Catch::Contains("'sync.adaptive.max_inner_steps'"));
}

TEST_CASE("inner.warmup_steps stays bounded by the spec's rounds x inner_steps when H may grow",
          "[job_spec][adaptive]") {
  // The inner schedule spans rounds x inner_steps of the spec; a larger H adds steps after it.
  const std::string sync = "sync: {inner_steps: 10, adaptive: {target_utilisation: 0.5, max_inner_steps: 100}}\n";
  auto past = ParseJobSpecYaml(WithLine(sync + "inner: {warmup_steps: 21}"), "job.yaml");
  CHECK_THAT(ErrorOf(past),
             Catch::Contains("'inner.warmup_steps' must be at most the job's rounds x inner_steps (20)"));
  CHECK(ParseJobSpecYaml(WithLine(sync + "inner: {warmup_steps: 20}"), "job.yaml").ok());
}

TEST_CASE("sync.time_budgeted parses for diloco and is refused for the other kinds, naming why", "[job_spec][budget]") {
  auto spec = ParseJobSpecYaml(WithLine("sync: {kind: diloco, inner_steps: 25, time_budgeted: true}"), "job.yaml");
  INFO(ErrorOf(spec));
  REQUIRE(spec.ok());
  CHECK(spec->sync().time_budgeted());
  CHECK_FALSE(DefaultJobSpec().sync().time_budgeted());
  auto streaming = ParseJobSpecYaml(
      WithLine("sync: {kind: streaming_diloco, inner_steps: 8, fragments: 2, time_budgeted: true}"), "job.yaml");
  CHECK_THAT(ErrorOf(streaming), Catch::Contains("sync.time_budgeted") &&
                                     Catch::Contains("applies only to sync.kind diloco") &&
                                     Catch::Contains("streaming_diloco"));
  auto bad = ParseJobSpecYaml(WithLine("sync: {kind: diloco, time_budgeted: sometimes}"), "job.yaml");
  CHECK_THAT(ErrorOf(bad), Catch::Contains("sync.time_budgeted"));
}

TEST_CASE("sync.adaptive.max_overlap_steps is for streaming_diloco, at least its overlap_steps", "[job_spec][adaptive]") {
  auto ok = ParseJobSpecYaml(WithLine("sync: {kind: streaming_diloco, inner_steps: 48, fragments: 4, overlap_steps: 2, "
                                      "adaptive: {target_utilisation: 0.6, max_overlap_steps: 8}}"),
                             "job.yaml");
  INFO(ErrorOf(ok));
  REQUIRE(ok.ok());
  CHECK(ok->sync().adaptive().max_overlap_steps() == 8);
  auto diloco = ParseJobSpecYaml(
      WithLine("sync: {kind: diloco, adaptive: {target_utilisation: 0.6, max_overlap_steps: 8}}"), "job.yaml");
  CHECK_THAT(ErrorOf(diloco), Catch::Contains("sync.adaptive.max_overlap_steps") &&
                                  Catch::Contains("only streaming_diloco overlaps"));
  auto below = ParseJobSpecYaml(WithLine("sync: {kind: streaming_diloco, inner_steps: 48, fragments: 4, "
                                         "overlap_steps: 5, adaptive: {target_utilisation: 0.6, max_overlap_steps: 3}}"),
                                "job.yaml");
  CHECK_THAT(ErrorOf(below), Catch::Contains("at least overlap_steps (5)"));
}
