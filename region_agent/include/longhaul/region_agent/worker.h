// The `longhaul-worker` process: one worker of one job in one region.
//
// Start-up: read the assignment the agent wrote, build data, the intra-region
// group (Gloo FileStore rendezvous in the folder the agent gave), the inner
// trainer and the RegionReplica, restore a checkpoint if asked, bind the WAN
// port, then say WorkerHello to the agent (or say why it could not start, and
// exit 2). Then serve the agent: START runs a round (RegionReplica::Run over the
// round's WAN group) and answers a RoundReport; RoundVerdict commits or rolls
// back; ABORT rolls back; STOP exits 0.
#pragma once

#include <filesystem>
#include <string>

#include "longhaul/common/timeouts.h"

namespace longhaul::region_agent {

struct WorkerOptions {
  std::string agent_endpoint;            // tcp://127.0.0.1:port of the agent's ROUTER
  std::filesystem::path assignment_file; // JobAssignment, binary protobuf
  int rank = 0;
  std::string region;
  std::filesystem::path store_dir;       // Gloo FileStore folder (fresh per launch)
  std::string wan_host = "127.0.0.1";
  bool insecure = false;
  std::string key_file;
  std::string allowlist;
  Duration collective_timeout{std::chrono::seconds(60)};
  int validation_batches = 4;
};

// Returns the process exit code.
int RunWorker(const WorkerOptions& options);

// Where a region's checkpoint of `round` goes.
std::filesystem::path CheckpointPath(const std::filesystem::path& dir, const std::string& job_id,
                                     const std::string& region, uint32_t round);

}  // namespace longhaul::region_agent
