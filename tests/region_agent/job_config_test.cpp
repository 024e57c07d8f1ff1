// Admission checks an agent runs on a JobAssignment before launching workers.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <fstream>

#include <nlohmann/json.hpp>

#include "longhaul/proto/job_defaults.h"
#include "longhaul/worker/job_config.h"
#include "longhaul/session/job_config_json.h"
#include "longhaul/region_agent/region_report.h"
#include "longhaul/worker/shard_layout.h"

namespace lr = longhaul::region_agent;
namespace lw = longhaul::worker;
using longhaul::StatusCode;

namespace {
longhaul::v1::JobAssignment Good() {
  longhaul::v1::JobAssignment a;
  a.set_job_id("job-1");
  a.set_region("eu");
  auto* spec = a.mutable_spec();
  spec->set_model_preset("tiny");
  spec->set_workers_per_region(2);
  spec->set_rounds(3);
  spec->set_region_count(2);
  spec->mutable_data()->mutable_synthetic()->set_seed(3);
  spec->mutable_sync()->set_kind("diloco");
  spec->mutable_sync()->set_inner_steps(5);
  longhaul::proto::FillJobDefaults(spec);  // what the orchestrator does at admission
  return a;
}
}  // namespace

TEST_CASE("region_agent: A well-formed assignment is admitted with defaults filled in", "[job_config]") {
  auto job = lw::AdmitJob(Good(), "eu", 4);
  REQUIRE(job.ok());
  CHECK(job->workers == 2);
  CHECK(job->schedule.inner_steps == 5);
  CHECK(job->outer.name == "nesterov");
  CHECK(job->compression.codec == longhaul::sync_policies::Codec::kInt8Block);  // the table's, for diloco
  CHECK(job->intra_region == longhaul::trainer::IntraRegionSetting::kAuto);
  auto a = Good();
  a.mutable_spec()->set_intra_region(longhaul::v1::INTRA_REGION_GLOO);
  job = lw::AdmitJob(a, "eu", 4);
  REQUIRE(job.ok());
  CHECK(job->intra_region == longhaul::trainer::IntraRegionSetting::kGloo);
  CHECK(lw::IntraRegionToWire(longhaul::trainer::IntraRegionBackend::kNccl) == longhaul::v1::INTRA_REGION_NCCL);
}

TEST_CASE("region_agent: Bad assignments are refused with a message naming the problem", "[job_config]") {
  auto a = Good();
  a.mutable_spec()->set_model_preset("gigantic");
  auto r = lw::AdmitJob(a, "eu", 4);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("gigantic") != std::string::npos);

  r = lw::AdmitJob(Good(), "eu", 1);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kResourceExhausted);

  a = Good();
  a.mutable_spec()->mutable_data()->mutable_text_file()->set_path("/nonexistent/corpus.txt");
  longhaul::proto::FillJobDefaults(a.mutable_spec());  // admission: the text source's defaults
  r = lw::AdmitJob(a, "eu", 4);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK(r.status().message().find("/nonexistent/corpus.txt") != std::string::npos);

  CHECK(!lw::AdmitJob(Good(), "us", 4).ok());          // meant for another region
  a = Good();
  a.set_job_id("../../etc");
  CHECK(!lw::AdmitJob(a, "eu", 4).ok());               // unsafe job id
  a = Good();
  a.clear_spec();
  CHECK(!lw::AdmitJob(a, "eu", 4).ok());               // malformed: no spec
  a = Good();
  a.mutable_spec()->mutable_sync()->set_kind("gossip");
  CHECK(!lw::AdmitJob(a, "eu", 4).ok());               // unknown sync kind
  a = Good();
  a.mutable_spec()->clear_intra_region();
  r = lw::AdmitJob(a, "eu", 4);
  REQUIRE(!r.ok());                                    // the orchestrator fills every default
  CHECK(r.status().message().find("intra_region is unset") != std::string::npos);
  a = Good();
  a.mutable_spec()->mutable_outer()->set_name("lion");
  a.mutable_spec()->mutable_outer()->set_lr(0.5);
  CHECK(!lw::AdmitJob(a, "eu", 4).ok());               // unknown outer optimizer
}

TEST_CASE("region_agent: Custom worker dimensions override the preset and reach JobConfig.model", "[job_config]") {
  auto a = Good();
  a.mutable_spec()->clear_model_preset();
  auto* b = a.mutable_spec()->mutable_worker()->mutable_builtin();
  b->set_preset("small");
  b->set_embed(32);
  b->set_layers(2);
  auto job = lw::AdmitJob(a, "eu", 4);
  REQUIRE(job.ok());
  CHECK_FALSE(job->command.has_value());
  CHECK(job->has_data);
  CHECK(job->model.preset == "custom");
  CHECK(job->model.context == 16);       // small's
  CHECK(job->model.embed_dim == 32);     // overridden
  CHECK(job->model.hidden_dim == 768);   // small's
  CHECK(job->model.hidden_layers == 2);  // overridden

  a = Good();  // model_preset tiny, worker with only a dimension: the older spelling names the preset
  a.mutable_spec()->mutable_worker()->mutable_builtin()->set_hidden(128);
  job = lw::AdmitJob(a, "eu", 4);
  REQUIRE(job.ok());
  CHECK(job->model.embed_dim == 16);
  CHECK(job->model.hidden_dim == 128);

  a = Good();
  a.mutable_spec()->mutable_worker()->mutable_builtin()->set_preset("tiny");
  job = lw::AdmitJob(a, "eu", 4);
  REQUIRE(job.ok());
  CHECK(job->model.preset == "tiny");  // no override: still the preset

  a = Good();
  a.mutable_spec()->mutable_worker()->mutable_builtin()->set_layers(65);
  auto bad = lw::AdmitJob(a, "eu", 4);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("spec.worker.layers") != std::string::npos);

  a = Good();
  a.mutable_spec()->mutable_worker()->mutable_builtin()->set_preset("small");  // model_preset says tiny
  bad = lw::AdmitJob(a, "eu", 4);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("disagrees") != std::string::npos);
}

TEST_CASE("region_agent: A command worker is admitted with its argv, env and working_dir, and needs no data",
          "[job_config]") {
  auto a = Good();
  a.mutable_spec()->clear_model_preset();
  a.mutable_spec()->clear_data();
  auto* c = a.mutable_spec()->mutable_worker()->mutable_command();
  c->add_argv("python3");
  c->add_argv("train.py");
  c->mutable_env()->insert({"HF_HOME", "/cache/hf"});
  c->set_working_dir("/srv/job");
  auto job = lw::AdmitJob(a, "eu", 4);
  REQUIRE(job.ok());
  REQUIRE(job->command.has_value());
  CHECK(job->command->argv == std::vector<std::string>{"python3", "train.py"});
  CHECK(job->command->env.at("HF_HOME") == "/cache/hf");
  CHECK(job->command->working_dir == "/srv/job");
  CHECK_FALSE(job->has_data);
  CHECK(job->workers == 2);
  CHECK(job->schedule.inner_steps == 5);

  // Data it is given is parsed and passed on; a text file must exist.
  a.mutable_spec()->mutable_data()->mutable_text_file()->set_path("/nonexistent/corpus.txt");
  longhaul::proto::FillJobDefaults(a.mutable_spec());
  auto missing = lw::AdmitJob(a, "eu", 4);
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  a.mutable_spec()->mutable_data()->mutable_synthetic()->set_branching(3);
  longhaul::proto::FillJobDefaults(a.mutable_spec());
  job = lw::AdmitJob(a, "eu", 4);
  REQUIRE(job.ok());
  CHECK(job->has_data);
  CHECK(job->data.branching == 3);
}

TEST_CASE("region_agent: A built-in job without data is refused", "[job_config]") {
  auto a = Good();
  a.mutable_spec()->clear_data();
  auto r = lw::AdmitJob(a, "eu", 4);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("spec.data") != std::string::npos);
}

TEST_CASE("region_agent: A command worker with an empty argv or a reserved variable is refused", "[job_config]") {
  auto a = Good();
  a.mutable_spec()->mutable_worker()->mutable_command();
  auto r = lw::AdmitJob(a, "eu", 4);
  REQUIRE(!r.ok());
  CHECK(r.status().message().find("spec.worker.command") != std::string::npos);

  for (const char* reserved : {"RANK", "MASTER_ADDR", "LONGHAUL_REGION"}) {
    a = Good();
    auto* c = a.mutable_spec()->mutable_worker()->mutable_command();
    c->add_argv("python3");
    c->mutable_env()->insert({reserved, "x"});
    r = lw::AdmitJob(a, "eu", 4);
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(std::string("spec.worker.env.") + reserved) != std::string::npos);
  }
  // The agent refuses what the orchestrator refuses, whoever sent the spec.
  for (const char* loader : {"LD_PRELOAD", "PYTHONSTARTUP"}) {
    a = Good();
    auto* c = a.mutable_spec()->mutable_worker()->mutable_command();
    c->add_argv("python3");
    c->mutable_env()->insert({loader, "/tmp/x"});
    r = lw::AdmitJob(a, "eu", 4);
    REQUIRE(!r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains(std::string("spec.worker.env.") + loader) &&
                                         Catch::Contains("loaded or interpreted"));
  }
}

TEST_CASE("region_agent: Shard pieces partition every fragment", "[shard_layout]") {
  for (int workers : {1, 3, 4}) {
    size_t covered = 0;
    for (uint32_t f = 0; f < 3; ++f) {
      size_t expect = lw::ShardLayout(1001, 3, workers, 0).PieceOf(f, 0).fragment_begin;
      for (int r = 0; r < workers; ++r) {
        auto p = lw::ShardLayout(1001, 3, workers, r).Piece(f);
        CHECK(p.begin == expect);
        CHECK(p.size() <= p.padded);
        expect = p.end;
        covered += p.size();
      }
    }
    CHECK(covered == 1001);
  }
}

TEST_CASE("region_agent: The region report is ok only when all workers agree", "[region_report]") {
  std::vector<longhaul::v1::RoundReport> reports(2);
  for (auto& r : reports) {
    r.set_ok(true);
    r.set_param_hash("abc");
    r.set_tokens(10);
    r.set_loss(2.0);
  }
  auto ok = lr::AggregateRegionReport("eu", reports);
  CHECK(ok.ok());
  CHECK(ok.tokens() == 20);
  reports[1].set_param_hash("abd");
  auto bad = lr::AggregateRegionReport("eu", reports);
  CHECK(!bad.ok());
  CHECK(bad.error().message().find("disagree") != std::string::npos);
}

namespace {

// One numeric field of the job spec: how to set it, what the worker's
// JobConfig holds for it, and where lh.job_config() (the session's JSON) has it.
struct NumericField {
  const char* name;
  bool zero_valid;  // 0 is a legal value (the spec marks it optional)
  double other;     // a legal value that is no default
  std::function<void(longhaul::v1::JobSpec&, double)> set;
  std::function<double(const lw::JobConfig&)> seen;
  const char* section;  // JSON object ("" = top level)
  const char* key;
};

std::vector<NumericField> NumericFields() {
  using longhaul::v1::JobSpec;
  auto streaming = [](JobSpec& s) {
    s.mutable_sync()->set_kind("streaming_diloco");
    s.mutable_sync()->set_inner_steps(6);
    s.mutable_sync()->set_fragments(3);
  };
  return {
      {"inner.lr", false, 0.0123, [](JobSpec& s, double v) { s.mutable_inner()->set_lr(v); },
       [](const lw::JobConfig& c) { return c.inner.lr; }, "inner", "lr"},
      {"inner.weight_decay", true, 0.037, [](JobSpec& s, double v) { s.mutable_inner()->set_weight_decay(v); },
       [](const lw::JobConfig& c) { return c.inner.weight_decay; }, "inner", "weight_decay"},
      {"inner.beta1", true, 0.77, [](JobSpec& s, double v) { s.mutable_inner()->set_beta1(v); },
       [](const lw::JobConfig& c) { return c.inner.beta1; }, "inner", "beta1"},
      {"inner.beta2", true, 0.88, [](JobSpec& s, double v) { s.mutable_inner()->set_beta2(v); },
       [](const lw::JobConfig& c) { return c.inner.beta2; }, "inner", "beta2"},
      {"inner.warmup_steps", true, 7, [](JobSpec& s, double v) { s.mutable_inner()->set_warmup_steps(v); },
       [](const lw::JobConfig& c) { return c.inner.warmup_steps; }, "inner", "warmup_steps"},
      {"inner.second_moment_sync_rounds", true, 3,
       [](JobSpec& s, double v) { s.mutable_inner()->set_second_moment_sync_rounds(v); },
       [](const lw::JobConfig& c) { return c.moment_sync.second_moment_sync_rounds; }, "inner",
       "second_moment_sync_rounds"},
      {"inner.first_moment_sync_rounds", true, 6,
       [](JobSpec& s, double v) {
         s.mutable_inner()->set_first_moment_sync_rounds(v);
         s.mutable_inner()->set_second_moment_sync_rounds(3);  // m's period: a multiple of v's
       },
       [](const lw::JobConfig& c) { return c.moment_sync.first_moment_sync_rounds; }, "inner",
       "first_moment_sync_rounds"},
      {"inner.batch_size", false, 5, [](JobSpec& s, double v) { s.mutable_inner()->set_batch_size(v); },
       [](const lw::JobConfig& c) { return c.batch_size; }, "inner", "batch_size"},
      {"outer.lr", false, 0.55, [](JobSpec& s, double v) { s.mutable_outer()->set_lr(v); },
       [](const lw::JobConfig& c) { return c.outer.lr; }, "outer", "lr"},
      {"outer.momentum", true, 0.45, [](JobSpec& s, double v) { s.mutable_outer()->set_momentum(v); },
       [](const lw::JobConfig& c) { return c.outer.momentum; }, "outer", "momentum"},
      {"sync.inner_steps", false, 9, [](JobSpec& s, double v) { s.mutable_sync()->set_inner_steps(v); },
       [](const lw::JobConfig& c) { return c.schedule.inner_steps; }, "sync", "inner_steps"},
      {"sync.fragments", false, 2,
       [=](JobSpec& s, double v) {
         streaming(s);
         s.mutable_sync()->set_fragments(v);
       },
       [](const lw::JobConfig& c) { return c.schedule.fragments; }, "sync", "fragments"},
      {"sync.overlap_steps", true, 1,
       [=](JobSpec& s, double v) {
         streaming(s);
         s.mutable_sync()->set_overlap_steps(v);
       },
       [](const lw::JobConfig& c) { return c.schedule.overlap_steps; }, "sync", "overlap_steps"},
      {"sync.mixing_alpha", true, 0.35,
       [=](JobSpec& s, double v) {
         streaming(s);
         s.mutable_sync()->set_mixing_alpha(v);
       },
       [](const lw::JobConfig& c) { return c.schedule.mixing_alpha; }, "sync", "mixing_alpha"},
      {"compression.block_size", false, 64, [](JobSpec& s, double v) { s.mutable_compression()->set_block_size(v); },
       [](const lw::JobConfig& c) { return c.compression.block_size; }, "compression", "block_size"},
      {"compression.topk_fraction", false, 0.02,
       [](JobSpec& s, double v) { s.mutable_compression()->set_topk_fraction(v); },
       [](const lw::JobConfig& c) { return c.compression.topk_fraction; }, "compression", "topk_fraction"},
      {"rounds", false, 4, [](JobSpec& s, double v) { s.set_rounds(v); },
       [](const lw::JobConfig& c) { return c.rounds; }, "", "rounds"},
      {"seed", true, 77, [](JobSpec& s, double v) { s.set_seed(v); }, [](const lw::JobConfig& c) { return c.seed; },
       "", "seed"},
      {"checkpoint_interval", true, 3, [](JobSpec& s, double v) { s.set_checkpoint_interval(v); },
       [](const lw::JobConfig& c) { return c.checkpoint_interval; }, "", "checkpoint_interval"},
      {"data.synthetic.seed", true, 99, [](JobSpec& s, double v) { s.mutable_data()->mutable_synthetic()->set_seed(v); },
       [](const lw::JobConfig& c) { return c.data.seed; }, "data", "synthetic.seed"},
      {"worker.exit_grace_s", true, 5, [](JobSpec& s, double v) { s.mutable_worker()->set_exit_grace_s(v); },
       [](const lw::JobConfig& c) { return c.exit_grace_s; }, "worker", "exit_grace_s"},
      {"data.synthetic.branching", false, 6,
       [](JobSpec& s, double v) { s.mutable_data()->mutable_synthetic()->set_branching(v); },
       [](const lw::JobConfig& c) { return c.data.branching; }, "data", "synthetic.branching"},
  };
}

double JsonValue(const nlohmann::json& j, const std::string& section, const std::string& key) {
  const nlohmann::json& s = section.empty() ? j : j.at(section);
  const auto dot = key.find('.');
  return dot == std::string::npos ? s.at(key).get<double>() : s.at(key.substr(0, dot)).at(key.substr(dot + 1)).get<double>();
}

}  // namespace

TEST_CASE("region_agent: every numeric spec field reaches the worker and lh.job_config() as given, 0 included",
          "[job_config][defaults]") {
  longhaul::session::SessionOptions options;
  for (const auto& f : NumericFields()) {
    std::vector<double> values = {f.other};
    if (f.zero_valid) values.push_back(0.0);
    for (double v : values) {
      INFO(f.name << " = " << v);
      auto a = Good();
      f.set(*a.mutable_spec(), v);
      longhaul::proto::FillJobDefaults(a.mutable_spec());  // admission fills only what is unset
      auto job = lw::AdmitJob(a, "eu", 4);
      REQUIRE(job.ok());
      CHECK(f.seen(*job) == Approx(v));
      const auto json = nlohmann::json::parse(longhaul::session::JobConfigJson(*job, options));
      CHECK(JsonValue(json, f.section, f.key) == Approx(v));
    }
  }
}

TEST_CASE("region_agent: an unset field has the one table's default, a 0 where 0 is legal stays 0",
          "[job_config][defaults]") {
  namespace d = longhaul::proto::job_defaults;
  longhaul::v1::JobAssignment a;
  a.set_job_id("job-1");
  a.set_region("eu");
  a.mutable_spec()->set_rounds(1);                     // the one field without a default
  longhaul::proto::FillJobDefaults(a.mutable_spec());  // otherwise empty: every default
  auto job = lw::AdmitJob(a, "eu", 4);
  INFO(job.status().ToString());
  REQUIRE(job.ok());
  CHECK(job->inner.lr == Approx(d::kInnerLr));
  CHECK(job->inner.weight_decay == Approx(d::kInnerWeightDecay));
  CHECK(job->inner.beta1 == Approx(d::kInnerBeta1));
  CHECK(job->inner.beta2 == Approx(d::kInnerBeta2));
  CHECK(job->schedule.kind == d::kSyncKind);
  CHECK(job->schedule.inner_steps == d::kInnerSteps);
  CHECK(job->schedule.mixing_alpha == Approx(d::kMixingAlpha));
  CHECK(job->outer.momentum == Approx(d::kOuterMomentum));
  CHECK(job->compression.codec == longhaul::sync_policies::Codec::kInt8Block);
  CHECK(job->batch_size == static_cast<int>(d::kInnerBatchSize));
  CHECK(job->seed == d::kSeed);
  CHECK(job->model.preset == d::kModelPreset);
  CHECK(job->exit_grace_s == d::kWorkerExitGraceS);

  // A sync job that names no codec averages fp32 gradients; one that names int8 gets int8.
  longhaul::v1::JobSpec sync;
  sync.mutable_sync()->set_kind("sync");
  longhaul::proto::FillJobDefaults(&sync);
  CHECK(sync.compression().codec() == longhaul::v1::CODEC_FP32);
  sync.mutable_compression()->set_codec(longhaul::v1::CODEC_INT8_BLOCK);
  longhaul::proto::FillJobDefaults(&sync);
  CHECK(sync.compression().codec() == longhaul::v1::CODEC_INT8_BLOCK);

  // A spec that skipped admission (a codec left unset) is refused, not defaulted.
  a.mutable_spec()->mutable_compression()->set_codec(longhaul::v1::CODEC_UNSPECIFIED);
  auto unset = lw::AdmitJob(a, "eu", 4);
  REQUIRE_FALSE(unset.ok());
  CHECK_THAT(unset.status().message(), Catch::Contains("compression.codec is unset"));
}
