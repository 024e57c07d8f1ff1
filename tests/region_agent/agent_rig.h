// What the agent process tests share: an agent started against a fake
// orchestrator, a tiny job's assignment, and the control messages a test
// sends (START, verdicts) or waits for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fake_orchestrator.h"
#include "longhaul/proto/frame.h"
#include "longhaul/proto/job_defaults.h"
#include "longhaul/session/checkpoint_path.h"
#include "support/subprocess.h"

namespace agent_rig {

namespace v1 = longhaul::v1;
using longhaul::testing::FakeOrchestrator;
using longhaul::testing::Subprocess;
using namespace std::chrono_literals;

inline Subprocess StartAgent(const std::string& region, const FakeOrchestrator& orch, int workers,
                            const std::filesystem::path& dir, const std::filesystem::path& keys = {},
                            const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {std::string(LONGHAUL_BIN_DIR) + "/longhaul-agent", "--region", region, "--orchestrator", orch.endpoint(), "--workers", std::to_string(workers),
            "--work-dir", (dir / region).string(), "--metrics", "127.0.0.1:0", "--collective-timeout-s", "20"};
  if (keys.empty()) {
    args.push_back("--insecure");
  } else {
    args.insert(args.end(), {"--key", (keys / (region + ".key")).string(), "--orchestrator-public-key",
                                 (keys / "orchestrator.pub").string()});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  auto agent = Subprocess::Spawn(args, {.log_path = (dir / (region + "-agent.log")).string()});
  REQUIRE(agent.ok());
  return std::move(*agent);
}

inline v1::JobAssignment TinyJob(const std::string& job, const std::string& region, uint32_t index, uint32_t regions,
                          uint32_t workers) {
  v1::JobAssignment a;
  a.set_job_id(job);
  a.set_region(region);
  a.set_region_index(index);
  a.set_start_round(1);
  auto* spec = a.mutable_spec();
  spec->set_name(job);
  spec->set_model_preset("tiny");
  spec->set_region_count(regions);
  spec->set_workers_per_region(workers);
  spec->set_rounds(4);
  spec->set_seed(5);
  spec->mutable_data()->mutable_synthetic()->set_seed(11);
  spec->mutable_inner()->set_batch_size(8);
  spec->mutable_sync()->set_kind("diloco");
  spec->mutable_sync()->set_inner_steps(3);
  spec->mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
  longhaul::proto::FillJobDefaults(spec);  // what the orchestrator does at admission
  return a;
}

inline std::string CheckpointPathFor(const std::filesystem::path& dir, const std::string& job, const std::string& region,
                              uint32_t round) {
  return longhaul::session::CheckpointPath(dir, job, region, round).string();
}

// The agent prints "metrics on http://HOST:PORT/metrics"; its log has it.
inline int MetricsPort(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::string line;
  const std::string marker = "metrics on http://127.0.0.1:";
  while (std::getline(in, line)) {
    if (line.rfind(marker, 0) == 0) return std::stoi(line.substr(marker.size()));
  }
  return 0;
}

inline v1::ControlMessage Wrap(const v1::JobAssignment& a) {
  v1::ControlMessage m;
  *m.mutable_job_assignment() = a;
  return m;
}

inline std::function<bool(const FakeOrchestrator::Incoming&)> Body(v1::ControlMessage::BodyCase body, const std::string& region = "") {
  return [=](const FakeOrchestrator::Incoming& in) {
    return in.msg.body_case() == body && (region.empty() || in.region == region);
  };
}

inline v1::ControlMessage Start(const std::string& job, uint32_t round, uint64_t epoch, const std::vector<v1::PeerEndpoint>& ring) {
  v1::ControlMessage m;
  auto* c = m.mutable_round_command();
  c->set_job_id(job);
  c->set_kind(v1::RoundCommand::START);
  c->set_round(round);
  c->set_epoch(epoch);
  for (const auto& p : ring) *c->add_participants() = p;
  return m;
}

inline v1::ControlMessage Verdict(const std::string& job, uint32_t round, uint64_t epoch, bool committed) {
  v1::ControlMessage m;
  auto* v = m.mutable_round_verdict();
  v->set_job_id(job);
  v->set_round(round);
  v->set_epoch(epoch);
  v->set_committed(committed);
  return m;
}

}  // namespace agent_rig
