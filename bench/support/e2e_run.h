// End-to-end benchmark runs: a job spec submitted to a LocalCluster (the real
// orchestrator, agents, workers and linkem links), waited for, and its
// committed rounds read back from the orchestrator's SQLite state file. Shared
// by bench/convergence and bench/utilisation.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "longhaul/orchestrator/local_cluster.h"
#include "longhaul/orchestrator/state_store.h"

namespace longhaul::bench {

struct E2eRun {
  v1::JobStatus status;                               // final status (state, val loss, WAN bytes, wall)
  std::vector<orchestrator::CommittedRound> rounds;  // in round order
};

// Runs `spec` to its end (bounded by `timeout`); a job that does not succeed is
// an error carrying its reason.
Result<E2eRun> RunJob(orchestrator::LocalCluster& cluster, const v1::JobSpec& spec, std::chrono::seconds timeout,
                      std::chrono::milliseconds poll = std::chrono::milliseconds(250));

// Options for a benchmark's cluster: the first `regions` BenchRegions, binaries
// in `bin_dir`, work directory /tmp/longhaul-bench-<name>-*, progress on stderr.
orchestrator::LocalClusterOptions BenchClusterOptions(size_t regions, const std::string& name,
                                                      const std::string& bin_dir);

// The job runs in exactly these regions, all of them required.
void SetRegions(v1::JobSpec& spec, const std::vector<orchestrator::LocalRegion>& regions);

// DefaultJobSpec for the built-in trainer at `preset` (both spellings:
// DefaultJobSpec names tiny in worker.preset) on exactly `regions`.
v1::JobSpec BuiltinJobSpec(const std::string& name, const std::string& preset,
                           const std::vector<orchestrator::LocalRegion>& regions);

// The four regions the benchmarks use, with WAN-like links of different speed
// and distance (rate Mbit/s, one-way delay ms, jitter ms); the first n.
std::vector<orchestrator::LocalRegion> BenchRegions(size_t n);

}  // namespace longhaul::bench
