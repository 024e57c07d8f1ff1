// The real longhaul-orchestrator binary with CURVE, driven by fake agents
// (threads) and the real `longhaul` CLI binary.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/state_file_guard.h"
#include "longhaul/orchestrator/state_store.h"

using namespace longhaul;
using namespace longhaul::testing;
using namespace std::chrono_literals;

namespace {

const std::string kBin = LONGHAUL_BIN_DIR;
const std::vector<std::string> kRegions = {"eu-west", "us-east", "ap-south"};

struct Cluster {
  TempDir tmp;  // removed after the orchestrator below is gone
  fs::path dir;
  Subprocess orchestrator;
  orchestrator::EndpointInfo ep;
  std::vector<std::unique_ptr<FakeAgent>> agents;

  explicit Cluster(const std::string& tag) : tmp(tag), dir(tmp.path()) {
    std::vector<std::string> names = kRegions;
    names.push_back("orchestrator");
    names.push_back("cli");
    names.push_back("intruder");
    MakeKeys(dir / "keys", names, {"eu-west", "us-east", "ap-south", "cli"});
  }
  ~Cluster() { agents.clear(); }
  void StartOrchestrator(const std::string& bind = "tcp://127.0.0.1:0", const std::vector<std::string>& extra = {}) {
    fs::remove(dir / "endpoint");
    std::vector<std::string> argv = {kBin + "/longhaul-orchestrator", "--bind", bind, "--init", "--state",
                                     (dir / "state.sqlite").string(), "--key", (dir / "keys/orchestrator.key").string(),
                                     "--allowlist", (dir / "keys/allow").string(), "--endpoint-file",
                                     (dir / "endpoint").string(), "--heartbeat-ms", "100", "--heartbeat-misses", "5",
                                     "--round-timeout-s", "10"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const longhaul::Status started = orchestrator.Start(argv, {.log_path = (dir / "orchestrator.log").string()});
    REQUIRE(started.ok());
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

TEST_CASE("plan JOB.yaml predicts on the links the orchestrator measured for the job's regions", "[control_plane][cli]") {
  Cluster c("cp-plan");
  c.StartOrchestrator();
  c.StartAgents(30ms);
  const fs::path job = c.WriteJob(5);
  const orchestrator::PlanRequest request{.params = 1e9, .step_seconds = 0.1};
  // Regions up, links not measured yet: the plan says so instead of guessing.
  std::ostringstream out, err;
  int rc = orchestrator::CliPlanJob(c.Cli(&out, &err), job.string(), request);
  CHECK(rc == orchestrator::kExitFailed);
  CHECK_THAT(out.str(), Catch::Contains("no link measurements between eu-west, us-east, ap-south"));

  // Every pair measured (bytes/s, s); every 3-region ring crosses the 50 Mbit/s pair.
  const std::map<std::pair<std::string, std::string>, std::pair<double, double>> pairs = {
      {{"eu-west", "us-east"}, {12.5e6, 0.04}}, {{"us-east", "ap-south"}, {6.25e6, 0.08}},
      {{"eu-west", "ap-south"}, {25e6, 0.06}}};
  for (auto& agent : c.agents) {
    std::vector<v1::LinkSample> links;
    for (const auto& [ends, m] : pairs) {
      const std::string& me = agent->region();
      if (me != ends.first && me != ends.second) continue;
      v1::LinkSample l;
      l.set_peer(me == ends.first ? ends.second : ends.first);
      l.set_bytes_per_second(m.first);
      l.set_rtt_seconds(m.second);
      links.push_back(l);
    }
    agent->ReportLinks(links);
  }
  const auto measured = std::chrono::steady_clock::now() + 10s;
  for (;;) {  // until the reports have arrived
    out.str("");
    rc = orchestrator::CliPlanJob(c.Cli(&out, &err), job.string(), request);
    if (rc == 0 || std::chrono::steady_clock::now() > measured) break;
    std::this_thread::sleep_for(50ms);
  }
  INFO(out.str() << err.str());
  REQUIRE(rc == 0);
  CHECK_THAT(out.str(), Catch::Contains("\"regions\":3,\"bandwidth_gbit\":0.05,\"rtt_ms\":80,\"ring\":["));
  CHECK_THAT(out.str(), Catch::Contains("\"job\":{\"name\":\"\\\"itest\\\": diloco H=5 int8\""));
  CHECK_THAT(out.str(), Catch::Contains("\"chosen\":"));
  // The regions listing carries the measurements too.
  std::string regions;
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags() + " --output json regions", &regions) == 0);
  CHECK_THAT(regions, Catch::Contains("\"peer\":\"ap-south\"") && Catch::Contains("\"rtt_seconds\":0.08"));
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
  c.orchestrator.Kill();
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

TEST_CASE("acknowledged jobs survive a SIGKILL followed by a deleted, truncated or header-damaged WAL",
          "[control_plane][state]") {
  // What a hostile probe did to the state file (30 of 60 acknowledged jobs
  // kept before the store checkpointed on every acknowledged write).
  Cluster c("cp-wal");
  c.StartOrchestrator();
  constexpr int kJobs = 60;
  std::set<std::string> acknowledged;
  for (int i = 0; i < kJobs; ++i) acknowledged.insert(c.Submit(3));  // no agents: every job stays waiting
  REQUIRE(acknowledged.size() == kJobs);
  c.orchestrator.Kill();
  const fs::path state = c.dir / "state.sqlite";
  const fs::path saved = c.dir / "saved";
  fs::create_directories(saved);
  for (const char* ext : {"", "-wal", "-shm"})
    if (fs::exists(state.string() + ext)) fs::copy_file(state.string() + ext, saved / (std::string("s") + ext));
  const auto restore = [&] {
    for (const char* ext : {"", "-wal", "-shm"}) {
      fs::remove(state.string() + ext);
      if (fs::exists(saved / (std::string("s") + ext)))
        fs::copy_file(saved / (std::string("s") + ext), state.string() + ext);
    }
  };
  const fs::path wal = state.string() + "-wal";
  const std::map<std::string, std::function<void()>> damage = {
      {"WAL deleted", [&] { fs::remove(wal); fs::remove(state.string() + "-shm"); }},
      {"WAL truncated to half", [&] { if (fs::exists(wal)) fs::resize_file(wal, fs::file_size(wal) / 2); }},
      {"WAL header damaged", [&] {
         if (!fs::exists(wal) || fs::file_size(wal) < 32) return;
         std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(12);  // the checkpoint sequence and salts: the header's checksum no longer matches
         f.write("\x5a\x5a\x5a\x5a\x5a\x5a\x5a\x5a", 8);
       }},
  };
  for (const auto& [what, apply] : damage) {
    INFO(what);
    restore();
    apply();
    REQUIRE(orchestrator::CheckStateFileBeforeOpen(state, false).ok());
    auto store = orchestrator::StateStore::Open(state, false);
    REQUIRE(store.ok());
    std::set<std::string> kept;
    const auto jobs = (*store)->LoadJobs();
    REQUIRE(jobs.ok());
    for (const auto& j : *jobs) kept.insert(j.id);
    CHECK(kept == acknowledged);
  }
}

TEST_CASE("an agent that restarts while the job starts gets the job again at once, not after the round timeout",
          "[control_plane][restart]") {
  Cluster c("cp-agent-restart");
  c.StartOrchestrator();  // heartbeats 100 ms x 5 misses, round timeout 10 s
  for (const auto& r : {"eu-west", "us-east"})
    c.agents.push_back(std::make_unique<FakeAgent>(
        FakeAgentOptions{r, c.ep.control, c.dir / "keys" / (std::string(r) + ".key"), c.ep.public_key, 150ms, 100ms}));
  FakeAgentOptions dying{"ap-south", c.ep.control, c.dir / "keys/ap-south.key", c.ep.public_key, 150ms, 100ms};
  dying.answer_assignments = false;  // dies while it launches the job's workers
  auto ap_south = std::make_unique<FakeAgent>(dying);
  const std::string job = c.Submit(3);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (ap_south->assignments_received() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  REQUIRE(ap_south->assignments_received() == 1);
  CHECK(c.Status(job).state() == "scheduled");
  // Killed and restarted by systemd well inside the heartbeat-miss window.
  const auto restarted_at = std::chrono::steady_clock::now();
  ap_south.reset();
  c.agents.push_back(std::make_unique<FakeAgent>(
      FakeAgentOptions{"ap-south", c.ep.control, c.dir / "keys/ap-south.key", c.ep.public_key, 150ms, 100ms}));
  auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.state() == "running" || s.state() == "succeeded"; }, 8s);
  REQUIRE((st.state() == "running" || st.state() == "succeeded"));
  CHECK(std::chrono::steady_clock::now() - restarted_at < 5s);  // the round timeout is 10 s
  st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.state() == "succeeded"; }, 30s);
  CHECK(st.state() == "succeeded");
}

TEST_CASE("crash sweep: the real orchestrator dies at a state write of each kind, before and after its COMMIT, "
          "and restarted it loses no acknowledged job and applies no round twice",
          "[control_plane][crash_sweep]") {
  // The process complement of crash_sweep_test.cpp (every write, in-process):
  // here the real binary _Exits inside the write hook (--crash-at-write), the
  // CLI retries its submit with the same idempotency key, and fake agents run
  // the job to its end across the restart.
  const std::vector<std::string> points = {"create_job:1:before",   "create_job:1:after", "save_job:1:before",
                                           "save_job:1:after",      "commit_round:2:before",
                                           "commit_round:2:after"};
  for (const auto& point : points) {
    INFO("crash at " << point);
    Cluster c("cp-crash");
    c.StartOrchestrator("tcp://127.0.0.1:0", {"--crash-at-write", point});
    const std::string port = c.ep.control.substr(c.ep.control.rfind(':') + 1);
    c.StartAgents(50ms);
    const auto submit = [&](std::string* id) {
      std::ostringstream out, err;
      const int rc = orchestrator::CliSubmit(c.Cli(&out, &err), c.WriteJob(3).string(), false, "crash-sweep-key");
      const auto pos = out.str().find("job-");
      if (rc == 0 && pos != std::string::npos) *id = out.str().substr(pos, 10);
      return rc;
    };
    std::string acknowledged;
    (void)submit(&acknowledged);  // unanswered when the process died before answering
    REQUIRE(c.orchestrator.Wait(30s) == std::optional<int>(86));  // it died at that write
    c.StartOrchestrator("tcp://127.0.0.1:" + port);
    std::string job;
    REQUIRE(submit(&job) == 0);  // the retry: the job the first reply named, if there was one
    if (!acknowledged.empty()) CHECK(job == acknowledged);
    const auto st = c.WaitFor(job, [](const v1::JobStatus& s) { return s.state() == "succeeded"; }, 40s);
    INFO(st.state() << ": " << st.reason());
    REQUIRE(st.state() == "succeeded");
    auto store = orchestrator::StateStore::Open(c.dir / "state.sqlite", false);
    REQUIRE(store.ok());
    CHECK((*store)->LoadJobs().value().size() == 1);
    const auto rounds = (*store)->LoadRounds(job);
    REQUIRE(rounds.ok());
    REQUIRE(rounds->size() == 3);
    for (uint32_t i = 0; i < 3; ++i) CHECK((*rounds)[i].round == i + 1);
    for (auto& a : c.agents) {
      auto seen = a->committed();
      CHECK(std::adjacent_find(seen.begin(), seen.end(), std::greater_equal<uint32_t>()) == seen.end());
    }
  }
}

TEST_CASE("a wrong-key agent and a wrong-key CLI are refused", "[control_plane]") {
  Cluster c("cp-keys");
  c.StartOrchestrator();
  FakeAgent intruder({"mallory", c.ep.control, c.dir / "keys/intruder.key", c.ep.public_key, 50ms, 100ms});
  std::ostringstream out, err;
  const int code = orchestrator::CliRegions(c.Cli(&out, &err, "intruder"));
  CHECK(code == orchestrator::kExitUnreachable);
  CHECK_THAT(out.str(), Catch::Contains("refused our key") && Catch::Contains("\"code\":3"));  // Cli() asks for JSON
  std::ostringstream out2, err2;
  REQUIRE(orchestrator::CliRegions(c.Cli(&out2, &err2)) == 0);
  CHECK_THAT(out2.str(), !Catch::Contains("mallory"));
  CHECK_FALSE(intruder.registered());
  std::string cli_out;
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags("intruder") + " jobs", &cli_out) == 3);
}

TEST_CASE("an agent whose handshake broke off (the orchestrator died in it) hears the orchestrator that comes back",
          "[control_plane]") {
  // One failed CURVE handshake made a client deaf for good: every later receive
  // said "refused our key", though its next handshake succeeded (the crash
  // sweep saw agents re-register for 40 s without hearing a reply). Here a
  // listener that drops every connection stands for an orchestrator dying in
  // the handshake, then the orchestrator comes back on its port.
  Cluster c("cp-handshake");
  c.StartOrchestrator();
  const std::string port = c.ep.control.substr(c.ep.control.rfind(':') + 1);
  c.orchestrator.Kill();
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 16) == 0);
  std::atomic<bool> dropping{true};
  std::thread dropper([&] {
    while (dropping) {
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) ::close(fd);
    }
  });
  FakeAgent agent({"eu-west", c.ep.control, c.dir / "keys/eu-west.key", c.ep.public_key, 50ms, 100ms});
  const auto broken_by = std::chrono::steady_clock::now() + 15s;
  while (agent.last_error().code() != StatusCode::kPermissionDenied && std::chrono::steady_clock::now() < broken_by)
    std::this_thread::sleep_for(20ms);
  dropping = false;
  dropper.join();
  ::close(listener);
  REQUIRE(agent.last_error().code() == StatusCode::kPermissionDenied);  // the handshake failed
  c.StartOrchestrator("tcp://127.0.0.1:" + port);
  const auto registered_by = std::chrono::steady_clock::now() + 15s;
  while (!agent.registered() && std::chrono::steady_clock::now() < registered_by) std::this_thread::sleep_for(20ms);
  CHECK(agent.registered());
}

TEST_CASE("the CLI's exit codes: bad job file 2 (with its line), unreachable 3, usage 2", "[control_plane]") {
  const TempDir tmp("cli-codes");
  const fs::path& dir = tmp.path();
  std::ofstream(dir / "bad.yaml") << "name: x\nmodel_preset: tiny\nrounds: 3\nsync:\n  knd: diloco\n";
  std::string out;
  CHECK(RunCommand(kBin + "/longhaul --orchestrator tcp://127.0.0.1:1 --insecure submit " + (dir / "bad.yaml").string(),
                   &out) == 2);
  CHECK_THAT(out, Catch::Contains("line 5") && Catch::Contains("unknown field 'sync.knd'"));
  out.clear();
  // The CLI gives up by itself (exit 3, not RunCommand's -1 when its own bound passes).
  CHECK(RunCommand(kBin + "/longhaul --orchestrator tcp://127.0.0.1:1 --insecure --timeout-s 1 jobs", &out, 60s) == 3);
  CHECK_THAT(out, Catch::Contains("did not answer"));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul jobs", &out) == 2);  // no orchestrator configured
  CHECK_THAT(out, Catch::Contains("--orchestrator"));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul --output json keys gen --dir " + (dir / "k").string() + " --name alice", &out) == 0);
  CHECK(fs::exists(dir / "k/alice.key"));
  CHECK(RunCommand(kBin + "/longhaul keys gen --dir " + (dir / "k").string() + " --name alice", &out) == 2);
}

TEST_CASE("CLI usage errors exit 2, --help exits 0", "[control_plane][cli]") {
  const std::string cli = kBin + "/longhaul";
  std::string out;
  CHECK(RunCommand(cli + " --bogus jobs", &out) == 2);  // unknown flag (CLI11 would exit 109)
  CHECK_THAT(out, Catch::Contains("--bogus") && Catch::Contains("--help"));
  out.clear();
  CHECK(RunCommand(cli + " submit", &out) == 2);  // missing argument
  CHECK_THAT(out, Catch::Contains("JOB.yaml"));
  CHECK(RunCommand(cli + " frobnicate", &out) == 2);  // unknown subcommand
  CHECK(RunCommand(cli, &out) == 2);                  // no subcommand
  CHECK(RunCommand(cli + " keys", &out) == 2);
  CHECK(RunCommand(cli + " --output xml jobs", &out) == 2);
  CHECK(RunCommand(cli + " status --interval-s 0 job-1", &out) == 2);
  out.clear();
  CHECK(RunCommand(cli + " --help", &out) == 0);
  CHECK_THAT(out, Catch::Contains("submit"));
  CHECK(RunCommand(cli + " submit --help", &out) == 0);
  CHECK(RunCommand(cli + " keys gen --help", &out) == 0);
  // With --output json a usage error is a JSON object on stdout, stderr stays empty.
  out.clear();
  CHECK(RunCommand("(" + cli + " --output json --bogus jobs 2>/dev/null)", &out) == 2);
  CHECK_THAT(out,
             Catch::StartsWith("{\"error\":\"") && Catch::Contains("--bogus") && Catch::EndsWith(",\"code\":2}\n"));
  out.clear();
  CHECK(RunCommand("(" + cli + " submit --output=json 2>&1 >/dev/null)", &out) == 2);
  CHECK(out.empty());
}

TEST_CASE("every command takes --output json, before or after the subcommand, errors are JSON objects",
          "[control_plane][cli]") {
  Cluster c("cp-json");
  c.StartOrchestrator();
  c.StartAgents(30ms);
  const std::string cli = kBin + "/longhaul" + c.CliFlags();
  std::string out;
  CHECK(RunCommand("(" + cli + " jobs --output json 2>/dev/null)", &out) == 0);
  CHECK(out == "{\"jobs\":[],\"next_page_token\":\"\"}\n");
  out.clear();
  CHECK(RunCommand("(" + cli + " regions --output json 2>/dev/null)", &out) == 0);
  CHECK_THAT(out, Catch::StartsWith("{\"regions\":["));
  out.clear();
  CHECK(RunCommand("(" + cli + " submit " + c.WriteJob(2).string() + " --output json 2>/dev/null)", &out) == 0);
  CHECK_THAT(out, Catch::StartsWith("{\"job_id\":\"job-000001\",\"existing\":false}"));
  auto st = c.WaitFor(
      "job-000001", [](const v1::JobStatus& s) { return s.state() == "succeeded"; }, 30s);
  REQUIRE(st.state() == "succeeded");
  out.clear();
  CHECK(RunCommand("(" + cli + " status job-000001 --output json 2>/dev/null)", &out) == 0);
  CHECK_THAT(out, Catch::StartsWith("{\"job_id\":\"job-000001\""));
  out.clear();
  CHECK(RunCommand("(" + cli + " jobs --output json 2>/dev/null)", &out) == 0);
  CHECK_THAT(out, Catch::StartsWith("{\"jobs\":[{\"job_id\":\"job-000001\""));
  out.clear();
  CHECK(RunCommand("(" + cli + " cancel job-000001 --output json 2>/dev/null)", &out) == 1);  // already succeeded
  CHECK_THAT(out, Catch::StartsWith("{\"error\":\"job job-000001 already succeeded\",\"code\":1}"));
  out.clear();
  CHECK(RunCommand("(" + cli + " status job-424242 --output json 2>/dev/null)", &out) == 1);
  CHECK(out == "{\"error\":\"unknown job 'job-424242'\",\"code\":1}\n");
  out.clear();
  const fs::path bad = c.dir / "bad.yaml";
  std::ofstream(bad) << "name: x\nrounds: 2\nsync:\n  knd: diloco\n";
  CHECK(RunCommand("(" + cli + " --output json submit " + bad.string() + " 2>/dev/null)", &out) == 2);
  CHECK_THAT(out, Catch::StartsWith("{\"error\":\"bad job file: bad.yaml line 4: unknown field 'sync.knd'") &&
                      Catch::EndsWith("\"code\":2}\n"));
  out.clear();
  CHECK(RunCommand("(" + kBin +
                       "/longhaul --orchestrator tcp://127.0.0.1:1 --insecure --timeout-s 0.5 jobs --output json "
                       "2>/dev/null)",
                   &out) == 3);
  CHECK_THAT(out, Catch::StartsWith("{\"error\":\"orchestrator at tcp://127.0.0.1:1 did not answer") &&
                      Catch::EndsWith("\"code\":3}\n"));
  out.clear();
  CHECK(
      RunCommand("(" + cli + " keys gen --dir " + (c.dir / "k").string() + " --name a\\\"b --output json 2>/dev/null)",
                 &out) == 0);
  CHECK_THAT(out, Catch::Contains("a\\\"b.key\""));  // paths are escaped as JSON strings
}

TEST_CASE("submit reads only regular files of at most 1 MiB, and never hangs on a FIFO", "[control_plane][cli]") {
  const TempDir tmp("cli-files");
  const fs::path& dir = tmp.path();
  const std::string cli = kBin + "/longhaul --orchestrator tcp://127.0.0.1:1 --insecure submit ";
  std::string out;
  REQUIRE(::mkfifo((dir / "fifo.yaml").c_str(), 0600) == 0);
  CHECK(RunCommand(cli + (dir / "fifo.yaml").string(), &out, 60s) == 2);  // -1 if it waited for a writer
  CHECK_THAT(out, Catch::Contains("is a FIFO; give a regular file"));
  out.clear();
  CHECK(RunCommand(cli + "/dev/zero", &out) == 2);
  CHECK_THAT(out, Catch::Contains("'/dev/zero' is a character device"));
  out.clear();
  CHECK(RunCommand(cli + dir.string(), &out) == 2);
  CHECK_THAT(out, Catch::Contains("is a directory"));
  out.clear();
  {
    std::ofstream big(dir / "big.yaml");
    big << "name: x\nrounds: 2\n" << std::string(2 << 20, '#') << "\n";
  }
  CHECK(RunCommand(cli + (dir / "big.yaml").string(), &out) == 2);
  CHECK_THAT(out, Catch::Contains("job file " + (dir / "big.yaml").string() + " is 2097171 bytes; the limit is 1 MiB"));
  out.clear();
  CHECK(RunCommand(cli + (dir / "missing.yaml").string(), &out) == 2);
  CHECK_THAT(out, Catch::Contains("missing.yaml"));
}

TEST_CASE("a spec the orchestrator refuses is reported with its reason and exit 2, not as no answer",
          "[control_plane][cli]") {
  Cluster c("cp-refused");
  c.StartOrchestrator();
  orchestrator::ControlClientOptions co;
  co.endpoint = c.ep.control;
  co.own_keys = wan_transport::LoadKeyPair(c.dir / "keys/cli.key").value();
  co.server_public_key = c.ep.public_key;
  co.timeout = 3s;
  auto client = orchestrator::ControlClient::Connect(co).value();
  auto submit = [&](const v1::JobSpec& spec) {
    v1::ControlMessage req;
    *req.mutable_submit_job()->mutable_spec() = spec;
    return client->Call(req).status();
  };
  auto exit_code = [&](const Status& s, std::string* json) {
    std::ostringstream out, err;
    const int code = orchestrator::ReportError(c.Cli(&out, &err), s);
    *json = out.str();
    return code;
  };
  std::string json;
  // Not through the YAML reader: the orchestrator applies the same limits itself.
  v1::JobSpec long_name = orchestrator::DefaultJobSpec();
  long_name.set_name(std::string(300, 'n'));
  Status s = submit(long_name);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("field 'name' must be at most 128 bytes"));
  CHECK(exit_code(s, &json) == 2);
  CHECK_THAT(json, Catch::Contains("must be at most 128 bytes") && Catch::Contains("\"code\":2"));
  // A string that is not UTF-8 does not survive protobuf parsing on the other side.
  v1::JobSpec not_utf8 = orchestrator::DefaultJobSpec();
  not_utf8.set_name("caf\xc3");
  s = submit(not_utf8);  // answered (below: not "did not answer")
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("could not read the request") && !Catch::Contains("did not answer"));
  CHECK(exit_code(s, &json) == 2);
  // Over the frame limit: refused before sending (the orchestrator would drop it silently).
  v1::JobSpec huge = orchestrator::DefaultJobSpec();
  huge.set_name(std::string(17 << 20, 'h'));
  s = submit(huge);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("submit_job request is") && Catch::Contains("at most 16 MiB"));
  CHECK(exit_code(s, &json) == 2);
  // The connection still works.
  CHECK(submit(orchestrator::DefaultJobSpec()).ok());
}

TEST_CASE("a finished job keeps its final validation loss and parameter hash after an orchestrator restart",
          "[control_plane]") {
  Cluster c("cp-final");
  c.StartOrchestrator();
  c.StartAgents(30ms);
  const std::string job = c.Submit(3);
  auto st = c.WaitFor(
      job, [](const v1::JobStatus& s) { return s.state() == "succeeded"; }, 30s);
  REQUIRE(st.state() == "succeeded");
  REQUIRE_FALSE(st.param_hash().empty());
  CHECK(st.val_loss() == Approx(3.1 / 4));  // the fake agents' val loss of round 3
  c.agents.clear();
  c.orchestrator.Kill();
  c.StartOrchestrator();  // the same state file
  const auto after = c.Status(job);
  CHECK(after.state() == "succeeded");
  CHECK(after.round() == 3);
  CHECK(after.param_hash() == st.param_hash());
  CHECK(after.val_loss() == Approx(st.val_loss()));
  std::string out;
  CHECK(RunCommand("(" + kBin + "/longhaul" + c.CliFlags() + " status " + job + " --output json 2>/dev/null)", &out) ==
        0);
  CHECK_THAT(out,
             Catch::Contains("\"val_loss\":0.77") && Catch::Contains("\"param_hash\":\"" + st.param_hash() + "\""));
  out.clear();
  CHECK(RunCommand(kBin + "/longhaul" + c.CliFlags() + " jobs", &out) == 0);
  CHECK_THAT(out, Catch::Contains("0.7750"));
}
