// RegionJob: one job as this region's agent runs it — its worker processes
// (and link emulators), their start-up handshake, the round in flight and the
// reports collected for it. The agent's controller owns one per job and does
// all socket I/O; RegionJob only keeps state and processes.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/region_agent/child_process.h"
#include "longhaul/region_agent/launch_cgroup.h"
#include "longhaul/region_agent/launch_store.h"
#include "longhaul/region_agent/run_as.h"
#include "longhaul/region_agent/worker_launcher.h"
#include "longhaul/session/local_address.h"
#include "longhaul/worker/job_config.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::region_agent {

// A longhaul-linkem goes in front of each worker's WAN endpoint when any of
// these is set (rate 0 = unlimited: a delay alone, the rate shaped elsewhere).
inline bool EmulatesWan(double rate_mbit, double delay_ms, double jitter_ms) {
  return rate_mbit > 0 || delay_ms > 0 || jitter_ms > 0;
}

struct JobLaunchOptions {
  std::filesystem::path worker_binary;
  std::filesystem::path linkem_binary;
  std::filesystem::path task_binary;    // longhaul-task (slurm launches)
  LauncherOptions launcher;             // local processes, or one srun step
  std::filesystem::path job_dir;        // work_dir/<job_id>; created; the workers' (their cwd, logs, rendezvous)
  std::filesystem::path launch_root;    // the agent's own folder for this job's launches (one launch-N each: its name)
  std::string agent_endpoint;           // tcp://host:port of the agent's worker socket
  std::string agent_public_key;         // its CURVE public key ("" when insecure)
  std::string region;
  std::string data_host;                // "auto": each worker its own host's address (session/local_address.h)
  std::string agent_host;               // this host's address the workers reach (the worker socket's)
  // Where the agent's own listeners for the launch go (link emulators,
  // torch.distributed's MASTER_ADDR): the data host, or with "auto" the agent's.
  const std::string& own_host() const { return data_host == session::kAutoHost ? agent_host : data_host; }
  bool insecure = false;                // else each launch gets its own WAN key pair
  std::optional<RunAs> run_as;          // workers' OS user; the job and launch folders become theirs
  const CgroupRoot* cgroups = nullptr;  // set: each launch in a cgroup of its own, with these limits
  CgroupLimits limits;
  double wan_rate_mbit = 0;
  double wan_delay_ms = 0;
  double wan_jitter_ms = 0;
  uint64_t launch_id = 0;               // unique per launch: fresh Gloo store folder
  // The job's timeouts (the assignment's, else the agent's own): workers get
  // collective and link I/O, the agent fails a round that outlives `round`.
  Timeouts timeouts;
  int validation_batches = 4;
  int compute_throttle_percent = 100;  // benchmarks and tests: a slower region
  Duration start_timeout{std::chrono::seconds(60)};
  // Prepended to PYTHONPATH of command workers: where the longhaul Python
  // package lives (empty = leave PYTHONPATH alone).
  std::filesystem::path python_path;
};

class RegionJob {
 public:
  enum class Phase { kLaunching, kReady, kStopping };

  // Writes the assignment next to the workers' logs and spawns the workers.
  static Result<std::unique_ptr<RegionJob>> Launch(const worker::JobConfig& config, const v1::JobAssignment& assignment,
                                                   const JobLaunchOptions& options);
  ~RegionJob();

  const std::string& job_id() const { return config_.job_id; }
  const worker::JobConfig& config() const { return config_; }
  const v1::JobAssignment& assignment() const { return assignment_; }
  Phase phase() const { return phase_; }
  int workers() const { return static_cast<int>(config_.workers); }
  int workers_running();
  bool launch_expired() const { return phase_ == Phase::kLaunching && std::chrono::steady_clock::now() > start_deadline_; }
  // Why a job failed in this region, and the failed worker's last output kept
  // apart: the output goes to the job's owner only (v1::Error.worker_output).
  struct Failure {
    std::string what;    // "job j worker 1 (pid 42) killed by signal 9 (SIGKILL)"
    std::string output;  // "worker 1:\n<its last lines>", or empty
  };
  // "job j: worker(s) 1, 3 did not report ready within 60 s".
  Failure MissingHellos() const;

  // Whether the hello carries the token this launch gave its rank (a hello
  // without it comes from some other local process: dropped, not an error).
  bool Authenticates(uint32_t rank, const std::string& token) const;
  // The launch's rendezvous store: a request with this launch's token for its rank.
  v1::StoreReply OnStore(const v1::StoreRequest& request);
  // Start-up handshake; an error hello or a bad rank comes back as the error.
  Status OnHello(const std::string& routing_id, const v1::WorkerHello& hello);
  bool all_hellos() const;
  // Starts the link emulators (if configured) and returns the advertised endpoints.
  Result<v1::PeerEndpoint> MakeReady();
  const std::optional<v1::PeerEndpoint>& endpoint() const { return endpoint_; }
  uint64_t num_params() const { return num_params_; }
  uint32_t restored_round() const { return restored_round_; }
  // Worker 0's hash of the parameters it starts from (WorkerHello.param_hash).
  const std::string& start_param_hash() const { return start_param_hash_; }
  // What the workers' intra-region group runs (NCCL or GLOO; unset before their hellos) and why.
  v1::IntraRegion intra_region() const { return intra_region_; }
  const std::string& intra_region_reason() const { return intra_region_reason_; }
  double loss_floor() const { return loss_floor_; }

  // First worker (or link emulator) that ended while not stopping.
  std::optional<Failure> CheckProcesses();
  // "worker 1:\n" and the last lines of its log (stdout and stderr); empty when it wrote none.
  std::string WorkerOutput(int rank) const;

  // How a STOP ends the workers. kTerminate (cancel, failure, shutdown): SIGTERM
  // now, SIGKILL to what is left after `grace`. kLetFinish (the job completed):
  // the workers run their own code to its end (a final evaluation, a save); the
  // ones still running after `grace` get SIGTERM, then SIGKILL `kill_grace`
  // later. Link emulators get SIGTERM once the workers are gone. A kTerminate
  // while letting finish escalates at once.
  enum class StopMode { kTerminate, kLetFinish };
  void BeginStop(Duration grace, StopMode mode = StopMode::kTerminate,
                 Duration kill_grace = std::chrono::seconds(3));
  // Escalates per the mode's deadlines; true once every process is gone.
  bool FinishStop();

  void BeginRound(const v1::RoundCommand& start);
  // A worker that owes a round report (a START was relayed to it) and has sent
  // none for longer than `limit`, across aborted retries too: a hung worker
  // ("worker(s) 1 sent no report within 600 s (hung?)").
  std::optional<Failure> RoundOverdue(Duration limit) const;
  const Timeouts& timeouts() const { return options_.timeouts; }
  // A committed verdict of the job's last round: workers may now exit by
  // themselves (status 0) without that being a crash.
  void OnVerdict(const v1::RoundVerdict& verdict);
  void EndRound() { current_.reset(); reports_.clear(); }
  const std::optional<v1::RoundCommand>& current_round() const { return current_; }
  // Adds a worker's report; returns the region's report once all are in. Reports
  // for another (round, epoch) than the one in flight are dropped (stale).
  std::optional<v1::RoundReport> OnWorkerReport(int rank, const v1::RoundReport& report);

  const std::vector<std::string>& routing_ids() const { return routing_ids_; }
  std::filesystem::path log_file(int rank) const;

 private:
  RegionJob() = default;
  Status SpawnWorkers();
  SpawnOptions WorkerSpawn(int rank, int master_port) const;
  // What was started for the workers ended (not while stopping): the failure.
  Failure ProcessFailure(const LaunchedProcess& process) const;
  Result<std::string> StartLinkem(const std::string& worker_endpoint);

  worker::JobConfig config_;
  v1::JobAssignment assignment_;
  JobLaunchOptions options_;
  void Terminate(Duration kill_grace);

  Phase phase_ = Phase::kLaunching;
  Deadline start_deadline_{};
  Deadline stop_deadline_{};       // SIGKILL what is left after this (once terminated_)
  Deadline terminate_deadline_{};  // kLetFinish: SIGTERM after this
  Duration kill_grace_{};
  bool terminated_ = false;         // SIGTERM sent
  std::unique_ptr<WorkerLauncher> launcher_;
  std::vector<LaunchedProcess> workers_;     // one per worker (local), or the srun of all (slurm)
  std::vector<ChildProcess> linkems_;
  std::vector<std::string> routing_ids_;     // "" until the worker's hello
  std::vector<std::string> tokens_;          // per rank, new for every launch
  std::vector<std::string> wan_endpoints_;
  std::string wan_public_key_;               // this launch's (empty when insecure)
  std::filesystem::path launch_dir_;         // launch_root/launch-N: names the launch (Slurm job, cgroup)
  std::unique_ptr<LaunchCgroup> cgroup_;     // every process of this launch's workers (when configured)
  LaunchStore store_;                        // the workers' rendezvous
  std::optional<v1::PeerEndpoint> endpoint_;
  uint64_t num_params_ = 0;
  double loss_floor_ = 0;
  uint32_t restored_round_ = 0;  // of the checkpoint the workers restored (all the same)
  std::string start_param_hash_;
  // From the first hello; every later one must name the same backend.
  std::optional<uint32_t> intra_region_rank_;
  v1::IntraRegion intra_region_ = v1::INTRA_REGION_UNSPECIFIED;
  std::string intra_region_reason_;
  static constexpr size_t kMaxIntraRegionReasonBytes = 256;
  std::optional<v1::RoundCommand> current_;
  // Per worker: since when it owes a round report (nullopt: it owes none).
  std::vector<std::optional<std::chrono::steady_clock::time_point>> owes_report_since_;
  std::map<int, v1::RoundReport> reports_;
  bool last_round_committed_ = false;
};

}  // namespace longhaul::region_agent
