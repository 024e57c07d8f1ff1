// `longhaul demo`: the README's main command. On one machine it starts an
// orchestrator and three region agents on loopback whose WAN endpoints sit
// behind longhaul-linkem links with WAN-like rate and delay, runs a DiLoCo+int8
// job and the fully synchronous baseline the same way, shows live progress,
// (with --example pytorch the workers are examples/pytorch/train.py instead of
// the built-in trainer),
// and prints a table (final validation loss, the data's loss floor, WAN bytes,
// wall time). Every process it starts is stopped and its temporary directory
// removed on exit, Ctrl-C and SIGTERM included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace longhaul::orchestrator {

struct DemoRegion {
  std::string name;
  double rate_mbit = 100;
  double delay_ms = 20;
  double jitter_ms = 1;
};

struct DemoOptions {
  std::vector<DemoRegion> regions = {{"eu-west", 100, 20, 1}, {"us-east", 50, 40, 2}, {"ap-south", 200, 60, 3}};
  uint32_t rounds = 0;        // 0: the job's own (30 for the built-in trainer)
  uint32_t inner_steps = 0;   // H; 0: the job's own (20 for the built-in trainer)
  // "" runs the built-in trainer; "pytorch" runs examples/pytorch (a PyTorch
  // script as every region's worker, its job spec from job.yaml there).
  std::string example;
  std::string examples_dir;   // default: the source tree's examples/
  uint32_t workers_per_region = 1;
  std::string bin_dir;        // where longhaul-orchestrator / -agent / -worker / -linkem live
  bool keep_work_dir = false;
  bool skip_sync_baseline = false;
  bool json = false;
  bool wan_emulation = true;  // false: plain loopback, no longhaul-linkem links
  bool netns = false;         // each region in a network namespace of its own (root; LocalClusterOptions::netns)
  int job_timeout_s = 300;    // per job; the demo gives up (and cleans up) after this
};

// The directory holding the running binary (for finding its siblings).
std::string DefaultBinDir(const char* argv0);

// Returns a process exit code (0 when both jobs succeeded).
int RunDemo(const DemoOptions& options);

}  // namespace longhaul::orchestrator
