// Admission checks an agent runs on a JobAssignment before launching workers.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "longhaul/region_agent/job_config.h"
#include "longhaul/region_agent/region_report.h"
#include "longhaul/region_agent/shard_layout.h"

namespace lr = longhaul::region_agent;
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
  return a;
}
}  // namespace

TEST_CASE("region_agent: A well-formed assignment is admitted with defaults filled in", "[job_config]") {
  auto job = lr::AdmitJob(Good(), "eu", 4);
  REQUIRE(job.ok());
  CHECK(job->workers == 2);
  CHECK(job->schedule.inner_steps == 5);
  CHECK(job->outer.name == "nesterov");
  CHECK(job->compression.codec == longhaul::sync_policies::Codec::kFp32);
}

TEST_CASE("region_agent: Bad assignments are refused with a message naming the problem", "[job_config]") {
  auto a = Good();
  a.mutable_spec()->set_model_preset("gigantic");
  auto r = lr::AdmitJob(a, "eu", 4);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("gigantic") != std::string::npos);

  r = lr::AdmitJob(Good(), "eu", 1);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kResourceExhausted);

  a = Good();
  a.mutable_spec()->mutable_data()->mutable_text_file()->set_path("/nonexistent/corpus.txt");
  r = lr::AdmitJob(a, "eu", 4);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK(r.status().message().find("/nonexistent/corpus.txt") != std::string::npos);

  CHECK(!lr::AdmitJob(Good(), "us", 4).ok());          // meant for another region
  a = Good();
  a.set_job_id("../../etc");
  CHECK(!lr::AdmitJob(a, "eu", 4).ok());               // unsafe job id
  a = Good();
  a.clear_spec();
  CHECK(!lr::AdmitJob(a, "eu", 4).ok());               // malformed: no spec
  a = Good();
  a.mutable_spec()->mutable_sync()->set_kind("gossip");
  CHECK(!lr::AdmitJob(a, "eu", 4).ok());               // unknown sync kind
  a = Good();
  a.mutable_spec()->mutable_outer()->set_name("lion");
  a.mutable_spec()->mutable_outer()->set_lr(0.5);
  CHECK(!lr::AdmitJob(a, "eu", 4).ok());               // unknown outer optimizer
}

TEST_CASE("region_agent: Custom worker dimensions override the preset and reach JobConfig.model", "[job_config]") {
  auto a = Good();
  a.mutable_spec()->clear_model_preset();
  auto* b = a.mutable_spec()->mutable_worker()->mutable_builtin();
  b->set_preset("small");
  b->set_embed(32);
  b->set_layers(2);
  auto job = lr::AdmitJob(a, "eu", 4);
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
  job = lr::AdmitJob(a, "eu", 4);
  REQUIRE(job.ok());
  CHECK(job->model.embed_dim == 16);
  CHECK(job->model.hidden_dim == 128);

  a = Good();
  a.mutable_spec()->mutable_worker()->mutable_builtin()->set_preset("tiny");
  job = lr::AdmitJob(a, "eu", 4);
  REQUIRE(job.ok());
  CHECK(job->model.preset == "tiny");  // no override: still the preset

  a = Good();
  a.mutable_spec()->mutable_worker()->mutable_builtin()->set_layers(65);
  auto bad = lr::AdmitJob(a, "eu", 4);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("spec.worker.layers") != std::string::npos);

  a = Good();
  a.mutable_spec()->mutable_worker()->mutable_builtin()->set_preset("small");  // model_preset says tiny
  bad = lr::AdmitJob(a, "eu", 4);
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
  auto job = lr::AdmitJob(a, "eu", 4);
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
  auto missing = lr::AdmitJob(a, "eu", 4);
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  a.mutable_spec()->mutable_data()->mutable_synthetic()->set_branching(3);
  job = lr::AdmitJob(a, "eu", 4);
  REQUIRE(job.ok());
  CHECK(job->has_data);
  CHECK(job->data.branching == 3);
}

TEST_CASE("region_agent: A built-in job without data is refused", "[job_config]") {
  auto a = Good();
  a.mutable_spec()->clear_data();
  auto r = lr::AdmitJob(a, "eu", 4);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("spec.data") != std::string::npos);
}

TEST_CASE("region_agent: A command worker with an empty argv or a reserved variable is refused", "[job_config]") {
  auto a = Good();
  a.mutable_spec()->mutable_worker()->mutable_command();
  auto r = lr::AdmitJob(a, "eu", 4);
  REQUIRE(!r.ok());
  CHECK(r.status().message().find("spec.worker.command") != std::string::npos);

  for (const char* reserved : {"RANK", "MASTER_ADDR", "LONGHAUL_REGION"}) {
    a = Good();
    auto* c = a.mutable_spec()->mutable_worker()->mutable_command();
    c->add_argv("python3");
    c->mutable_env()->insert({reserved, "x"});
    r = lr::AdmitJob(a, "eu", 4);
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(std::string("spec.worker.env.") + reserved) != std::string::npos);
  }
}

TEST_CASE("region_agent: Shard pieces partition every fragment", "[shard_layout]") {
  for (int workers : {1, 3, 4}) {
    size_t covered = 0;
    for (uint32_t f = 0; f < 3; ++f) {
      size_t expect = lr::ShardLayout(1001, 3, workers, 0).PieceOf(f, 0).fragment_begin;
      for (int r = 0; r < workers; ++r) {
        auto p = lr::ShardLayout(1001, 3, workers, r).Piece(f);
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
