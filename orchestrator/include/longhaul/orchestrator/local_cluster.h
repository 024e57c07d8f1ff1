// LocalCluster: a whole longhaul deployment on one machine, made of the real
// binaries: one longhaul-orchestrator (with a SQLite state file) and one
// longhaul-agent per region, every region's WAN endpoints behind
// longhaul-linkem links with the region's rate, delay and jitter (or each
// region in a network namespace of its own, --netns). Keys and
// allowlists are generated as in production (CURVE everywhere). `longhaul
// demo` and the end-to-end benchmarks (bench/convergence, bench/utilisation)
// run their jobs on it. Every process is stopped, and the work directory
// removed unless kept, when the cluster is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator {

struct LocalRegion {
  std::string name;
  double rate_mbit = 100;
  double delay_ms = 20;  // one way
  double jitter_ms = 1;
  int compute_throttle_percent = 100;  // benchmarks and tests: 200 = this region computes at half speed
};

struct LocalClusterOptions {
  std::vector<LocalRegion> regions;
  uint32_t workers_per_region = 1;
  std::string bin_dir;              // where longhaul-orchestrator / -agent / -worker / -linkem live
  bool wan_emulation = true;        // false: plain loopback, no longhaul-linkem links
  // Each region on a host of its own (root): a network namespace with its own
  // address, joined through a bridge, its link's rate shaped by tc tbf and its
  // delay and jitter by longhaul-linkem (demo/region_netns.h). Not detached.
  bool netns = false;
  bool keep_work_dir = false;
  std::string work_dir_prefix = "/tmp/longhaul-cluster-";
  // Set: the cluster lives in this folder (created; it must not exist or be
  // empty) instead of a new one from work_dir_prefix.
  std::string work_dir;
  // The processes outlive this object once Detach() is called (`longhaul up`).
  bool detached = false;
  // Programs jobs may run as their workers and folders they may run in (each
  // agent's --allow-command / --allow-working-dir); none: the built-in trainer only.
  std::vector<std::string> allow_commands;
  std::vector<std::string> allow_working_dirs;
  // A small model's all-reduce takes well under a second even over an emulated
  // WAN; a lost chunk should cost seconds, not the default minute.
  std::chrono::seconds collective_timeout{15};
  std::chrono::seconds round_timeout{120};
  // Held-out batches of each round's validation loss (each agent's
  // --validation-batches); 0 = the agent's default, a noisy estimate.
  int validation_batches = 0;
  const std::atomic<bool>* interrupted = nullptr;  // set (e.g. by SIGINT): waits return kCancelled
  std::function<void(const std::string&)> say;     // progress lines ("agent eu-west: ..."), may be empty
};

class LocalCluster {
 public:
  // Starts the orchestrator and the agents and waits (bounded) until every
  // region is registered and up.
  static Result<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  Result<std::string> Submit(const v1::JobSpec& spec);
  Result<v1::JobStatus> JobStatus(const std::string& job_id);
  // The regions as the orchestrator knows them (state, links measured).
  Result<v1::ListRegionsReply> Regions();
  // Polls the job every `poll` until it ends (succeeded, failed, cancelled);
  // `on_status` sees every status read. Fails when the job is not over within
  // `timeout`, when a process of the cluster exits, or when interrupted.
  Result<v1::JobStatus> WaitForJob(const std::string& job_id, std::chrono::seconds timeout,
                                   std::chrono::milliseconds poll,
                                   const std::function<void(const v1::JobStatus&)>& on_status = {});

  const std::filesystem::path& work_dir() const { return work_; }
  std::filesystem::path state_file() const { return work_ / "state.sqlite"; }
  std::filesystem::path log_dir() const { return work_ / "logs"; }
  const std::string& metrics_url() const { return metrics_url_; }
  const std::string& control_endpoint() const { return control_endpoint_; }
  std::filesystem::path manifest_file() const { return work_ / "up.processes"; }

  // Leaves every process running (the cluster was started detached), records
  // them in manifest_file() for StopManifest, and keeps the work directory.
  Status Detach();

 private:
  struct Impl;
  explicit LocalCluster(std::unique_ptr<Impl> impl);
  Status Boot();
  Status WaitForRegions(std::chrono::seconds timeout);
  Status CheckAlive();
  void Say(const std::string& line) const;

  std::unique_ptr<Impl> impl_;
  std::filesystem::path work_;
  std::string metrics_url_;
  std::string control_endpoint_;
  bool detached_ = false;
};

// The entropy rate (nats/byte) of the spec's synthetic Markov data: the lowest
// validation loss any model can reach. 0 when the data is not synthetic.
double SyntheticLossFloor(const v1::JobSpec& spec);

}  // namespace longhaul::orchestrator
