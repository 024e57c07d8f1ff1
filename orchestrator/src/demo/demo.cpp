// `longhaul demo`: orchestrator + 3 agents behind WAN-like links on loopback,
// a DiLoCo+int8 job, the fully synchronous baseline, and a comparison table.
#include "longhaul/orchestrator/demo.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "child_processes.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/control_client.h"
#include "longhaul/orchestrator/endpoint_file.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/state_store.h"
#include "longhaul/trainer/markov_chain.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::orchestrator {
namespace {

namespace fs = std::filesystem;
std::atomic<bool> g_interrupted{false};
void OnSignal(int) { g_interrupted.store(true); }

struct DemoResult {
  std::string policy;
  v1::JobStatus status;
};

// Keys: one per agent, one for the CLI, one for the orchestrator. The control
// allowlist admits the agents and the CLI; the WAN allowlist admits the agents.
Status MakeKeys(const fs::path& dir, const DemoOptions& o) {
  for (const auto& sub : {"control-allow", "wan-allow"}) fs::create_directories(dir / sub);
  auto gen = [&](const std::string& name, bool control, bool wan) -> Status {
    LONGHAUL_ASSIGN_OR_RETURN(auto keys, wan_transport::GenerateCurveKeyPair());
    LONGHAUL_RETURN_IF_ERROR(wan_transport::WriteKeyPair(dir, name, keys));
    // Allowlist folders hold public keys only, named <region>.pub (workers look
    // their peers' keys up by region name there).
    std::error_code ec;
    if (control) fs::copy_file(dir / (name + ".pub"), dir / "control-allow" / (name + ".pub"), ec);
    if (!ec && wan) fs::copy_file(dir / (name + ".pub"), dir / "wan-allow" / (name + ".pub"), ec);
    if (ec) return Internal("cannot write the allowlist entry of " + name + ": " + ec.message());
    return Status::Ok();
  };
  LONGHAUL_RETURN_IF_ERROR(gen("orchestrator", false, false));
  LONGHAUL_RETURN_IF_ERROR(gen("cli", true, false));
  for (const auto& r : o.regions) LONGHAUL_RETURN_IF_ERROR(gen(r.name, true, true));
  return Status::Ok();
}

std::string Num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

v1::JobSpec DemoJob(const DemoOptions& o, bool sync_baseline) {
  v1::JobSpec s = DefaultJobSpec();
  s.set_name(sync_baseline ? "demo-sync" : "demo-diloco-int8");
  s.clear_regions();
  for (const auto& r : o.regions) s.add_regions(r.name);
  s.set_region_count(static_cast<uint32_t>(o.regions.size()));
  s.set_min_regions(static_cast<uint32_t>(o.regions.size()) > 1 ? 2 : 1);
  s.set_workers_per_region(o.workers_per_region);
  s.set_rounds(o.rounds);
  s.mutable_sync()->set_inner_steps(o.inner_steps);
  // Settings under which the tiny model visibly approaches the loss floor within
  // a few hundred steps (cf. the trainer's own convergence test).
  s.mutable_inner()->set_lr(2e-2);
  s.mutable_inner()->set_warmup_steps(10);
  s.mutable_inner()->set_batch_size(16);
  if (sync_baseline) {
    // Gradients averaged across regions every step: the same number of steps,
    // uncompressed, the way data-parallel training would run over the WAN.
    s.mutable_sync()->set_kind("sync");
    s.mutable_compression()->set_codec(v1::CODEC_FP32);
  }
  return s;
}

// Agent flags: the common ones after the optional WAN emulation ones.
std::vector<std::string> Concat(const std::vector<std::string>& extra, std::vector<std::string> base) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

double LossFloor(const v1::JobSpec& spec) {
  if (!spec.data().has_synthetic()) return 0;
  const auto& d = spec.data().synthetic();
  auto chain = trainer::MarkovChain::Random(d.seed(), d.order(), d.branching());
  if (!chain.ok()) return 0;
  auto h = chain->EntropyRate();
  return h.ok() ? *h : 0;
}

class Demo {
 public:
  explicit Demo(const DemoOptions& o) : o_(o) {}
  ~Demo() {
    children_.StopAll(std::chrono::seconds(5));
    if (!work_.empty() && !o_.keep_work_dir) {
      std::error_code ec;
      fs::remove_all(work_, ec);
    }
  }

  int Run() {
    Status s = Setup();
    if (!s.ok()) return Fail(s);
    std::vector<DemoResult> results;
    for (bool sync : {false, true}) {
      if (sync && o_.skip_sync_baseline) continue;
      auto r = RunJob(DemoJob(o_, sync));
      if (!r.ok()) return Fail(r.status());
      results.push_back({sync ? "fully synchronous (fp32)" : "DiLoCo H=" + std::to_string(o_.inner_steps) + " int8",
                         *r});
    }
    PrintTable(results);
    for (const auto& r : results)
      if (r.status.state() != "succeeded") return kExitFailed;
    return kExitOk;
  }

 private:
  int Fail(const Status& s) {
    std::cerr << "longhaul demo: " << s.message() << "\n";
    if (!work_.empty()) {
      std::cerr << "logs: " << (work_ / "logs").string() << (o_.keep_work_dir ? "" : " (rerun with --keep to keep them)")
                << "\n";
    }
    return s.code() == StatusCode::kCancelled ? 130 : kExitFailed;
  }

  std::string Bin(const std::string& name) const { return (fs::path(o_.bin_dir) / name).string(); }

  Status Setup() {
    char tmpl[] = "/tmp/longhaul-demo-XXXXXX";
    if (!::mkdtemp(tmpl)) return Internal("cannot create a temporary directory");
    work_ = tmpl;
    fs::create_directories(work_ / "logs");
    LONGHAUL_RETURN_IF_ERROR(MakeKeys(work_ / "keys", o_));
    const fs::path keys = work_ / "keys";
    auto orch = children_.Start(
        "orchestrator",
        {Bin("longhaul-orchestrator"), "--bind", "tcp://127.0.0.1:0", "--state", (work_ / "state.sqlite").string(),
         "--key", (keys / "orchestrator.key").string(), "--allowlist", (keys / "control-allow").string(), "--metrics",
         "127.0.0.1:0", "--endpoint-file", (work_ / "orchestrator.endpoint").string(), "--checkpoint-dir",
         (work_ / "checkpoints").string(), "--heartbeat-ms", "250", "--heartbeat-misses", "8", "--round-timeout-s",
         "120"},
        (work_ / "logs" / "orchestrator.log").string());
    if (!orch.ok()) return orch.status();
    LONGHAUL_ASSIGN_OR_RETURN(auto ep, WaitForEndpointFile(work_ / "orchestrator.endpoint", std::chrono::seconds(15)));
    endpoint_ = ep.control;
    Say("orchestrator on " + ep.control + ", metrics " + ep.metrics);
    for (const auto& r : o_.regions) {
      std::vector<std::string> wan;
      if (o_.wan_emulation)
        wan = {"--wan-rate-mbit", Num(r.rate_mbit), "--wan-delay-ms", Num(r.delay_ms), "--wan-jitter-ms", Num(r.jitter_ms)};
      auto agent = children_.Start(
          "agent " + r.name,
          Concat(wan, {Bin("longhaul-agent"), "--region", r.name, "--orchestrator", ep.control, "--orchestrator-public-key",
           (keys / "orchestrator.pub").string(), "--key", (keys / (r.name + ".key")).string(), "--workers",
           std::to_string(o_.workers_per_region), "--data-host", "127.0.0.1", "--work-dir", (work_ / r.name).string(),
           "--metrics", "127.0.0.1:0", "--allowlist", (keys / "wan-allow").string(), "--bin-dir", o_.bin_dir,
                       // A tiny model's all-reduce takes well under a second even over the
                       // emulated WAN; a lost chunk should cost seconds, not the default minute.
                       "--collective-timeout-s", "15"}),
          (work_ / "logs" / (r.name + ".log")).string());
      if (!agent.ok()) return agent.status();
      Say("agent " + r.name + (o_.wan_emulation ? ": WAN " + Num(r.rate_mbit) + " Mbit/s, " + Num(r.delay_ms) +
                                                       " ms delay, " + Num(r.jitter_ms) + " ms jitter"
                                                 : ": plain loopback"));
    }
    ControlClientOptions co;
    co.endpoint = ep.control;
    LONGHAUL_ASSIGN_OR_RETURN(co.own_keys, wan_transport::LoadKeyPair(keys / "cli.key"));
    co.server_public_key = ep.public_key;
    LONGHAUL_ASSIGN_OR_RETURN(client_, ControlClient::Connect(co));
    return WaitForRegions();
  }

  Status CheckAlive() {
    if (g_interrupted.load()) return Cancelled("interrupted; stopping every process the demo started");
    const std::string gone = children_.Exited();
    if (!gone.empty()) return Unavailable(gone + " (see its log)");
    return Status::Ok();
  }

  Status WaitForRegions() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      LONGHAUL_RETURN_IF_ERROR(CheckAlive());
      v1::ControlMessage req;
      req.mutable_list_regions();
      LONGHAUL_ASSIGN_OR_RETURN(auto reply, client_->Call(req));
      size_t up = 0;
      for (const auto& r : reply.list_regions_reply().regions()) up += r.state() == "up" ? 1 : 0;
      if (up >= o_.regions.size()) {
        Say(std::to_string(up) + " regions up");
        return Status::Ok();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return DeadlineExceeded("the region agents did not register within 60 s");
  }

  Result<v1::JobStatus> RunJob(const v1::JobSpec& spec) {
    v1::ControlMessage req;
    *req.mutable_submit_job()->mutable_spec() = spec;
    LONGHAUL_ASSIGN_OR_RETURN(auto reply, client_->Call(req));
    const std::string id = reply.submit_job_reply().job_id();
    Say("submitted " + id + " (" + spec.name() + ")");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o_.job_timeout_s);
    const bool tty = !o_.json && ::isatty(STDOUT_FILENO);
    while (true) {
      LONGHAUL_RETURN_IF_ERROR(CheckAlive());
      v1::ControlMessage st;
      st.mutable_job_status_request()->set_job_id(id);
      LONGHAUL_ASSIGN_OR_RETURN(auto s, client_->Call(st));
      v1::JobStatus status = s.job_status();
      if (status.loss_floor() <= 0) status.set_loss_floor(LossFloor(spec));
      if (!o_.json) std::cout << (tty ? "\033[H\033[2J" : "") << RenderJobStatus(status, tty) << std::flush;
      if (IsTerminalJobState(status.state())) return status;
      if (std::chrono::steady_clock::now() > deadline)
        return DeadlineExceeded(id + " did not finish within " + std::to_string(o_.job_timeout_s) + " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 500 : 2000));
    }
  }

  void PrintTable(const std::vector<DemoResult>& results) {
    if (o_.json) {
      std::cout << "[";
      for (size_t i = 0; i < results.size(); ++i)
        std::cout << (i ? "," : "") << "{\"policy\":\"" << results[i].policy << "\",\"status\":" << ToJson(results[i].status)
                  << "}";
      std::cout << "]\n";
      return;
    }
    std::printf("\n%-26s %-10s %-10s %-10s %-12s %-10s\n", "policy", "state", "val loss", "floor", "WAN bytes", "wall");
    for (const auto& r : results)
      std::printf("%-26s %-10s %-10.4f %-10.4f %-12s %-10s\n", r.policy.c_str(), r.status.state().c_str(),
                  r.status.val_loss(), r.status.loss_floor(), HumanBytes(static_cast<double>(r.status.wan_bytes())).c_str(),
                  HumanSeconds(r.status.wall_seconds()).c_str());
    if (results.size() == 2 && results[0].status.wan_bytes() > 0)
      std::printf("\nDiLoCo sent %.1fx fewer WAN bytes than the synchronous baseline.\n",
                  static_cast<double>(results[1].status.wan_bytes()) / static_cast<double>(results[0].status.wan_bytes()));
  }

  void Say(const std::string& line) {
    if (!o_.json) std::cout << "demo: " << line << "\n" << std::flush;
  }

  DemoOptions o_;
  fs::path work_;
  ChildProcesses children_;
  std::string endpoint_;
  std::unique_ptr<ControlClient> client_;
};

}  // namespace

std::string DefaultBinDir(const char* argv0) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) self = fs::absolute(argv0, ec);
  return self.parent_path().string();
}

int RunDemo(const DemoOptions& options) {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  Demo demo(options);
  return demo.Run();
}

}  // namespace longhaul::orchestrator
