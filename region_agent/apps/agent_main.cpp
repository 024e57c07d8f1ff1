// longhaul-agent: the per-region daemon (see region_agent/agent.h).
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "longhaul/region_agent/agent.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"longhaul-agent - per-region daemon: registers with the orchestrator, runs and supervises workers"};
  longhaul::region_agent::AgentOptions o;
  std::string work_dir, key, pub, bin_dir;
  app.add_option("--region", o.region, "this region's name")->required();
  app.add_option("--orchestrator", o.orchestrator, "orchestrator endpoint, tcp://HOST:PORT")->required();
  app.add_option("--orchestrator-public-key", pub, "orchestrator's CURVE public key file (.pub)");
  app.add_option("--key", key,
                 "this region's CURVE key pair file (.key): the agent's identity towards the orchestrator. "
                 "Workers never read it: each launch gets a WAN key pair of its own");
  app.add_flag("--insecure", o.insecure, "turn CURVE off everywhere (control and WAN)");
  app.add_option("--workers", o.workers, "worker slots of this region")->default_val(1);
  app.add_option("--data-host", o.data_host, "host the workers' WAN endpoints bind on")->default_val("127.0.0.1");
  app.add_option("--worker-bind", o.worker_bind,
                 "address of this host the workers' control socket and rendezvous store bind on (CURVE unless "
                 "--insecure)")
      ->default_val("127.0.0.1");
  app.add_option("--work-dir", work_dir, "folder for job files, worker logs and rendezvous")->required();
  app.add_option("--metrics", o.metrics_bind, "HOST:PORT of /metrics (port 0 = any)")->default_val("127.0.0.1:0");
  app.add_option("--web-config-file", o.metrics_web_config,
                 "Prometheus web.yml for /metrics: TLS and basic auth; default plain HTTP (docs/monitoring.md)");
  app.add_option("--wan-rate-mbit", o.wan_rate_mbit, "emulate this region's WAN link: rate (0 = unlimited; a link emulator runs when rate, delay or jitter is set)");
  app.add_option("--wan-delay-ms", o.wan_delay_ms, "emulated one-way delay");
  app.add_option("--wan-jitter-ms", o.wan_jitter_ms, "emulated delay jitter");
  app.add_option("--validation-batches", o.validation_batches, "held-out batches per round for val_loss")
      ->default_val(4);
  app.add_option("--compute-throttle-percent", o.compute_throttle_percent,
                 "benchmarks and tests: workers take this % of each inner step's compute (200 = half speed)")
      ->default_val(100);
  std::vector<std::string> allow_commands, allow_dirs;
  app.add_option("--allow-command", allow_commands,
                 "a program jobs may run as their worker (worker.command[0], resolved like exec; repeatable). "
                 "Without any, jobs that bring their own program are refused");
  app.add_option("--allow-working-dir", allow_dirs,
                 "a folder (or its subfolders) a job's worker.working_dir may name (repeatable); default: only "
                 "the job's own folder");
  std::string run_as;
  app.add_option("--worker-memory-max", o.worker_limits.memory_bytes,
                 "memory limit of one launch (all workers of a job in this region), e.g. 64GiB; with it (or "
                 "--worker-pids-max) each launch runs in a cgroup of its own, which also ends every process it started")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--worker-pids-max", o.worker_limits.pids, "most processes and threads of one launch");
  app.add_option("--run-as", run_as,
                 "USER[:GROUP] every worker runs as (names or numbers; the agent must start as root): the job's "
                 "program then cannot read the agent's key or work root");
  app.add_option("--bin-dir", bin_dir, "where longhaul-worker and longhaul-linkem are (default: next to this binary)");
  std::string launcher = "local";
  app.add_option("--launcher", launcher,
                 "how workers start: local (forked by this agent) or slurm (one srun step per launch, one task per "
                 "worker; srun, squeue and scancel on PATH)")
      ->default_val("local");
  app.add_option("--slurm-nodes", o.launcher.slurm.nodes, "slurm: srun --nodes")->default_val(1);
  app.add_option("--slurm-ntasks-per-node", o.launcher.slurm.ntasks_per_node,
                 "slurm: srun --ntasks-per-node (0 = Slurm's choice)");
  app.add_option("--slurm-partition", o.launcher.slurm.partition, "slurm: srun --partition (default: the cluster's)");
  app.add_option("--slurm-account", o.launcher.slurm.account, "slurm: srun --account");
  app.add_option("--slurm-time", o.launcher.slurm.time_limit, "slurm: srun --time (default: the partition's limit)");
  int heartbeat_ms = 0, collective_s = 0, start_s = 0, round_s = 0;
  app.add_option("--heartbeat-interval-ms", heartbeat_ms, "heartbeat interval until the orchestrator sets one");
  app.add_option("--collective-timeout-s", collective_s,
                 "deadline of one cross-region collective, for jobs whose assignment carries no timeouts (an older "
                 "orchestrator's; the orchestrator's timeouts serve otherwise)");
  app.add_option("--worker-start-timeout-s", start_s, "launch -> all workers ready");
  app.add_option("--round-timeout-s", round_s,
                 "a worker silent for this long while a round runs is hung, for jobs whose assignment carries no "
                 "timeouts (the orchestrator's round timeout serves otherwise)");
  CLI11_PARSE(app, argc, argv);
  o.work_dir = work_dir;
  o.key_file = key;
  o.orchestrator_public_key = pub;
  o.bin_dir = bin_dir;
  auto kind = longhaul::region_agent::ParseLauncherKind(launcher);
  if (!kind.ok()) {
    std::cerr << "longhaul-agent: --launcher: " << kind.status().message() << "\n";
    return 2;
  }
  o.launcher.kind = *kind;
  if (!run_as.empty()) {
    auto who = longhaul::region_agent::ParseRunAs(run_as);
    if (!who.ok()) {
      std::cerr << "longhaul-agent: " << who.status().message() << "\n";
      return 2;
    }
    o.run_as = *who;
  }
  o.commands.allowed_programs.assign(allow_commands.begin(), allow_commands.end());
  o.commands.allowed_working_dirs.assign(allow_dirs.begin(), allow_dirs.end());
  if (heartbeat_ms > 0) o.timeouts.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  if (collective_s > 0) o.timeouts.collective = std::chrono::seconds(collective_s);
  if (start_s > 0) o.worker_start_timeout = std::chrono::seconds(start_s);
  if (round_s > 0) o.timeouts.round = std::chrono::seconds(round_s);

  auto agent = longhaul::region_agent::Agent::Create(o);
  if (!agent.ok()) {
    std::cerr << "longhaul-agent: " << agent.status().ToString() << "\n";
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Tests and scripts read these lines to find the ports.
  std::printf("metrics on %s\n", (*agent)->metrics_url().c_str());
  std::printf("agent %s running\n", o.region.c_str());
  std::fflush(stdout);
  auto status = (*agent)->Run(g_stop);
  if (!status.ok()) {
    std::cerr << "longhaul-agent: " << status.ToString() << "\n";
    return 1;
  }
  return 0;
}
