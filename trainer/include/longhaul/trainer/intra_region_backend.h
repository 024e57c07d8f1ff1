// Which collectives a region's workers use among themselves: the job's
// `intra_region` setting (auto | nccl | gloo) resolved against what every worker
// of the region has.
//
//   gloo  Gloo over TCP, always possible.
//   nccl  NCCL on the workers' GPUs, one each; refused, naming the reason, when
//         this build has no NCCL, when a worker sees no CUDA device, when a
//         machine runs more of the region's workers than it has devices (NCCL
//         refuses two ranks on one GPU), or when the program's parameters are in
//         host memory (NCCL's collectives take device buffers).
//   auto  NCCL when nccl would be accepted, else Gloo with nccl's reason.
//
// The decision is a pure function of every rank's facts, so the workers agree
// on it by exchanging their facts through the region's rendezvous store
// (AgreeIntraRegionBackend) and each computing the same answer.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/trainer/intra_region.h"

namespace longhaul::trainer {

// The job spec's names for these are proto/wire_enums.h's (v1::IntraRegion).
enum class IntraRegionSetting { kAuto, kNccl, kGloo };
enum class IntraRegionBackend { kGloo, kNccl };

// What one worker brings to the decision.
struct WorkerFacts {
  int cuda_devices = 0;            // CUDA devices this worker's process sees
  bool nccl_built = false;         // this binary was built with CUDA and NCCL
  bool parameters_on_device = false;  // its program keeps parameters and gradients in device memory
  std::string host;                // its machine (the hostname; no whitespace)
  // The UUIDs of those devices in ordinal order (no whitespace or commas); empty
  // where unknown, then "<host>#<ordinal>" stands for each. Two ranks that see
  // the same device must not both use it: under Slurm's GPU binding each task
  // sees its own device as ordinal 0, without it every task sees all of them.
  std::vector<std::string> gpus;
};

struct BackendChoice {
  IntraRegionBackend backend = IntraRegionBackend::kGloo;
  std::string reason;  // why this backend, for logs, status and metrics
  int device = -1;     // nccl, from AgreeIntraRegionBackend: this rank's CUDA device
};

// The CUDA device (ordinal) of each rank under nccl, one device per rank (the
// workers of a machine use one GPU each): ranks in order take the first device
// they see that is free; a rank that sees only taken ones gets one by moving
// lower ranks to other devices they see (augmenting paths), so every rank gets
// a device whenever such an assignment exists. -1 for a rank left without.
// Where taking the first free device suffices, that is the answer.
std::vector<int> DevicesOfRanks(std::span<const WorkerFacts> facts);
// DevicesOfRanks(facts)[rank]; -1 for a rank outside facts.
int DeviceOfRank(std::span<const WorkerFacts> facts, int rank);

// facts[r] is rank r's. kFailedPrecondition when the setting is nccl and a rank
// cannot take part (the message names the rank and what it lacks);
// kInvalidArgument for an empty region.
Result<BackendChoice> ChooseIntraRegionBackend(IntraRegionSetting setting, std::span<const WorkerFacts> facts);

// This process's facts: devices from the CUDA runtime (0 without CUDA or a
// driver), nccl_built from the build, host from gethostname;
// parameters_on_device as the caller says.
WorkerFacts LocalWorkerFacts(bool parameters_on_device);

// Every rank sets its facts under "<prefix>/worker-facts/<rank>", reads every
// other rank's (waiting up to `timeout` for each) and returns the choice, the
// same on every rank but for its device (nccl: DeviceOfRank). Errors name the
// rank whose facts were missing or malformed.
Result<BackendChoice> AgreeIntraRegionBackend(RendezvousStore& store, const std::string& prefix, int rank, int size,
                                              IntraRegionSetting setting, const WorkerFacts& mine,
                                              std::chrono::milliseconds timeout);

}  // namespace longhaul::trainer
