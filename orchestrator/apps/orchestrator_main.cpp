// longhaul-orchestrator: control plane. Parses flags and runs the library's
// ControlServer + Orchestrator until SIGINT/SIGTERM.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "longhaul/monitoring/metrics_server.h"
#include "longhaul/orchestrator/control_server.h"
#include "longhaul/orchestrator/endpoint_file.h"
#include "longhaul/orchestrator/metrics.h"
#include "longhaul/orchestrator/orchestrator.h"
#include "longhaul/orchestrator/state_store.h"
#include "longhaul/orchestrator/state_file_guard.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

// --crash-at-write KIND:N:before|after: a write hook that ends the process at
// that write (std::_Exit: no destructor, no flush, as a kill would).
longhaul::Result<longhaul::orchestrator::StateWriteHook> CrashAtWrite(const std::string& spec) {
  const auto a = spec.find(':'), b = spec.rfind(':');
  int n = 0;
  if (a == std::string::npos || a == b || (n = std::atoi(spec.substr(a + 1, b - a - 1).c_str())) < 1 ||
      (spec.substr(b + 1) != "before" && spec.substr(b + 1) != "after"))
    return longhaul::InvalidArgument("--crash-at-write '" + spec + "': expected KIND:N:before|after, N >= 1");
  const std::string kind = spec.substr(0, a);
  const bool after = spec.substr(b + 1) == "after";
  auto seen = std::make_shared<int>(0);
  return longhaul::orchestrator::StateWriteHook(
      [kind, n, after, seen](const longhaul::orchestrator::StateWrite& w, bool committed) {
        if (w.kind != kind) return longhaul::Status::Ok();
        if (!committed) ++*seen;
        if (*seen == n && committed == after) std::_Exit(86);
        return longhaul::Status::Ok();
      });
}

int Fail(const longhaul::Status& s) {
  std::cerr << "longhaul-orchestrator: " << s.ToString() << "\n";
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace longhaul;
  CLI::App app{"longhaul-orchestrator - control plane"};
  std::string bind = "tcp://127.0.0.1:0", state_file = "longhaul-state.sqlite", key_file, allowlist_path;
  std::string metrics_addr = "127.0.0.1:0", metrics_web_config, endpoint_file, checkpoint_dir;
  int heartbeat_ms = 500, heartbeat_misses = 6, round_timeout_s = 600, max_attempts = 5;
  bool insecure = false, init = false;
  std::string log_level = "info";
  app.add_option("--bind", bind, "control endpoint to bind (port 0 picks a free port)");
  app.add_option("--state", state_file, "SQLite state file (WAL); must exist unless --init");
  app.add_flag("--init", init, "create the state file if it is missing or empty (a new deployment)");
  app.add_option("--key", key_file, "orchestrator key pair (.key) for CURVE");
  app.add_option("--allowlist", allowlist_path, "allowed client public keys: a file or a directory of .pub files");
  app.add_option("--metrics", metrics_addr, "host:port of /metrics (port 0 picks a free port)");
  app.add_option("--web-config-file", metrics_web_config,
                 "Prometheus web.yml for /metrics: TLS (tls_server_config) and basic auth (basic_auth_users); "
                 "default plain HTTP (docs/monitoring.md)");
  app.add_option("--endpoint-file", endpoint_file, "write the bound control endpoint and metrics URL here");
  app.add_option("--checkpoint-dir", checkpoint_dir, "where regions write checkpoints (<dir>/<job>)");
  app.add_option("--heartbeat-ms", heartbeat_ms, "heartbeat interval agents are told to use")->check(CLI::Range(10, 60000));
  app.add_option("--heartbeat-misses", heartbeat_misses, "missed heartbeats before a region is down")
      ->check(CLI::Range(1, 1000));
  app.add_option("--round-timeout-s", round_timeout_s, "deadline of one round attempt")->check(CLI::Range(1, 86400));
  int collective_timeout_s = 0, job_idle_timeout_s = 0;
  // Fault injection for the crash-point tests, hidden from --help: the process
  // dies (_Exit, as if killed) at the N-th state write of a kind, before or
  // after its COMMIT. Never used in production.
  std::string crash_at_write;
  app.add_option("--crash-at-write", crash_at_write, "KIND:N:before|after (tests only)")->group("");
  app.add_option("--collective-timeout-s", collective_timeout_s,
                 "deadline of one cross-region collective (0 = the smaller of 60 s and half the round timeout)")
      ->check(CLI::Range(0, 86400));
  app.add_option("--job-idle-timeout-s", job_idle_timeout_s,
                 "a job with no committed round for this long fails (0 = the larger of 3600 s and twice the round "
                 "timeout)")
      ->check(CLI::Range(0, 864000));
  app.add_option("--max-round-attempts", max_attempts, "failed attempts of a round before the job fails")
      ->check(CLI::Range(1, 1000));
  int max_jobs_per_key = 100;
  size_t max_spec_bytes_per_key = size_t{16} << 20;
  app.add_option("--max-jobs-per-key", max_jobs_per_key, "jobs not yet ended one user key may have")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-spec-bytes-per-key", max_spec_bytes_per_key,
                 "bytes of job specs one user key's jobs not yet ended may hold")
      ->check(CLI::Range(size_t{1} << 10, size_t{1} << 34));
  app.add_flag("--insecure", insecure, "turn CURVE encryption and the allowlist off (testing only)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));

  orchestrator::ControlServerOptions server_options;
  server_options.bind = bind;
  server_options.insecure = insecure;
  if (!insecure) {
    if (key_file.empty() || allowlist_path.empty())
      return Fail(InvalidArgument("--key and --allowlist are required unless --insecure is given"));
    auto keys = wan_transport::LoadKeyPair(key_file);
    if (!keys.ok()) return Fail(keys.status());
    auto allow = wan_transport::Allowlist::Load(allowlist_path);
    if (!allow.ok()) return Fail(allow.status());
    server_options.server_keys = *keys;
    server_options.allowlist = *allow;
  }
  orchestrator::OrchestratorOptions options;
  options.timeouts.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  options.timeouts.heartbeat_misses = heartbeat_misses;
  // The one owner of the timeout hierarchy: agents and workers get it with
  // every registration reply and assignment (validated in Orchestrator::Create).
  options.timeouts.round = std::chrono::seconds(round_timeout_s);
  options.timeouts.collective = collective_timeout_s > 0 ? std::chrono::seconds(collective_timeout_s)
                                                         : std::min(options.timeouts.collective, options.timeouts.round / 2);
  options.timeouts.link_io = std::min(options.timeouts.link_io, options.timeouts.collective / 2);
  options.timeouts.job_idle = job_idle_timeout_s > 0 ? std::chrono::seconds(job_idle_timeout_s)
                                                     : std::max(options.timeouts.job_idle, options.timeouts.round * 2);
  options.checkpoint_dir = checkpoint_dir;
  options.max_round_attempts = max_attempts;
  options.max_active_jobs_per_key = max_jobs_per_key;
  options.max_active_spec_bytes_per_key = max_spec_bytes_per_key;

  // One orchestrator per state file, and never a silent fresh start on a file
  // that is missing, empty or damaged (state_file_guard.h).
  auto lock = orchestrator::StateFileLock::Acquire(state_file, /*create=*/init);
  if (!lock.ok()) return Fail(lock.status());
  if (Status s = orchestrator::CheckStateFileBeforeOpen(state_file, init); !s.ok()) return Fail(s);
  std::error_code size_ec;
  const bool fresh = !std::filesystem::exists(state_file) || std::filesystem::file_size(state_file, size_ec) == 0;
  auto store = orchestrator::StateStore::Open(state_file, /*create=*/fresh && init);
  if (!store.ok()) return Fail(store.status());
  if (!crash_at_write.empty()) {
    auto hook = CrashAtWrite(crash_at_write);
    if (!hook.ok()) return Fail(hook.status());
    (*store)->SetWriteHook(std::move(*hook));
  }
  auto metrics_server =
      monitoring::MetricsServer::Start({.bind_address = metrics_addr, .web_config_file = metrics_web_config});
  if (!metrics_server.ok()) return Fail(metrics_server.status());
  orchestrator::OrchestratorMetrics metrics((*metrics_server)->registry());
  auto server = orchestrator::ControlServer::Start(server_options);
  if (!server.ok()) return Fail(server.status());
  orchestrator::ControlServer* srv = server->get();
  auto orch = orchestrator::Orchestrator::Create(store->get(), SystemClock::Instance(), options, &metrics,
                                                 [srv](const std::string& id, const v1::ControlMessage& m) {
                                                   srv->Send(id, m);
                                                 });
  if (!orch.ok()) return Fail(orch.status());

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  spdlog::info("listening on {} ({}), metrics {}, state {}", srv->endpoint(), insecure ? "INSECURE" : "CURVE",
               (*metrics_server)->url(), state_file);
  if (!endpoint_file.empty()) {
    Status w = orchestrator::WriteEndpointFile(
        endpoint_file, {srv->endpoint(), (*metrics_server)->url(), insecure ? "" : server_options.server_keys.public_key});
    if (!w.ok()) return Fail(w);
  }
  Status run = srv->Run(**orch, g_stop, &metrics);
  if (!run.ok()) return Fail(run);
  spdlog::info("stopped");
  return 0;
}
