// End to end with the real processes: longhaul-orchestrator, three
// longhaul-agent daemons and their longhaul-worker processes on loopback.
#include <catch2/catch.hpp>

#include <fstream>

#include "harness.h"
#include "longhaul/orchestrator/state_store.h"

using namespace longhaul;
using namespace longhaul::testing;
using namespace std::chrono_literals;

namespace {

const std::string kBin = LONGHAUL_BIN_DIR;
const std::vector<std::string> kRegions = {"eu-west", "us-east", "ap-south"};

struct RealCluster {
  fs::path dir;
  Process orchestrator;
  orchestrator::EndpointInfo ep;
  std::map<std::string, std::unique_ptr<Process>> agents;

  explicit RealCluster(const std::string& tag) : dir(MakeTempDir(tag)) {
    std::vector<std::string> names = kRegions;
    names.push_back("orchestrator");
    names.push_back("cli");
    MakeKeys(dir / "keys", names, {"eu-west", "us-east", "ap-south", "cli"});
  }
  ~RealCluster() {
    for (auto& [_, a] : agents) a->KillGroup(SIGKILL);
    orchestrator.KillGroup(SIGKILL);
    if (!std::getenv("LONGHAUL_KEEP_TEST_DIRS")) fs::remove_all(dir);
  }
  void StartOrchestrator(const std::string& bind = "tcp://127.0.0.1:0") {
    fs::remove(dir / "endpoint");
    orchestrator.Start({kBin + "/longhaul-orchestrator", "--bind", bind, "--state", (dir / "state.sqlite").string(),
                        "--key", (dir / "keys/orchestrator.key").string(), "--allowlist", (dir / "keys/allow").string(),
                        "--endpoint-file", (dir / "endpoint").string(), "--checkpoint-dir",
                        (dir / "checkpoints").string(), "--heartbeat-ms", "200", "--heartbeat-misses", "5",
                        "--round-timeout-s", "60"},
                       dir / "orchestrator.log");
    auto info = orchestrator::WaitForEndpointFile(dir / "endpoint", 15s);
    REQUIRE(info.ok());
    ep = *info;
  }
  void StartAgent(const std::string& region) {
    auto p = std::make_unique<Process>();
    p->Start({kBin + "/longhaul-agent", "--region", region, "--orchestrator", ep.control, "--orchestrator-public-key",
              (dir / "keys/orchestrator.pub").string(), "--key", (dir / "keys" / (region + ".key")).string(),
              "--workers", "1", "--data-host", "127.0.0.1", "--work-dir", (dir / region).string(), "--metrics",
              "127.0.0.1:0", "--allowlist", (dir / "keys/allow").string(), "--bin-dir", kBin,
              "--collective-timeout-s", "15"},  // survivors of a killed peer give up in seconds
             dir / (region + ".log"));
    agents[region] = std::move(p);
  }
  std::unique_ptr<orchestrator::ControlClient> Client() const {
    orchestrator::ControlClientOptions co;
    co.endpoint = ep.control;
    co.own_keys = wan_transport::LoadKeyPair(dir / "keys/cli.key").value();
    co.server_public_key = ep.public_key;
    return std::move(orchestrator::ControlClient::Connect(co).value());
  }
  std::string Submit(uint32_t rounds, uint32_t inner_steps) const {
    v1::ControlMessage req;
    auto* s = req.mutable_submit_job()->mutable_spec();
    s->set_name("e2e");
    s->set_model_preset("tiny");
    s->set_seed(1);
    s->mutable_data()->mutable_synthetic()->set_seed(1234);
    s->mutable_data()->mutable_synthetic()->set_branching(4);
    s->mutable_data()->mutable_synthetic()->set_order(2);
    for (const auto& r : kRegions) s->add_regions(r);
    s->set_region_count(3);
    s->set_min_regions(2);
    s->set_workers_per_region(1);
    s->set_rounds(rounds);
    auto* in = s->mutable_inner();
    in->set_name("adamw");
    in->set_lr(3e-3);
    in->set_beta1(0.9);
    in->set_beta2(0.95);
    in->set_batch_size(8);
    s->mutable_outer()->set_name("nesterov");
    s->mutable_outer()->set_lr(0.7);
    s->mutable_outer()->set_momentum(0.9);
    s->mutable_sync()->set_kind("diloco");
    s->mutable_sync()->set_inner_steps(inner_steps);
    s->mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
    s->mutable_compression()->set_block_size(256);
    auto reply = Client()->Call(req);
    REQUIRE(reply.ok());
    return reply->submit_job_reply().job_id();
  }
  template <typename Pred>
  v1::JobStatus WaitFor(const std::string& job, Pred pred, std::chrono::seconds limit) const {
    auto client = Client();
    const auto deadline = std::chrono::steady_clock::now() + limit;
    v1::JobStatus s;
    while (std::chrono::steady_clock::now() < deadline) {
      v1::ControlMessage req;
      req.mutable_job_status_request()->set_job_id(job);
      auto reply = client->Call(req);
      if (reply.ok()) {
        s = reply->job_status();
        if (pred(s)) return s;
      }
      std::this_thread::sleep_for(100ms);
    }
    return s;
  }
  std::vector<orchestrator::CommittedRound> Rounds(const std::string& job) const {
    auto store = orchestrator::StateStore::Open(dir / "state.sqlite");
    REQUIRE(store.ok());
    return (*store)->LoadRounds(job).value();
  }
};

bool Done(const v1::JobStatus& s) { return orchestrator::IsTerminalJobState(s.state()); }

}  // namespace

TEST_CASE("e2e: a 3-region DiLoCo job on real agents and workers finishes", "[e2e]") {
  RealCluster c("e2e-finish");
  c.StartOrchestrator();
  for (const auto& r : kRegions) c.StartAgent(r);
  const std::string job = c.Submit(3, 5);
  auto st = c.WaitFor(job, Done, 180s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  CHECK(st.round() == 3);
  CHECK(st.val_loss() > 0);
  CHECK(st.wan_bytes() > 0);
  CHECK_FALSE(st.param_hash().empty());
  CHECK(st.loss_floor() > 0);  // from the agents' JobFacts
  CHECK(st.val_loss() > st.loss_floor());
  auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 3);
  for (const auto& r : rounds) CHECK(r.participants.size() == 3);
  // Workers' passive WAN measurements reached the scheduler's link matrix (the
  // tiny model's messages are small: they measure RTT; bandwidth needs >= 256 KiB).
  const std::string metrics = HttpGet(c.ep.metrics);
  size_t measured_links = 0;
  for (size_t at = metrics.find("\nlonghaul_link_rtt_seconds{"); at != std::string::npos;
       at = metrics.find("\nlonghaul_link_rtt_seconds{", at + 1))
    ++measured_links;
  CHECK(measured_links >= 3);  // every edge of the 3-region ring
}

TEST_CASE("e2e: an agent killed mid-round, the job continues with two and replicas stay identical", "[e2e]") {
  RealCluster c("e2e-kill");
  c.StartOrchestrator();
  for (const auto& r : kRegions) c.StartAgent(r);
  const std::string job = c.Submit(8, 150);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 2 || Done(s); }, 180s);
  REQUIRE(st.round() >= 2);
  c.agents["ap-south"]->KillGroup(SIGKILL);  // the agent and its workers
  st = c.WaitFor(job, Done, 240s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 8);
  // Rounds after the kill ran on the two survivors, who agreed on every hash
  // (a commit requires it), i.e. their replicas stayed bitwise identical.
  CHECK(rounds.back().participants == std::vector<std::string>{"eu-west", "us-east"});
  auto store = orchestrator::StateStore::Open(c.dir / "state.sqlite");
  auto events = (*store)->LoadEvents(job, 200).value();
  bool retried = false;
  for (const auto& e : events) retried = retried || e.kind == "round_aborted";
  CHECK(retried);
}

TEST_CASE("e2e: the orchestrator is SIGKILLed and restarted mid-job, the job resumes", "[e2e]") {
  RealCluster c("e2e-restart");
  c.StartOrchestrator();
  const std::string port = c.ep.control.substr(c.ep.control.rfind(':') + 1);
  for (const auto& r : kRegions) c.StartAgent(r);
  const std::string job = c.Submit(8, 150);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 2 || Done(s); }, 180s);
  REQUIRE(st.round() >= 2);
  c.orchestrator.Kill(SIGKILL);
  c.StartOrchestrator("tcp://127.0.0.1:" + port);
  st = c.WaitFor(job, Done, 240s);
  INFO("reason: " << st.reason() << " (logs in " << c.dir << ")");
  REQUIRE(st.state() == "succeeded");
  auto rounds = c.Rounds(job);
  REQUIRE(rounds.size() == 8);
  for (uint32_t i = 0; i < 8; ++i) CHECK(rounds[i].round == i + 1);
}

TEST_CASE("e2e: longhaul demo runs both policies, prints the table and leaves nothing behind", "[e2e]") {
  auto demo_dirs = [] {
    int n = 0;
    for (const auto& e : fs::directory_iterator("/tmp"))
      n += e.path().filename().string().rfind("longhaul-demo-", 0) == 0 ? 1 : 0;
    return n;
  };
  const int before = demo_dirs();
  std::string out;
  const int code = RunCommand(kBin + "/longhaul demo --no-wan-emulation --rounds 2 --inner-steps 5", &out);
  INFO(out);
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("DiLoCo H=5 int8") && Catch::Contains("fully synchronous (fp32)") &&
                      Catch::Contains("succeeded") && Catch::Contains("fewer WAN bytes"));
  CHECK(demo_dirs() <= before);
}
