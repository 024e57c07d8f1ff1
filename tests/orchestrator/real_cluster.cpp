#include "real_cluster.h"

#include <unistd.h>

#include <algorithm>

namespace longhaul::testing {

namespace {
const std::string kBin = LONGHAUL_BIN_DIR;
}

RealCluster::RealCluster(const std::string& tag, RealClusterOptions o)
    : tmp(tag), dir(tmp.path()), options(std::move(o)) {
  std::vector<std::string> names = kClusterRegions;
  names.push_back("orchestrator");
  // "cli" is an admin; user-a and user-b are two users.
  for (const std::string extra : {"cli", "user-a", "user-b"}) names.push_back(extra);
  std::vector<std::string> allowed = kClusterRegions;
  for (const std::string extra : {"cli", "user-a", "user-b"}) allowed.push_back(extra);
  MakeKeys(dir / "keys", names, allowed);
  if (options.netns) {
    std::vector<orchestrator::LocalRegion> regions;
    for (const auto& r : kClusterRegions) regions.push_back({r, 0, 0, 0});
    auto nets = orchestrator::RegionNetworks::Create(regions);
    REQUIRE(nets.ok());
    networks = std::move(*nets);
  }
}

RealCluster::~RealCluster() {
  for (auto& [_, a] : agents) a.Kill();  // each agent with its workers and links
  orchestrator.Kill();
}

void RealCluster::StartOrchestrator(const std::string& bind) {
  fs::remove(dir / "endpoint");
  const std::string host = networks ? networks->host_address() : "127.0.0.1";
  std::vector<std::string> argv = {
      kBin + "/longhaul-orchestrator", "--bind", bind.empty() ? "tcp://" + host + ":0" : bind, "--init", "--state", (dir / "state.sqlite").string(), "--key",
      (dir / "keys/orchestrator.key").string(), "--allowlist", (dir / "keys/allow").string(), "--endpoint-file",
      (dir / "endpoint").string(), "--checkpoint-dir", (dir / "checkpoints").string(), "--heartbeat-ms", "200",
      "--heartbeat-misses", "5", "--round-timeout-s", std::to_string(options.round_timeout_s),
      "--collective-timeout-s", "15"};  // survivors of a killed peer give up in seconds
  const Status started = orchestrator.Start(argv, {.log_path = (dir / "orchestrator.log").string()});
  REQUIRE(started.ok());
  auto info = orchestrator::WaitForEndpointFile(dir / "endpoint", std::chrono::seconds(15));
  REQUIRE(info.ok());
  ep = *info;
}

void RealCluster::StartAgent(const std::string& region) {
  // With netns: the region's namespace and address (its own loopback, unseen by the others).
  const size_t index = std::find(kClusterRegions.begin(), kClusterRegions.end(), region) - kClusterRegions.begin();
  const std::string host = networks ? networks->address(index) : "127.0.0.1";
  std::vector<std::string> argv = {
      kBin + "/longhaul-agent", "--region", region, "--orchestrator", ep.control, "--orchestrator-public-key",
      (dir / "keys/orchestrator.pub").string(), "--key", (dir / "keys" / (region + ".key")).string(), "--workers", std::to_string(options.workers),
      "--data-host", host, "--work-dir", (dir / region).string(), "--metrics", host + ":0", "--bin-dir", kBin};
  argv.insert(argv.end(), options.agent_flags.begin(), options.agent_flags.end());
  // Only the ones this build has (an agent refuses to start on a missing one).
  for (const auto& c : options.allow_commands)
    if (::access(c.c_str(), X_OK) == 0) argv.insert(argv.end(), {"--allow-command", c});
  for (const auto& d : options.allow_working_dirs)  // only the ones there (a copy of the binaries elsewhere has none)
    if (fs::is_directory(d)) argv.insert(argv.end(), {"--allow-working-dir", d});
  if (!options.gpus) argv.insert(argv.begin(), {"/usr/bin/env", "CUDA_VISIBLE_DEVICES="});
  if (networks) argv = networks->Inside(index, argv);
  // Appended: a restarted agent keeps the log of the one before it.
  REQUIRE(agents[region].Start(argv, {.log_path = (dir / (region + ".log")).string()}).ok());
}

std::unique_ptr<orchestrator::ControlClient> RealCluster::Client(const std::string& key) const {
  orchestrator::ControlClientOptions co;
  co.endpoint = ep.control;
  co.own_keys = wan_transport::LoadKeyPair(dir / "keys" / (key + ".key")).value();
  co.server_public_key = ep.public_key;
  return std::move(orchestrator::ControlClient::Connect(co).value());
}

v1::JobSpec RealCluster::Spec(uint32_t rounds, uint32_t inner_steps) const {
  v1::JobSpec s;
  s.set_name("e2e");
  s.set_model_preset("tiny");
  s.set_seed(1);
  s.mutable_data()->mutable_synthetic()->set_seed(1234);
  s.mutable_data()->mutable_synthetic()->set_branching(4);
  s.mutable_data()->mutable_synthetic()->set_order(2);
  for (const auto& r : kClusterRegions) s.add_regions(r);
  s.set_region_count(3);
  s.set_min_regions(2);
  s.set_workers_per_region(1);
  s.set_rounds(rounds);
  auto* in = s.mutable_inner();
  in->set_name("adamw");
  in->set_lr(3e-3);
  in->set_beta1(0.9);
  in->set_beta2(0.95);
  in->set_batch_size(8);
  s.mutable_outer()->set_name("nesterov");
  s.mutable_outer()->set_lr(0.7);
  s.mutable_outer()->set_momentum(0.9);
  s.mutable_sync()->set_kind("diloco");
  s.mutable_sync()->set_inner_steps(inner_steps);
  s.mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
  s.mutable_compression()->set_block_size(256);
  return s;
}

std::string RealCluster::Submit(const v1::JobSpec& spec, const std::string& key) const {
  v1::ControlMessage req;
  *req.mutable_submit_job()->mutable_spec() = spec;
  auto reply = Client(key)->Call(req);
  REQUIRE(reply.ok());
  return reply->submit_job_reply().job_id();
}

std::vector<orchestrator::CommittedRound> RealCluster::Rounds(const std::string& job) const {
  auto store = orchestrator::StateStore::Open(dir / "state.sqlite");
  REQUIRE(store.ok());
  return (*store)->LoadRounds(job).value();
}

std::vector<orchestrator::EventRecord> RealCluster::Events(const std::string& job) const {
  auto store = orchestrator::StateStore::Open(dir / "state.sqlite");
  REQUIRE(store.ok());
  return (*store)->LoadEvents(job, 1000).value();
}

std::string RealCluster::WaitForText(const std::string& job, const std::string& needle) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    text.clear();
    for (const auto& e : Events(job)) text.append(e.kind).append(": ").append(e.message).append("\n");
    const v1::JobStatus st = WaitFor(job, [](const v1::JobStatus&) { return true; }, std::chrono::seconds(1));
    text += st.reason() + "\n" + st.worker_output();  // the cluster's admin key sees the output
    if (text.find(needle) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return text;
}

v1::JobStatus RealCluster::Cancel(const std::string& job) const {
  v1::ControlMessage req;
  req.mutable_cancel_job()->set_job_id(job);
  auto reply = Client()->Call(req);
  INFO("cancel " << job << ": " << (reply.ok() ? std::string("sent") : reply.status().ToString()));
  CHECK(reply.ok());
  return WaitFor(job, JobDone, std::chrono::seconds(60));
}

Rejoin FindRejoin(const std::vector<orchestrator::CommittedRound>& rounds, const std::string& region,
                  uint32_t after_round) {
  auto has = [&](const orchestrator::CommittedRound& r) {
    return std::find(r.participants.begin(), r.participants.end(), region) != r.participants.end();
  };
  Rejoin out;
  for (const auto& r : rounds) {
    if (r.round <= after_round) continue;
    if (!out.without && !has(r)) out.without = &r;
    if (out.without && has(r)) {
      out.back = &r;
      break;
    }
  }
  return out;
}

std::vector<orchestrator::CommittedRound> WaitForRejoin(const RealCluster& c, const std::string& job,
                                                        const std::string& region, uint32_t after_round,
                                                        std::chrono::seconds limit) {
  return c.WaitForRounds(
      job, [&](const auto& rounds) { return static_cast<bool>(FindRejoin(rounds, region, after_round)); }, limit);
}

}  // namespace longhaul::testing
