// longhaul-agent as a process, driven by a fake orchestrator: registration and
// heartbeats, bad assignments, worker crash supervision, and two regions
// training together through DiLoCo rounds with identical parameters.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <zmq.hpp>

#include "agent_rig.h"
#include "fake_orchestrator.h"
#include "longhaul/proto/frame.h"
#include "longhaul/proto/job_defaults.h"
#include "longhaul/session/checkpoint_path.h"
#include "support/skip.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace v1 = longhaul::v1;
using longhaul::testing::ChildrenNamed;
using longhaul::testing::FakeOrchestrator;
using longhaul::testing::SkipUnlessRoot;
using longhaul::testing::Subprocess;
using longhaul::testing::TempDir;
using namespace std::chrono_literals;
using namespace agent_rig;

TEST_CASE("region_agent: agent registers, heartbeats, rejects bad assignments and keeps running", "[agent]") {
  FakeOrchestrator orch;
  const TempDir tmp("agent-bad");
  const auto& dir = tmp.path();
  auto agent = StartAgent("eu", orch, 2, dir);
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion), 10s));
  auto hb = orch.WaitFor(Body(v1::ControlMessage::kHeartbeat), 5s);
  REQUIRE(hb);
  CHECK(hb->msg.heartbeat().healthy());

  auto bad = TinyJob("j-preset", "eu", 0, 1, 1);
  bad.mutable_spec()->set_model_preset("gigantic");
  orch.Send("eu", Wrap(bad));
  auto rej = orch.WaitFor(Body(v1::ControlMessage::kJobRejected), 5s);
  REQUIRE(rej);
  CHECK(rej->msg.job_rejected().job_id() == "j-preset");
  CHECK(rej->msg.job_rejected().error().message().find("gigantic") != std::string::npos);

  orch.Send("eu", Wrap(TinyJob("j-big", "eu", 0, 1, 3)));
  rej = orch.WaitFor(Body(v1::ControlMessage::kJobRejected), 5s);
  REQUIRE(rej);
  CHECK(rej->msg.job_rejected().error().code() == v1::ERROR_CODE_RESOURCE_EXHAUSTED);

  auto missing = TinyJob("j-file", "eu", 0, 1, 1);
  missing.mutable_spec()->mutable_data()->mutable_text_file()->set_path("/nonexistent/data.txt");
  longhaul::proto::FillJobDefaults(missing.mutable_spec());  // the text source's defaults, as at admission
  orch.Send("eu", Wrap(missing));
  rej = orch.WaitFor(Body(v1::ControlMessage::kJobRejected), 5s);
  REQUIRE(rej);
  CHECK(rej->msg.job_rejected().error().code() == v1::ERROR_CODE_NOT_FOUND);

  // Admitted (the file exists) but the worker cannot split 3 bytes into shards:
  // the worker's own start-up error reaches the orchestrator.
  {
    std::ofstream(dir / "tiny.txt") << "abc";
  }
  auto small = TinyJob("j-small", "eu", 0, 1, 1);
  small.mutable_spec()->mutable_data()->mutable_text_file()->set_path((dir / "tiny.txt").string());
  longhaul::proto::FillJobDefaults(small.mutable_spec());
  orch.Send("eu", Wrap(small));
  rej = orch.WaitFor(Body(v1::ControlMessage::kJobRejected), 30s);
  REQUIRE(rej);
  CHECK(rej->msg.job_rejected().job_id() == "j-small");
  INFO(rej->msg.job_rejected().error().message());
  CHECK(rej->msg.job_rejected().error().message().find("worker 0") != std::string::npos);
  CHECK(rej->msg.job_rejected().error().message().find("tiny.txt") != std::string::npos);

  // A user's program: this agent's operator allowed none.
  auto program = TinyJob("j-program", "eu", 0, 1, 1);
  program.mutable_spec()->clear_model_preset();
  program.mutable_spec()->mutable_worker()->mutable_command()->add_argv("/bin/sh");
  orch.Send("eu", Wrap(program));
  rej = orch.WaitFor(Body(v1::ControlMessage::kJobRejected), 5s);
  REQUIRE(rej);
  CHECK(rej->msg.job_rejected().job_id() == "j-program");
  CHECK(rej->msg.job_rejected().error().code() == v1::ERROR_CODE_PERMISSION_DENIED);
  CHECK_THAT(rej->msg.job_rejected().error().message(), Catch::Contains("region eu runs no user programs"));

  // Timeouts the orchestrator sent that break the hierarchy (collective above the round).
  auto bad_timeouts = TinyJob("j-timeouts", "eu", 0, 1, 1);
  bad_timeouts.mutable_timeouts()->set_link_io_ms(100);
  bad_timeouts.mutable_timeouts()->set_collective_ms(5000);
  bad_timeouts.mutable_timeouts()->set_heartbeat_interval_ms(100);
  bad_timeouts.mutable_timeouts()->set_heartbeat_misses(3);
  bad_timeouts.mutable_timeouts()->set_round_ms(1000);
  bad_timeouts.mutable_timeouts()->set_job_idle_ms(10000);
  orch.Send("eu", Wrap(bad_timeouts));
  rej = orch.WaitFor(Body(v1::ControlMessage::kJobRejected), 5s);
  REQUIRE(rej);
  CHECK(rej->msg.job_rejected().job_id() == "j-timeouts");
  CHECK_THAT(rej->msg.job_rejected().error().message(),
             Catch::Contains("the assignment's timeouts") && Catch::Contains("collective"));

  v1::JobAssignment malformed;
  malformed.set_job_id("j-malformed");
  malformed.set_region("eu");
  orch.Send("eu", Wrap(malformed));
  rej = orch.WaitFor(Body(v1::ControlMessage::kJobRejected), 5s);
  REQUIRE(rej);
  CHECK(rej->msg.job_rejected().error().message().find("spec") != std::string::npos);

  orch.Send("eu", Start("no-such-job", 1, 1, {}));
  auto report = orch.WaitFor(Body(v1::ControlMessage::kRoundReport), 5s);
  REQUIRE(report);
  CHECK(!report->msg.round_report().ok());

  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kHeartbeat), 5s));
  CHECK(agent.Running());
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(10s) == 0);  // exited with status 0
}

// A local process on the agent's worker socket that is not one of its workers.
struct Impostor {
  zmq::context_t ctx;
  zmq::socket_t socket{ctx, zmq::socket_type::dealer};
  explicit Impostor(const std::string& endpoint) {
    socket.set(zmq::sockopt::linger, 0);
    socket.connect(endpoint);
  }
  void Send(std::string_view bytes) { socket.send(zmq::buffer(bytes.data(), bytes.size()), zmq::send_flags::none); }
  void Hello(const std::string& job, uint32_t rank, const std::string& token) {
    v1::ControlMessage m;
    auto* h = m.mutable_worker_hello();
    h->set_job_id(job);
    h->set_worker_rank(rank);
    h->set_wan_endpoint("tcp://127.0.0.1:9");
    h->set_num_params(1);
    h->set_token(token);
    Send(longhaul::proto::EncodeControl(m));
  }
  // One rendezvous store request and the agent's reply (bounded wait).
  v1::StoreReply Store(const std::string& job, uint32_t rank, const std::string& token, v1::StoreRequest::Op op,
                       const std::string& key, const std::string& value = "") {
    v1::ControlMessage m;
    m.set_request_id(++requests);
    auto* r = m.mutable_store_request();
    r->set_job_id(job);
    r->set_worker_rank(rank);
    r->set_token(token);
    r->set_op(op);
    r->set_key(key);
    r->set_value(value);
    Send(longhaul::proto::EncodeControl(m));
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    REQUIRE(zmq::poll(&item, 1, std::chrono::milliseconds(5000)) == 1);
    zmq::message_t frame;
    REQUIRE(socket.recv(frame));
    auto reply = longhaul::proto::DecodeControl(frame.to_string_view());
    REQUIRE(reply.ok());
    REQUIRE(reply->has_store_reply());
    CHECK(reply->request_id() == requests);
    return reply->store_reply();
  }
  uint64_t requests = 0;
};

// The agent's worker socket, from its log line ("worker socket tcp://HOST:PORT (...)").
std::string WorkerSocket(const Subprocess& agent) {
  const auto line = agent.WaitForLine("worker socket tcp://", 10s);
  REQUIRE(line);
  const auto at = line->find("tcp://");
  return line->substr(at, line->find(' ', at) - at);
}

// A one-worker job whose worker is `sleep 60`: it never says hello, so the
// job stays launching with its tokens made.
v1::JobAssignment SleeperJob(const std::string& job) {
  auto a = TinyJob(job, "eu", 0, 1, 1);
  a.mutable_spec()->clear_model_preset();
  a.mutable_spec()->mutable_worker()->mutable_command()->add_argv("/bin/sleep");
  a.mutable_spec()->mutable_worker()->mutable_command()->add_argv("60");
  return a;
}

// A variable of a running process's environment ("" when unset).
std::string EnvironOf(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  for (std::string entry; std::getline(in, entry, '\0');) {
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  }
  return "";
}

TEST_CASE("region_agent: agent only a process it launched can say hello for a worker, a flood costs a line a second",
          "[agent][security]") {
  FakeOrchestrator orch;
  const TempDir tmp("agent-impostor");
  const auto& dir = tmp.path();
  auto agent = StartAgent("eu", orch, 1, dir, {}, {"--allow-command", "/bin/sleep"});
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion), 10s));
  Impostor impostor(WorkerSocket(agent));
  // A job whose real worker never says hello: it stays launching while the
  // impostor tries to take rank 0 (and a rank the job does not have).
  orch.Send("eu", Wrap(SleeperJob("j-guard")));
  REQUIRE(agent.WaitForLine("job j-guard: launched 1 worker(s)", 10s));
  impostor.Hello("j-guard", 99, "");
  REQUIRE(agent.WaitForLine("dropped a hello for job j-guard rank 99 without its launch's token", 10s));
  impostor.Hello("j-guard", 0, "0123456789abcdef0123456789abcdef");
  impostor.Send("not a control message");
  for (int i = 0; i < 500; ++i) impostor.Send("flood " + std::to_string(i));
  // A second later the next frame is logged after a line counting what was
  // dropped silently in between: every frame read, two lines written. The
  // job is untouched meanwhile: neither ready with the impostor's endpoint nor
  // rejected because of it.
  bool job_touched = false;
  const auto flood_end = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - flood_end < 1100ms) {
    REQUIRE(orch.WaitFor(
        [&](const FakeOrchestrator::Incoming& in) {
          job_touched = job_touched || in.msg.has_job_ready() || in.msg.has_job_rejected();
          return in.msg.has_heartbeat();  // every 100 ms
        },
        5s));
  }
  impostor.Hello("j-last", 0, "");
  REQUIRE(agent.WaitForLine("dropped a hello for job 'j-last' rank 0: no such job is launching", 10s));
  CHECK_FALSE(job_touched);
  std::ifstream in(dir / "eu-agent.log");
  size_t lines = 0, counted = 0;
  for (std::string l; std::getline(in, l);) {
    if (l.find("worker socket: dropped") != std::string::npos) ++lines;
    const auto more = l.find(" more frame(s) dropped since the last such line");
    if (more != std::string::npos) counted += std::stoul(l.substr(l.rfind(' ', more - 1) + 1));
  }
  CHECK(lines + counted == 504);  // both hellos, the junk frame, the flood of 500, the last hello
  CHECK(lines <= 3);              // one per second of flooding (2 unless the machine stalled)
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(20s) == 0);
}

TEST_CASE("region_agent: agent keeps each launch's rendezvous store and answers only the launch's tokens",
          "[agent][security]") {
  FakeOrchestrator orch;
  const TempDir tmp("agent-store");
  const auto& dir = tmp.path();
  auto agent = StartAgent("eu", orch, 1, dir, {}, {"--allow-command", "/bin/sleep"});
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion), 10s));
  Impostor client(WorkerSocket(agent));
  orch.Send("eu", Wrap(SleeperJob("j-store")));
  REQUIRE(agent.WaitForLine("job j-store: launched 1 worker(s)", 10s));
  const auto sleepers = ChildrenNamed(agent.pid(), "sleep");
  REQUIRE(sleepers.size() == 1);
  const std::string token = EnvironOf(sleepers[0], "LONGHAUL_WORKER_TOKEN");
  REQUIRE(token.size() >= 16);
  using Op = v1::StoreRequest;
  // The launch's worker, with its token: set, get, and a key not set yet.
  CHECK(client.Store("j-store", 0, token, Op::SET, "rank0", "addr-of-0").found());
  auto got = client.Store("j-store", 0, token, Op::GET, "rank0");
  CHECK(got.found());
  CHECK(got.value() == "addr-of-0");
  got = client.Store("j-store", 0, token, Op::GET, "rank1");
  CHECK_FALSE(got.found());
  CHECK_FALSE(got.has_error());
  // Anyone else: refused, and the store is untouched.
  auto forged = client.Store("j-store", 0, "0123456789abcdef0123456789abcdef", Op::SET, "rank0", "evil");
  CHECK(forged.error().code() == v1::ERROR_CODE_PERMISSION_DENIED);
  CHECK_THAT(forged.error().message(), Catch::Contains("without this launch's token for worker 0"));
  CHECK(client.Store("j-store", 5, token, Op::GET, "rank0").error().code() == v1::ERROR_CODE_PERMISSION_DENIED);
  CHECK(client.Store("j-store", 0, token, Op::GET, "rank0").value() == "addr-of-0");
  auto unknown = client.Store("j-none", 0, token, Op::GET, "rank0");
  CHECK(unknown.error().code() == v1::ERROR_CODE_NOT_FOUND);
  // Over a limit: named, and nothing stored.
  auto big = client.Store("j-store", 0, token, Op::SET, "huge", std::string((1 << 20) + 1, 'x'));
  CHECK(big.error().code() == v1::ERROR_CODE_INVALID_ARGUMENT);
  CHECK_THAT(big.error().message(), Catch::Contains("rendezvous key 'huge'"));
  CHECK_FALSE(client.Store("j-store", 0, token, Op::GET, "huge").found());
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(20s) == 0);
}

TEST_CASE("region_agent: agent a killed worker makes the region unhealthy and the agent takes new jobs", "[agent]") {
  FakeOrchestrator orch;
  const TempDir tmp("agent-crash");
  const auto& dir = tmp.path();
  auto agent = StartAgent("eu", orch, 1, dir);
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion), 10s));
  orch.Send("eu", Wrap(TinyJob("j1", "eu", 0, 1, 1)));
  auto ready = orch.WaitFor(Body(v1::ControlMessage::kJobReady), 30s);
  REQUIRE(ready);
  CHECK(ready->msg.job_ready().endpoint().shard_endpoints_size() == 1);

  // A round whose peer region never answers: the worker waits in the collective.
  v1::PeerEndpoint ghost;
  ghost.set_region("ghost");
  ghost.add_shard_endpoints("tcp://127.0.0.1:9");
  orch.Send("eu", Start("j1", 1, 1, {ready->msg.job_ready().endpoint(), ghost}));
  REQUIRE(agent.WaitForLine("job j1 round 1 epoch 1: started", 10s));  // the round is in flight
  auto pids = ChildrenNamed(agent.pid(), "longhaul-worker");
  REQUIRE(pids.size() == 1);
  ::kill(pids[0], SIGKILL);
  // The round in flight fails at once (not at the collective deadline), naming the worker.
  auto failed = orch.WaitFor(Body(v1::ControlMessage::kRoundReport), 5s);
  REQUIRE(failed);
  CHECK(!failed->msg.round_report().ok());
  CHECK(failed->msg.round_report().round() == 1);
  CHECK(failed->msg.round_report().error().message().find("worker 0") != std::string::npos);
  // The job no longer runs here: the orchestrator drops the region from the retry.
  CHECK(failed->msg.round_report().error().code() == v1::ERROR_CODE_FAILED_PRECONDITION);
  auto sick = orch.WaitFor([](const FakeOrchestrator::Incoming& in) {
    return in.msg.has_heartbeat() && !in.msg.heartbeat().healthy();
  }, 10s);
  REQUIRE(sick);
  const std::string detail = sick->msg.heartbeat().detail();
  CHECK(detail.find("worker 0") != std::string::npos);
  CHECK(detail.find("SIGKILL") != std::string::npos);

  orch.Send("eu", Start("j1", 1, 1, {ready->msg.job_ready().endpoint()}));
  auto report = orch.WaitFor(Body(v1::ControlMessage::kRoundReport), 5s);
  REQUIRE(report);
  CHECK(!report->msg.round_report().ok());
  CHECK(report->msg.round_report().error().message().find("SIGKILL") != std::string::npos);

  orch.Send("eu", Wrap(TinyJob("j2", "eu", 0, 1, 1)));
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kJobReady), 30s));
  auto j2 = ChildrenNamed(agent.pid(), "longhaul-worker");
  REQUIRE(j2.size() == 1);
  CHECK(agent.Running());
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(10s) == 0);  // exited with status 0
  CHECK(::kill(j2[0], 0) != 0);  // its worker went with it
}

TEST_CASE("region_agent: agent two regions of two workers agree on theta through DiLoCo rounds", "[agent]") {
  FakeOrchestrator orch;
  const TempDir tmp("agent-rounds");
  const auto& dir = tmp.path();
  auto a = StartAgent("eu", orch, 2, dir);
  auto b = StartAgent("us", orch, 2, dir);
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion, "eu"), 10s));
  if (!orch.knows("us")) REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion, "us"), 10s));
  orch.Send("eu", Wrap(TinyJob("job", "eu", 0, 3, 2)));
  orch.Send("us", Wrap(TinyJob("job", "us", 1, 3, 2)));
  std::map<std::string, v1::PeerEndpoint> endpoints;
  while (endpoints.size() < 2) {
    auto ready = orch.WaitFor(Body(v1::ControlMessage::kJobReady), 60s);
    REQUIRE(ready);
    endpoints[ready->region] = ready->msg.job_ready().endpoint();
  }
  std::vector<v1::PeerEndpoint> ring = {endpoints["eu"], endpoints["us"]};
  std::vector<std::string> regions = {"eu", "us"};
  const auto ckpt_dir = dir / "checkpoints";

  auto run_round = [&](uint32_t round, uint64_t epoch, bool checkpoint) {
    auto start = Start("job", round, epoch, ring);
    start.mutable_round_command()->set_checkpoint(checkpoint);
    start.mutable_round_command()->set_checkpoint_dir(ckpt_dir.string());
    if (regions.size() == 3) {  // "ap" joins: theta and outer state come from "eu"
      start.mutable_round_command()->add_joining_regions("ap");
      start.mutable_round_command()->set_bootstrap_region("eu");
    }
    for (const auto& r : regions) orch.Send(r, start);
    std::map<std::string, v1::RoundReport> reports;
    while (reports.size() < regions.size()) {
      auto r = orch.WaitFor(Body(v1::ControlMessage::kRoundReport), 60s);
      REQUIRE(r);
      if (r->msg.round_report().round() == round && r->msg.round_report().epoch() == epoch) {
        reports[r->region] = r->msg.round_report();
      }
    }
    INFO(reports["eu"].error().message() << " | " << reports["us"].error().message());
    REQUIRE(reports["eu"].ok());
    REQUIRE(reports["us"].ok());
    CHECK(reports["eu"].param_hash() == reports["us"].param_hash());
    CHECK(reports["eu"].val_loss() > 0);
    CHECK(reports["eu"].wan_bytes_sent() > 0);
    return reports;
  };

  std::string previous;
  for (uint32_t round = 1; round <= 2; ++round) {
    auto reports = run_round(round, 1, round == 2);
    CHECK(reports["eu"].param_hash() != previous);
    previous = reports["eu"].param_hash();
    if (round == 2) {
      CHECK(std::filesystem::exists(reports["eu"].checkpoint_path()));
      CHECK(std::filesystem::exists(reports["us"].checkpoint_path()));
    }
    orch.Send("eu", Verdict("job", round, 1, true));
    orch.Send("us", Verdict("job", round, 1, true));
  }
  // Round 3 is aborted (not committed) and re-run in epoch 2 from theta(2).
  run_round(3, 1, false);
  orch.Send("eu", Verdict("job", 3, 1, false));
  orch.Send("us", Verdict("job", 3, 1, false));
  auto rerun = run_round(3, 2, false);
  CHECK(rerun["eu"].param_hash() != previous);
  orch.Send("eu", Verdict("job", 3, 2, true));
  orch.Send("us", Verdict("job", 3, 2, true));

  // /metrics tells what the region did.
  const int port = MetricsPort(dir / "eu-agent.log");
  REQUIRE(port > 0);
  const std::string metrics = longhaul::testing::HttpGet(port, "/metrics").value_or("");
  CHECK(metrics.find("longhaul_region_up{region=\"eu\"} 1") != std::string::npos);
  CHECK(metrics.find("longhaul_region_workers_running{region=\"eu\"} 2") != std::string::npos);
  CHECK(metrics.find("longhaul_region_rounds_total{job=\"job\",region=\"eu\"} 4") != std::string::npos);
  CHECK(metrics.find("longhaul_region_wan_sent_bytes_total") != std::string::npos);

  // A third region joins at round 4 and ends it with the same theta.
  auto c = StartAgent("ap", orch, 2, dir);
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion, "ap"), 10s));
  orch.Send("ap", Wrap(TinyJob("job", "ap", 2, 3, 2)));
  auto ready_ap = orch.WaitFor(Body(v1::ControlMessage::kJobReady, "ap"), 60s);
  REQUIRE(ready_ap);
  ring.push_back(ready_ap->msg.job_ready().endpoint());
  regions.push_back("ap");
  auto joined = run_round(4, 3, false);
  CHECK(joined["ap"].param_hash() == joined["eu"].param_hash());
  CHECK(joined["ap"].param_hash() == joined["us"].param_hash());

  v1::ControlMessage stop;
  stop.mutable_round_command()->set_job_id("job");
  stop.mutable_round_command()->set_kind(v1::RoundCommand::STOP);
  for (const auto& r : regions) orch.Send(r, stop);
  auto idle = orch.WaitFor([](const FakeOrchestrator::Incoming& in) {
    return in.msg.has_heartbeat() && in.region == "eu" && in.msg.heartbeat().running_jobs_size() == 0;
  }, 15s);
  CHECK(idle);

  // A new job restores the round-2 checkpoint (written with 2 workers) into 1 worker.
  auto restore = TinyJob("restored", "eu", 0, 1, 1);
  restore.set_checkpoint_path(CheckpointPathFor(ckpt_dir, "job", "eu", 2));
  orch.Send("eu", Wrap(restore));
  auto ready_r = orch.WaitFor(Body(v1::ControlMessage::kJobReady, "eu"), 60s);
  REQUIRE(ready_r);
  orch.Send("eu", Start("restored", 3, 1, {ready_r->msg.job_ready().endpoint()}));
  auto solo = orch.WaitFor(Body(v1::ControlMessage::kRoundReport, "eu"), 60s);
  REQUIRE(solo);
  CHECK(solo->msg.round_report().ok());

  for (auto* agent : {&a, &b, &c}) {
    agent->Signal(SIGTERM);
    CHECK(agent->Wait(10s) == 0);  // exited with status 0
  }
}

TEST_CASE("region_agent: agent CURVE on the control plane, each launch with a WAN key pair of its own", "[agent]") {
  namespace wt = longhaul::wan_transport;
  const TempDir tmp("agent-curve");
  const auto& dir = tmp.path();
  const auto keys = dir / "keys";
  std::map<std::string, wt::CurveKeyPair> pairs;
  for (const std::string name : {"orchestrator", "eu", "us"}) {
    auto kp = wt::GenerateCurveKeyPair();
    REQUIRE(kp.ok());
    REQUIRE(wt::WriteKeyPair(keys, name, *kp).ok());
    if (name != "orchestrator") REQUIRE(wt::WriteKeyPair(keys / "allowed", name, *kp).ok());
    pairs[name] = *kp;
  }
  for (const auto& e : std::filesystem::directory_iterator(keys / "allowed")) {
    if (e.path().extension() == ".key") std::filesystem::remove(e.path());
  }
  FakeOrchestrator orch(&pairs["orchestrator"], wt::Allowlist::Of({pairs["eu"].public_key, pairs["us"].public_key}));
  // eu's workers reach their agent (hello, reports, rendezvous store) on
  // another address than the default, over CURVE.
  auto a = StartAgent("eu", orch, 2, dir, keys, {"--worker-bind", "127.0.0.2"});
  auto b = StartAgent("us", orch, 2, dir, keys);
  const auto socket_line = a.WaitForLine("worker socket tcp://127.0.0.2:", 10s);
  REQUIRE(socket_line);
  CHECK_THAT(*socket_line, Catch::Contains("(CURVE; a hello must carry its launch's token)"));
  std::map<std::string, v1::PeerEndpoint> endpoints;
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion, "eu"), 10s));
  if (!orch.knows("us")) REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion, "us"), 10s));
  orch.Send("eu", Wrap(TinyJob("job", "eu", 0, 2, 2)));
  orch.Send("us", Wrap(TinyJob("job", "us", 1, 2, 2)));
  while (endpoints.size() < 2) {
    auto ready = orch.WaitFor(Body(v1::ControlMessage::kJobReady), 60s);
    REQUIRE(ready);
    endpoints[ready->region] = ready->msg.job_ready().endpoint();
  }
  // Each launch advertises a key of its own: neither agent's key, not each other's.
  for (const std::string region : {"eu", "us"}) {
    INFO(region);
    CHECK(wt::ValidateZ85Key(endpoints[region].public_key(), "launch key").ok());
    CHECK(endpoints[region].public_key() != pairs["eu"].public_key);
    CHECK(endpoints[region].public_key() != pairs["us"].public_key);
  }
  CHECK(endpoints["eu"].public_key() != endpoints["us"].public_key());
  // The worker's environment holds no key: the launch's comes from the agent's
  // store over the CURVE worker socket; the agent's own never leaves it.
  const auto workers = ChildrenNamed(a.pid(), "longhaul-worker");
  REQUIRE(workers.size() == 2);
  std::ifstream environ_file("/proc/" + std::to_string(workers[0]) + "/environ", std::ios::binary);
  const std::string environ_text((std::istreambuf_iterator<char>(environ_file)), std::istreambuf_iterator<char>());
  CHECK(environ_text.find("LONGHAUL_KEY_FILE") == std::string::npos);
  CHECK(environ_text.find("LONGHAUL_JOB_ID=job") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "eu" / ".launches" / "job" / "launch-1" / "wan.key"));
  CHECK(environ_text.find((keys / "eu.key").string()) == std::string::npos);
  CHECK(environ_text.find(pairs["eu"].secret_key) == std::string::npos);
  CHECK(environ_text.find("LONGHAUL_ALLOWLIST") == std::string::npos);
  CHECK(environ_text.find("LONGHAUL_AGENT_ENDPOINT=tcp://127.0.0.2:") != std::string::npos);
  CHECK(environ_text.find("LONGHAUL_AGENT_PUBLIC_KEY=") != std::string::npos);
  CHECK(environ_text.find(pairs["eu"].public_key) == std::string::npos);  // not the agent's own identity

  // The round runs on the launch keys alone (no WAN allowlist anywhere).
  auto start = Start("job", 1, 1, {endpoints["eu"], endpoints["us"]});
  orch.Send("eu", start);
  orch.Send("us", start);
  std::map<std::string, v1::RoundReport> reports;
  while (reports.size() < 2) {
    auto r = orch.WaitFor(Body(v1::ControlMessage::kRoundReport), 60s);
    REQUIRE(r);
    reports[r->region] = r->msg.round_report();
  }
  INFO(reports["eu"].error().message());
  CHECK(reports["eu"].ok());
  CHECK(reports["eu"].param_hash() == reports["us"].param_hash());
  for (auto* agent : {&a, &b}) {
    agent->Signal(SIGTERM);
    REQUIRE(agent->Wait(10s).has_value());
  }
}

TEST_CASE("region_agent: agent with --wan-rate-mbit puts a link emulator in front of each worker", "[agent]") {
  FakeOrchestrator orch;
  const TempDir tmp("agent-linkem");
  const auto& dir = tmp.path();
  const std::vector<std::string> wan = {"--wan-rate-mbit", "200", "--wan-delay-ms", "2", "--wan-jitter-ms", "1"};
  auto a = StartAgent("eu", orch, 1, dir, {}, wan);
  auto b = StartAgent("us", orch, 1, dir, {}, wan);
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion, "eu"), 10s));
  if (!orch.knows("us")) REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion, "us"), 10s));
  orch.Send("eu", Wrap(TinyJob("job", "eu", 0, 2, 1)));
  orch.Send("us", Wrap(TinyJob("job", "us", 1, 2, 1)));
  std::map<std::string, v1::PeerEndpoint> endpoints;
  while (endpoints.size() < 2) {
    auto ready = orch.WaitFor(Body(v1::ControlMessage::kJobReady), 60s);
    REQUIRE(ready);
    endpoints[ready->region] = ready->msg.job_ready().endpoint();
  }
  CHECK(ChildrenNamed(a.pid(), "longhaul-linkem").size() == 1);
  auto start = Start("job", 1, 1, {endpoints["eu"], endpoints["us"]});
  orch.Send("eu", start);
  orch.Send("us", start);
  std::map<std::string, v1::RoundReport> reports;
  while (reports.size() < 2) {
    auto r = orch.WaitFor(Body(v1::ControlMessage::kRoundReport), 60s);
    REQUIRE(r);
    reports[r->region] = r->msg.round_report();
  }
  INFO(reports["eu"].error().message() << " | " << reports["us"].error().message());
  CHECK(reports["eu"].ok());
  CHECK(reports["eu"].param_hash() == reports["us"].param_hash());
  const auto linkems = ChildrenNamed(a.pid(), "longhaul-linkem");
  for (auto* agent : {&a, &b}) {
    agent->Signal(SIGTERM);
    CHECK(agent->Wait(10s) == 0);  // exited with status 0
  }
  for (pid_t p : linkems) CHECK(::kill(p, 0) != 0);  // stopped with the agent
}

TEST_CASE("region_agent: agent with --run-as and limits runs a job's program as that user in a cgroup, away from "
          "the agent's key, and what it started dies with the job",
          "[agent][security]") {
  SkipUnlessRoot("--run-as");
  namespace wt = longhaul::wan_transport;
  const TempDir tmp("agent-run-as");
  const auto& dir = tmp.path();
  std::filesystem::permissions(dir, std::filesystem::perms(0711));  // the workers' user passes through
  const auto keys = dir / "keys";
  std::map<std::string, wt::CurveKeyPair> pairs;
  for (const std::string name : {"orchestrator", "eu"}) {
    auto kp = wt::GenerateCurveKeyPair();
    REQUIRE(kp.ok());
    REQUIRE(wt::WriteKeyPair(keys, name, *kp).ok());
    pairs[name] = *kp;
  }
  std::filesystem::permissions(keys, std::filesystem::perms(0755));  // only the key file itself is private
  FakeOrchestrator orch(&pairs["orchestrator"], wt::Allowlist::Of({pairs["eu"].public_key}));
  auto agent = StartAgent("eu", orch, 1, dir, keys, {"--run-as", "nobody:nogroup", "--allow-command", "/bin/sh",
                                                   "--worker-memory-max", "512MiB", "--worker-pids-max", "64"});
  REQUIRE(orch.WaitFor(Body(v1::ControlMessage::kRegisterRegion, "eu"), 10s));
  // The program records who it is, tries to read the agent's key, starts a
  // process in the background and keeps running (it never says hello).
  auto a = TinyJob("j-run-as", "eu", 0, 1, 1);
  a.mutable_spec()->clear_model_preset();
  auto* cmd = a.mutable_spec()->mutable_worker()->mutable_command();
  cmd->add_argv("/bin/sh");
  cmd->add_argv("-c");
  cmd->add_argv("id -u > uid.txt; id -G > groups.txt; cat " + (keys / "eu.key").string() +
                " > leak.txt 2>&1; ls .. > list.txt 2>&1; cat /proc/self/cgroup > cgroup.txt; "
                "setsid sleep 300 & echo $! > escaped.pid; sleep 300 & echo $! > bg.tmp; mv bg.tmp bg.pid; exec sleep 300");
  orch.Send("eu", Wrap(a));
  const auto job_dir = dir / "eu" / "j-run-as";
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!std::filesystem::exists(job_dir / "bg.pid") && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);  // polling for the file the program writes last, bounded
  }
  REQUIRE(std::filesystem::exists(job_dir / "bg.pid"));
  auto read = [&](const std::string& name) {
    std::ifstream in(job_dir / name);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  CHECK(read("uid.txt") == "65534\n");
  CHECK(read("groups.txt") == "65534\n");  // no supplementary group of the agent's
  CHECK(read("leak.txt").find("Permission denied") != std::string::npos);
  CHECK(read("leak.txt").find(pairs["eu"].secret_key) == std::string::npos);
  CHECK(read("list.txt").find("Permission denied") != std::string::npos);  // the work root is not listable
  struct stat st {};
  REQUIRE(::stat(job_dir.c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  CHECK((st.st_mode & 07777) == 0700);
  REQUIRE(::stat((dir / "eu").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0711);
  const pid_t background = std::stoi(read("bg.pid"));
  const pid_t escaped = std::stoi(read("escaped.pid"));  // left the worker's process group
  // The launch's cgroup, as the program saw it: /sys/fs/cgroup/pids/... (v1) or /sys/fs/cgroup/... (v2).
  std::filesystem::path cgroup_dir;
  {
    std::istringstream lines(read("cgroup.txt"));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find("longhaul-eu-j-run-as-launch-1") == std::string::npos) continue;
      const auto path = line.substr(line.rfind(':') + 1);
      if (line.find(":pids:") != std::string::npos) cgroup_dir = "/sys/fs/cgroup/pids" + path;
      if (line.rfind("0::", 0) == 0 && cgroup_dir.empty()) cgroup_dir = "/sys/fs/cgroup" + path;
    }
  }
  REQUIRE(!cgroup_dir.empty());
  CHECK(read("cgroup.txt").find("longhaul-eu-j-run-as-launch-1") != std::string::npos);
  {
    std::ifstream max(cgroup_dir / "pids.max");
    std::string v;
    max >> v;
    CHECK(v == "64");
  }
  // The program's last act, `exec sleep 300`, comes after it wrote bg.pid:
  // wait (bounded) for the worker to be that sleep.
  auto workers = ChildrenNamed(agent.pid(), "sleep");
  while (workers.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
    workers = ChildrenNamed(agent.pid(), "sleep");
  }
  REQUIRE(workers.size() == 1);
  std::ifstream status("/proc/" + std::to_string(workers[0]) + "/status");
  const std::string status_text((std::istreambuf_iterator<char>(status)), std::istreambuf_iterator<char>());
  CHECK(status_text.find("NoNewPrivs:\t1") != std::string::npos);

  // Cancel the job: the worker and the process it started in the background end.
  v1::RoundCommand stop;
  stop.set_job_id("j-run-as");
  stop.set_kind(v1::RoundCommand::STOP);
  v1::ControlMessage m;
  *m.mutable_round_command() = stop;
  orch.Send("eu", m);
  REQUIRE(agent.WaitForLine("job j-run-as: all processes stopped", 20s));
  auto state = [](pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = text.rfind(')');
    return paren == std::string::npos || paren + 2 >= text.size() ? std::string() : text.substr(paren + 2, 1);
  };
  for (const pid_t pid : {background, escaped}) {
    INFO(pid);
    const std::string left = state(pid);
    CHECK((left.empty() || left == "Z"));  // gone, or dead and waiting for init to reap it
  }
  const auto removed_by = std::chrono::steady_clock::now() + 10s;
  while (std::filesystem::exists(cgroup_dir) && std::chrono::steady_clock::now() < removed_by) {
    std::this_thread::sleep_for(20ms);  // polling for the agent to remove the launch's cgroup, bounded
  }
  CHECK_FALSE(std::filesystem::exists(cgroup_dir));
  agent.Signal(SIGTERM);
  REQUIRE(agent.Wait(10s).has_value());
}
