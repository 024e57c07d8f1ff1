// JobConfig: a JobAssignment turned into the typed options of every piece a
// worker builds (model, data, inner and outer optimizers, codec, schedule), and
// the checks the agent runs before launching anything.
//
// proto3 cannot tell "unset" from zero, so a zero in the spec means "the
// default" for fields where zero is not a meaningful value (learning rates,
// batch size, H, block size); each default is named below.
//
// A job runs either the built-in trainer (`model`, from worker.builtin or the
// older model_preset) or the user's own program (`command`); a command job may
// come without data, since the program can bring its own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/outer_optimizer.h"
#include "longhaul/sync_policies/schedule.h"
#include "longhaul/trainer/data.h"
#include "longhaul/trainer/intra_region_backend.h"
#include "longhaul/trainer/model.h"
#include "longhaul/trainer/optimizer.h"
#include "longhaul/sync_policies/moment_sync.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::worker {

struct JobConfig {
  // The user's program, started once per worker (spec.worker.command).
  struct CommandWorker {
    std::vector<std::string> argv;           // non-empty; argv[0] is looked up on PATH
    std::map<std::string, std::string> env;  // added to the worker's environment; no reserved names
    std::string working_dir;                 // "" = the job's folder under the agent's work dir
  };

  std::string job_id;
  std::string region;
  uint32_t region_index = 0;
  uint32_t region_count = 1;
  uint32_t workers = 1;             // workers per region
  uint32_t rounds = 1;
  uint64_t seed = 0;                // model init seed
  uint32_t checkpoint_interval = 0;
  uint32_t exit_grace_s = 60;       // worker.exit_grace_s: after the job ends, before SIGTERM
  int batch_size = 16;              // sequences per worker per inner step
  std::optional<CommandWorker> command;  // set: the user's program is the worker; unset: the built-in trainer
  trainer::ModelConfig model;            // built-in trainer only: preset, then non-zero worker dims ("custom")
  bool has_data = true;                  // false: a command job without a data section (`data` left at defaults)
  trainer::DataOptions data;
  // As the spec gives them: the orchestrator filled the defaults table at admission.
  trainer::AdamWOptions inner;
  sync_policies::MomentSyncOptions moment_sync;  // inner.*_moment_sync_rounds
  sync_policies::OuterOptimizerOptions outer;
  sync_policies::CompressionOptions compression;
  sync_policies::ScheduleOptions schedule;     // kind "" -> diloco; H 0 -> 50
  trainer::IntraRegionSetting intra_region = trainer::IntraRegionSetting::kAuto;
};

// Between the spec's intra_region (v1::IntraRegion) and the trainer's enums.
// kInvalidArgument for UNSPECIFIED (the orchestrator fills every default at
// admission) or an unknown value.
Result<trainer::IntraRegionSetting> IntraRegionFromWire(v1::IntraRegion intra_region);
v1::IntraRegion IntraRegionToWire(trainer::IntraRegionBackend backend);

// Translates and validates; errors name the field and the bad value. Does not
// touch the file system (see AdmitJob). With a command worker model_preset is
// ignored (the orchestrator refuses specs that set both).
Result<JobConfig> ParseJobAssignment(const v1::JobAssignment& assignment);

// The agent's admission checks before launching workers: the assignment parses,
// is meant for `region`, asks for at most `capacity_workers` workers, and its data
// file exists and is readable. kResourceExhausted for too many workers,
// kNotFound for a missing data file, kInvalidArgument for the rest.
Result<JobConfig> AdmitJob(const v1::JobAssignment& assignment, const std::string& region, int capacity_workers);

// A job id is used in file names and rendezvous prefixes: [A-Za-z0-9._-]{1,64}.
Status ValidateJobId(const std::string& job_id);

}  // namespace longhaul::worker
