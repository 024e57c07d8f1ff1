// Job specs: YAML <-> longhaul.v1.JobSpec.
//
// A job spec is parsed once, here, into a JobSpec with every default filled in,
// and validated once. Errors name the field and the YAML line ("job.yaml line 7:
// field 'rounds' must be an unsigned integer, got 'ten'"); unknown fields are
// errors, not warnings, because a typo ("inner_step") silently ignored would run
// the wrong experiment. Every string and list has a size limit
// (src/job_spec_limits.h). docs/job-spec.md documents every field and limit.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator {

// A spec of 10 rounds with every default of the one table filled
// (longhaul/proto/job_defaults.h: tiny preset, synthetic data, 3 regions,
// DiLoCo H=20, Nesterov 0.7/0.9, int8 blocks of 256...).
v1::JobSpec DefaultJobSpec();

// Parses YAML text of at most 1 MiB holding one document; `source` names it in
// errors (usually the file name). Duplicate keys are errors naming both lines.
Result<v1::JobSpec> ParseJobSpecYaml(std::string_view yaml, std::string_view source = "job spec");
// Reads a job file: a regular file of at most 1 MiB (a FIFO, device or directory
// is refused without blocking on it). kNotFound if it does not exist, else
// kInvalidArgument naming the file and the reason.
Result<std::string> ReadJobFile(const std::filesystem::path& path);
Result<v1::JobSpec> LoadJobSpecFile(const std::filesystem::path& path);

// Range and consistency checks (also applied by the orchestrator to specs that
// arrive over the wire, which may not come from this parser).
Status ValidateJobSpec(const v1::JobSpec& spec);

// Number of regions a job needs to start (explicit list length or region_count).
uint32_t RequiredRegions(const v1::JobSpec& spec);

}  // namespace longhaul::orchestrator
