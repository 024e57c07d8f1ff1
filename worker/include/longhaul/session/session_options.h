// SessionOptions: how a worker process reaches its agent and its job, and the
// one table of environment variables that carries them.
//
// The agent starts every worker (the built-in longhaul-worker and a user's own
// command alike) with these variables set; the worker library reads them back.
// Both sides use the functions below, so the names live in one place:
//
//   LONGHAUL_AGENT_ENDPOINT        tcp://host:port of the agent's worker socket
//   LONGHAUL_AGENT_PUBLIC_KEY      its CURVE public key (Z85); unset when the agent runs --insecure
//   LONGHAUL_JOB_ID                the job; its assignment (and this launch's WAN key
//                                  pair, unless insecure) come from the agent's store
//   LONGHAUL_REGION                region name
//   LONGHAUL_RANK                  this worker's rank in the region (= RANK)
//   LONGHAUL_WAN_HOST              host the WAN listener and the intra-region group bind on;
//                                  "auto": the address on this host's route to the agent
//   LONGHAUL_INSECURE              "1": no CURVE on the WAN
//   LONGHAUL_COLLECTIVE_TIMEOUT_MS deadline of one collective (timeouts.h)
//   LONGHAUL_LINK_IO_TIMEOUT_MS    deadline of one WAN chunk send/receive
//   LONGHAUL_VALIDATION_BATCHES    held-out batches for val_loss (built-in trainer)
//   LONGHAUL_WORKER_TOKEN          this launch's secret for this rank, sent in the hello
//
// plus torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT, so torch.distributed's env:// rendezvous works inside the region.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"

namespace longhaul::session {

// The two variables that differ between the workers of one launch (others
// that launch workers per task, like longhaul-task under srun, set them).
inline constexpr const char* kRankVariable = "LONGHAUL_RANK";
inline constexpr const char* kWorkerTokenVariable = "LONGHAUL_WORKER_TOKEN";

// What the agent puts in a launch's rendezvous store for its workers (they
// read it before anything else, on any host): the JobAssignment (binary
// protobuf) and the launch's WAN secret key (Z85; absent when insecure).
inline constexpr const char* kAssignmentStoreKey = "longhaul/assignment";
inline constexpr const char* kWanSecretStoreKey = "longhaul/wan-secret-key";

struct SessionOptions {
  std::string agent_endpoint;
  std::string agent_public_key;  // the worker socket's CURVE key; empty = plain (--insecure)
  std::string job_id;
  std::string region;
  int rank = 0;
  std::string wan_host = "127.0.0.1";
  bool insecure = false;
  Duration collective_timeout{std::chrono::seconds(60)};
  Duration link_io{std::chrono::seconds(10)};
  int validation_batches = 4;
  std::string worker_token;  // proves to the agent that the hello comes from the process it launched
  // Benchmarks and tests only: each inner step takes this percentage of its
  // compute time (200: the region computes at half speed), the rest slept and
  // counted as compute. 100 = none.
  int compute_throttle_percent = 100;
  // The program can keep its parameters and gradients in a GPU's memory (the
  // built-in trainer of a CUDA build): where the region agrees on NCCL, Open
  // forms an NCCL group for them too (Session::device_group). Set by the
  // program, not read from the environment.
  bool parameters_on_device = false;
  // Names the first missing or bad field.
  Status Validate() const;
};

// What the agent adds to a worker's environment: the LONGHAUL_* table above
// and the torchrun variables (world_size workers per region, master_port free
// on master_addr for torch.distributed's store).
std::map<std::string, std::string> WorkerEnvironment(const SessionOptions& options, int world_size,
                                                     const std::string& master_addr, int master_port);

// Reads the LONGHAUL_* variables of this process; kFailedPrecondition naming
// the variable when one is missing ("not started by a longhaul agent?").
Result<SessionOptions> SessionOptionsFromEnvironment();

}  // namespace longhaul::session
