// The real longhaul-orchestrator binary with CURVE, driven by fake agents
// (threads) and the real `longhaul` CLI binary.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "harness.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/state_store.h"

using namespace longhaul;
using namespace longhaul::testing;
using namespace std::chrono_literals;

namespace {

const std::string kBin = LONGHAUL_BIN_DIR;
const std::vector<std::string> kRegions = {"eu-west", "us-east", "ap-south"};

struct Cluster {
  fs::path dir;
  Process orchestrator;
  orchestrator::EndpointInfo ep;
  std::vector<std::unique_ptr<FakeAgent>> agents;

  explicit Cluster(const std::string& tag) : dir(MakeTempDir(tag)) {
    std::vector<std::string> names = kRegions;
    names.push_back("orchestrator");
    names.push_back("cli");
    names.push_back("intruder");
    MakeKeys(dir / "keys", names, {"eu-west", "us-east", "ap-south", "cli"});
  }
  ~Cluster() {
    agents.clear();
    orchestrator.Kill(SIGKILL);
    fs::remove_all(dir);
  }
  void StartOrchestrator(const std::string& bind = "tcp://127.0.0.1:0") {
    fs::remove(dir / "endpoint");
    orchestrator.Start({kBin + "/longhaul-orchestrator", "--bind", bind, "--init", "--state", (dir / "state.sqlite").string(),
                        "--key", (dir / "keys/orchestrator.key").string(), "--allowlist",
                        (dir / "keys/allow").string(), "--endpoint-file", (dir / "endpoint").string(),
                        "--heartbeat-ms", "100", "--heartbeat-misses", "5", "--round-timeout-s", "10"},
                       dir / "orchestrator.log");
    auto info = orchestrator::WaitForEndpointFile(dir / "endpoint", 10s);
    REQUIRE(info.ok());
    ep = *info;
  }
  void StartAgents(std::chrono::milliseconds round_time) {
    for (const auto& r : kRegions)
      agents.push_back(std::make_unique<FakeAgent>(
          FakeAgentOptions{r, ep.control, dir / "keys" / (r + ".key"), ep.public_key, round_time, 100ms}));
  }
  orchestrator::CliContext Cli(std::ostringstream* out, std::ostringstream* err, const std::string& key = "cli") const {
    orchestrator::CliContext c;
    c.orchestrator = ep.control;
    c.key_file = (dir / "keys" / (key + ".key")).string();
    c.server_key_file = (dir / "keys/orchestrator.pub").string();
    c.json = true;
    c.timeout = 3s;
    c.out = out;
    c.err = err;
    return c;
  }
  std::string CliFlags(const std::string& key = "cli") const {
    return " --orchestrator " + ep.control + " --key " + (dir / "keys" / (key + ".key")).string() + " --server-key " +
           (dir / "keys/orchestrator.pub").string() + " --timeout-s 3";
  }
  fs::path WriteJob(uint32_t rounds) const {
    const fs::path f = dir / "job.yaml";
    std::ofstream(f) << "name: itest\nmodel_preset: tiny\nrounds: " << rounds
                     << "\nregions: [eu-west, us-east, ap-south]\nmin_regions: 2\nsync: {kind: diloco, inner_steps: 5}\n";
    return f;
  }
  v1::JobStatus Status(const std::string& job) const {
    orchestrator::ControlClientOptions co;
    co.endpoint = ep.control;
    co.own_keys = wan_transport::LoadKeyPair(dir / "keys/cli.key").value();
    co.server_public_key = ep.public_key;
    auto client = orchestrator::ControlClient::Connect(co).value();
    v1::ControlMessage req;
    req.mutable_job_status_request()->set_job_id(job);
    auto reply = client->Call(req);
    return reply.ok() ? reply->job_status() : v1::JobStatus();
  }
  // Polls (bounded) until pred(status) holds.
  template <typename Pred>
  v1::JobStatus WaitFor(const std::string& job, Pred pred, std::chrono::seconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    v1::JobStatus s;
    while (std::chrono::steady_clock::now() < deadline) {
      s = Status(job);
      if (pred(s)) return s;
      std::this_thread::sleep_for(50ms);
    }
    return s;
  }
  std::string Submit(uint32_t rounds) const {
    std::ostringstream out, err;
    REQUIRE(orchestrator::CliSubmit(Cli(&out, &err), WriteJob(rounds).string(), false) == 0);
    const std::string s = out.str();
    const auto pos = s.find("job-");
    REQUIRE(pos != std::string::npos);
    return s.substr(pos, 10);
  }
};

}  // namespace

TEST_CASE("a 3-region job runs to completion through the real orchestrator, CLI and /metrics show it",
          "[control_plane]") {
  Cluster c("cp-finish");
  c.StartOrchestrator();
  c.StartAgents(30ms);
  const std::string job = c.Submit(5);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.state() == "succeeded"; }, 30s);
  REQUIRE(st.state() == "succeeded");
  CHECK(st.round() == 5);
  CHECK(st.regions_size() == 3);
  CHECK(st.wan_bytes() == 5 * 3 * 10000);
  for (auto& a : c.agents) CHECK(a->committed() == std::vector<uint32_t>{1, 2, 3, 4, 5});

  std::string out;
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags() + " --output json status " + job, &out) == 0);
  CHECK_THAT(out, Catch::Contains("\"state\":\"succeeded\""));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags() + " status " + job, &out) == 0);
  CHECK_THAT(out, Catch::Contains("round 5/5") && Catch::Contains("eu-west"));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags() + " regions", &out) == 0);
  CHECK_THAT(out, Catch::Contains("ap-south") && Catch::Contains("up"));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags() + " --output json jobs", &out) == 0);
  CHECK_THAT(out, Catch::Contains(job));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags() + " --output json status " + job + " --watch --interval-s 0.1",
                   &out) == 0);  // --watch returns once the job has ended, 0 when it succeeded
  CHECK_THAT(out, Catch::Contains("\"round\":5"));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags() + " status job-424242", &out) == 1);
  CHECK_THAT(out, Catch::Contains("unknown job 'job-424242'"));

  const std::string metrics = HttpGet(c.ep.metrics);
  CHECK_THAT(metrics, Catch::Contains("longhaul_rounds_committed_total{job=\"" + job + "\"} 5"));
  CHECK_THAT(metrics, Catch::Contains("longhaul_jobs{state=\"succeeded\"} 1"));
  CHECK_THAT(metrics, Catch::Contains("longhaul_regions{state=\"up\"} 3"));
  CHECK_THAT(metrics, Catch::Contains("longhaul_wan_bytes_total{codec=\"int8\",job=\"" + job + "\"}"));
}

TEST_CASE("a silent region is dropped mid-job and the job finishes with the survivors", "[control_plane]") {
  Cluster c("cp-silent");
  c.StartOrchestrator();
  c.StartAgents(100ms);
  const std::string job = c.Submit(8);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 2; }, 30s);
  REQUIRE(st.round() >= 2);
  c.agents[2]->Silence();
  st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.state() == "succeeded"; }, 40s);
  REQUIRE(st.state() == "succeeded");
  CHECK(st.round() == 8);
  // Each surviving replica saw every round committed exactly once.
  for (int i = 0; i < 2; ++i) CHECK(c.agents[i]->committed() == std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7, 8});
  auto store = orchestrator::StateStore::Open(c.dir / "state.sqlite");
  REQUIRE(store.ok());
  auto rounds = (*store)->LoadRounds(job).value();
  REQUIRE(rounds.size() == 8);
  CHECK(rounds.back().participants.size() == 2);
  auto events = (*store)->LoadEvents(job, 100).value();
  bool aborted = false;
  for (const auto& e : events) aborted = aborted || (e.kind == "round_aborted" && e.message.find("ap-south") != std::string::npos);
  CHECK(aborted);
}

TEST_CASE("an orchestrator killed with SIGKILL and restarted resumes the job at its last committed round",
          "[control_plane]") {
  Cluster c("cp-restart");
  c.StartOrchestrator();
  const std::string port = c.ep.control.substr(c.ep.control.rfind(':') + 1);
  c.StartAgents(150ms);
  const std::string job = c.Submit(8);
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.round() >= 3; }, 30s);
  REQUIRE(st.round() >= 3);
  c.orchestrator.Kill(SIGKILL);
  c.StartOrchestrator("tcp://127.0.0.1:" + port);  // same state file, same port: agents reconnect
  st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.state() == "succeeded"; }, 40s);
  REQUIRE(st.state() == "succeeded");
  CHECK(st.round() == 8);
  auto store = orchestrator::StateStore::Open(c.dir / "state.sqlite");
  REQUIRE(store.ok());
  auto rounds = (*store)->LoadRounds(job).value();
  REQUIRE(rounds.size() == 8);
  for (uint32_t i = 0; i < 8; ++i) CHECK(rounds[i].round == i + 1);
  // No replica ever saw a round committed twice.
  for (auto& a : c.agents) {
    auto seen = a->committed();
    CHECK(std::adjacent_find(seen.begin(), seen.end(), std::greater_equal<uint32_t>()) == seen.end());
  }
}

TEST_CASE("a wrong-key agent and a wrong-key CLI are refused", "[control_plane]") {
  Cluster c("cp-keys");
  c.StartOrchestrator();
  FakeAgent intruder({"mallory", c.ep.control, c.dir / "keys/intruder.key", c.ep.public_key, 50ms, 100ms});
  std::ostringstream out, err;
  const int code = orchestrator::CliRegions(c.Cli(&out, &err, "intruder"));
  CHECK(code == orchestrator::kExitUnreachable);
  CHECK_THAT(err.str(), Catch::Contains("refused our key"));
  std::ostringstream out2, err2;
  REQUIRE(orchestrator::CliRegions(c.Cli(&out2, &err2)) == 0);
  CHECK_THAT(out2.str(), !Catch::Contains("mallory"));
  CHECK_FALSE(intruder.registered());
  std::string cli_out;
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags("intruder") + " jobs", &cli_out) == 3);
}

TEST_CASE("the CLI's exit codes: bad job file 2 (with its line), unreachable 3, usage 2", "[control_plane]") {
  const fs::path dir = MakeTempDir("cli-codes");
  std::ofstream(dir / "bad.yaml") << "name: x\nmodel_preset: tiny\nrounds: 3\nsync:\n  knd: diloco\n";
  std::string out;
  CHECK(RunCommand(kBin + "/longhaul --orchestrator tcp://127.0.0.1:1 --insecure submit " + (dir / "bad.yaml").string(),
                   &out) == 2);
  CHECK_THAT(out, Catch::Contains("line 5") && Catch::Contains("unknown field 'sync.knd'"));
  out.clear();
  const auto start = std::chrono::steady_clock::now();
  CHECK(RunCommand(kBin + "/longhaul --orchestrator tcp://127.0.0.1:1 --insecure --timeout-s 1 jobs", &out) == 3);
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK_THAT(out, Catch::Contains("did not answer"));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul jobs", &out) == 2);  // no orchestrator configured
  CHECK_THAT(out, Catch::Contains("--orchestrator"));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul --output json keys gen --dir " + (dir / "k").string() + " --name alice", &out) == 0);
  CHECK(fs::exists(dir / "k/alice.key"));
  CHECK(RunCommand(kBin + "/longhaul keys gen --dir " + (dir / "k").string() + " --name alice", &out) == 2);
  fs::remove_all(dir);
}
