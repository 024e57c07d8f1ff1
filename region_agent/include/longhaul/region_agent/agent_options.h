// AgentOptions: everything one `longhaul-agent` is configured with, filled from
// flags in apps/agent_main.cpp and validated once here.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/region_agent/command_policy.h"
#include "longhaul/region_agent/launch_cgroup.h"
#include "longhaul/region_agent/run_as.h"
#include "longhaul/region_agent/worker_launcher.h"
#include "longhaul/session/local_address.h"

namespace longhaul::region_agent {

struct AgentOptions {
  std::string region;                          // this region's name
  std::string orchestrator;                    // "tcp://host:port"
  std::filesystem::path orchestrator_public_key;  // orchestrator's .pub (CURVE server key)
  std::filesystem::path key_file;              // this region's .key: the agent's control-plane identity only
                                               // (workers get a key pair made for their launch)
  bool insecure = false;                       // CURVE off everywhere (explicit opt-out)
  int workers = 1;                             // worker slots of this region
  // Host the workers' WAN endpoints (and intra-region group) bind on; "auto":
  // each worker the address of its own host on the route to this agent (a
  // region over several hosts: --launcher slurm --slurm-nodes N).
  std::string data_host = "127.0.0.1";
  // Address of this host the workers' control socket (hello, reports, the
  // rendezvous store) binds on: workers on other hosts need one they can reach.
  // CURVE-encrypted unless --insecure; every request carries its launch's token.
  std::string worker_bind = "127.0.0.1";
  std::filesystem::path work_dir;              // per-job folders, logs, rendezvous stores
  std::string metrics_bind = "127.0.0.1:0";
  std::string metrics_web_config;  // Prometheus web.yml for /metrics (TLS, basic auth); "" = plain HTTP
  // WAN link emulation: a rate, delay or jitter starts one longhaul-linkem per
  // worker in front of its WAN endpoint and advertises the linkem's address
  // instead (rate 0 = unlimited).
  double wan_rate_mbit = 0;
  double wan_delay_ms = 0;
  double wan_jitter_ms = 0;
  // Held-out batches each region's rank-0 worker evaluates per round for
  // val_loss. The default 4 is cheap but a noisy estimate (about 4% between two
  // parameter vectors on the tiny preset); runs that compare losses raise it.
  // A job's last round evaluates kFinalValidationFactor (16) times as many.
  int validation_batches = 4;
  // Benchmarks and tests only: this region's workers take this percentage of
  // each inner step's compute time (200: half speed; session_options.h).
  int compute_throttle_percent = 100;
  std::filesystem::path bin_dir;               // longhaul-worker, longhaul-linkem; empty = next to this binary
  Timeouts timeouts;
  Duration worker_start_timeout{std::chrono::seconds(60)};  // launch -> every WorkerHello
  Duration worker_stop_grace{std::chrono::seconds(3)};      // STOP/SIGTERM -> SIGKILL
  // How long a crash keeps the region's heartbeat unhealthy (a new assignment
  // clears it sooner): long enough for the orchestrator to notice, short enough
  // that the region is scheduled again.
  Duration unhealthy_hold{std::chrono::seconds(10)};
  // Which users' programs (worker.command) this region runs: none unless allowed.
  CommandPolicy commands;
  // The OS user every worker runs as (--run-as); unset = the agent's own user.
  std::optional<RunAs> run_as;
  // Per launch (all workers of one job in this region): set = a cgroup per
  // launch with these limits, which also ends every process the job started.
  CgroupLimits worker_limits;
  // How workers start: forked here (local), or as one srun step per launch (slurm).
  LauncherOptions launcher;

  // Workers on other hosts could work with this agent: they bind on their own
  // address (--data-host auto) and reach a worker socket that is not loopback.
  bool workers_may_be_remote() const {
    return data_host == session::kAutoHost && worker_bind.rfind("127.", 0) != 0;
  }

  // Names the first bad field and its value.
  Status Validate() const;
};

}  // namespace longhaul::region_agent
