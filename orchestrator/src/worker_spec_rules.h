// The rules a job's `worker` section must follow, in one place: the YAML reader
// applies them item by item (adding the line), ValidateJobSpec applies them to
// specs from the wire. A command worker's environment may not set the variables
// the agent gives every worker (RANK, MASTER_ADDR, LONGHAUL_*...): a job that
// overrode them would join the wrong rendezvous or reach the wrong agent. Sizes
// come from job_spec_limits.h.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "job_spec_limits.h"
#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator::worker_rules {

// Each returns kInvalidArgument naming the field ("worker.command[2]",
// "worker.env.RANK") and the rule it breaks.
Status CheckArg(size_t index, std::string_view arg);
Status CheckEnv(std::string_view name, std::string_view value);
Status CheckWorkingDir(std::string_view dir);

// Built-in trainer: preset tiny|small; each dimension in the range the trainer
// accepts (trainer::ModelConfig::Validate), 0 meaning the preset's.
Status CheckPreset(const char* field, std::string_view preset);
Status CheckBuiltinDim(std::string_view name, uint32_t value);  // name: context | embed | hidden | layers
Status CheckBuiltinDims(const v1::BuiltinWorker& b);

inline constexpr uint32_t kMaxExitGraceS = 3600;

// The whole section (argv, env and working_dir, or preset and dimensions, and
// exit_grace_s) and its agreement with JobSpec.model_preset.
Status CheckWorker(const v1::JobSpec& spec);

// True when the job runs the user's program rather than the built-in trainer.
inline bool IsCommandWorker(const v1::JobSpec& spec) { return spec.has_worker() && spec.worker().has_command(); }

}  // namespace longhaul::orchestrator::worker_rules
