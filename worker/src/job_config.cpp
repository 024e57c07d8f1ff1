#include "longhaul/worker/job_config.h"

#include "longhaul/common/environment_names.h"
#include "longhaul/proto/wire_enums.h"

#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

namespace longhaul::worker {
namespace {

Status ParseData(const v1::DataSpec& spec, JobConfig& job) {
  if (spec.has_synthetic()) {
    const auto& s = spec.synthetic();
    job.data.kind = "synthetic";
    job.data.seed = s.seed();
    job.data.branching = s.branching();
    job.data.order = s.order();
    job.data.non_iid = s.non_iid();
  } else if (spec.has_text_file()) {
    const auto& t = spec.text_file();
    if (t.path().empty()) return InvalidArgument("spec.data.text_file.path is empty");
    job.data.kind = "text";
    job.data.text_path = t.path();
    job.data.validation_fraction = t.validation_fraction();
  } else {
    return InvalidArgument("spec.data: no data source (need synthetic or text_file)");
  }
  return job.data.Validate().WithContext("spec.data");
}

Status ParseInner(const v1::InnerOptimizer& in, uint32_t rounds, JobConfig& job) {
  if (in.name() != "adamw") {
    return InvalidArgument("spec.inner.name: unknown inner optimizer '" + in.name() + "' (known: adamw)");
  }
  job.inner.lr = static_cast<float>(in.lr());
  job.inner.weight_decay = static_cast<float>(in.weight_decay());
  job.inner.beta1 = static_cast<float>(in.beta1());
  job.inner.beta2 = static_cast<float>(in.beta2());
  job.inner.warmup_steps = in.warmup_steps();
  job.moment_sync.first_moment_sync_rounds = in.first_moment_sync_rounds();
  job.moment_sync.second_moment_sync_rounds = in.second_moment_sync_rounds();
  job.batch_size = static_cast<int>(in.batch_size());
  if (job.batch_size < 1 || job.batch_size > 65536) {
    return InvalidArgument("spec.inner.batch_size must be in [1, 65536], got " + std::to_string(job.batch_size));
  }
  job.inner.total_steps = std::max<uint64_t>(1, uint64_t{rounds} * job.schedule.inner_steps);
  LONGHAUL_RETURN_IF_ERROR(job.moment_sync.Validate().WithContext("spec.inner"));
  return job.inner.Validate().WithContext("spec.inner");
}

Status ParseOuter(const v1::OuterOptimizer& out, JobConfig& job) {
  job.outer.name = out.name();
  job.outer.lr = static_cast<float>(out.lr());
  job.outer.momentum = static_cast<float>(out.momentum());
  job.outer.total_rounds = job.rounds;
  job.outer.warmup_rounds = out.warmup_rounds();
  auto decay = sync_policies::LrDecayFromName(out.lr_decay());
  if (!decay.ok()) return decay.status().WithContext("spec.outer.lr_decay");
  job.outer.decay = *decay;
  job.outer.final_lr_fraction = static_cast<float>(out.final_lr_fraction());
  job.outer.momentum_warmup_rounds = out.momentum_warmup_rounds();
  job.outer.momentum_restart_rounds = out.momentum_restart_rounds();
  return job.outer.Validate().WithContext("spec.outer");
}

Status ParseCommand(const v1::CommandWorker& c, JobConfig& job) {
  if (c.argv_size() == 0) return InvalidArgument("spec.worker.command is empty");
  JobConfig::CommandWorker cmd;
  for (int i = 0; i < c.argv_size(); ++i) {
    if (c.argv(i).empty() || c.argv(i).find('\0') != std::string::npos)
      return InvalidArgument("spec.worker.command[" + std::to_string(i) + "] is empty or contains a NUL byte");
    cmd.argv.push_back(c.argv(i));
  }
  for (const auto& [name, value] : c.env()) {
    if (!IsEnvironmentName(name))
      return InvalidArgument("spec.worker.env: '" + name.substr(0, 32) + "' is not a variable name");
    if (IsReservedEnvironmentName(name))
      return InvalidArgument("spec.worker.env." + name + " is reserved: the agent sets it for every worker");
    if (IsLoaderEnvironmentName(name))
      return InvalidArgument("spec.worker.env." + name + " changes how programs are loaded or interpreted and is refused");
    if (value.find('\0') != std::string::npos)
      return InvalidArgument("spec.worker.env." + name + " contains a NUL byte");
    cmd.env[name] = value;
  }
  if (c.working_dir().find('\0') != std::string::npos)
    return InvalidArgument("spec.worker.working_dir contains a NUL byte");
  cmd.working_dir = c.working_dir();
  job.command = std::move(cmd);
  return Status::Ok();
}

// The preset (worker.preset, else the older model_preset, else tiny), then each
// non-zero dimension of spec.worker, validated one at a time so that an error
// names the field that broke the model.
Status ParseBuiltin(const v1::JobSpec& spec, JobConfig& job) {
  const v1::BuiltinWorker& b = spec.worker().builtin();  // the default instance when unset
  if (!b.preset().empty() && !spec.model_preset().empty() && b.preset() != spec.model_preset()) {
    return InvalidArgument("spec.worker.preset '" + b.preset() + "' disagrees with spec.model_preset '" +
                           spec.model_preset() + "'");
  }
  const std::string& preset = !b.preset().empty() ? b.preset() : spec.model_preset();
  auto model = trainer::ModelPreset(preset);
  if (!model.ok()) return model.status().WithContext(b.preset().empty() ? "spec.model_preset" : "spec.worker.preset");
  job.model = *model;
  struct Dim {
    const char* field;
    uint32_t value;
    int* member;
  };
  const Dim dims[] = {{"context", b.context(), &job.model.context},
                      {"embed", b.embed(), &job.model.embed_dim},
                      {"hidden", b.hidden(), &job.model.hidden_dim},
                      {"layers", b.layers(), &job.model.hidden_layers}};
  for (const auto& [field, value, member] : dims) {
    if (value == 0) continue;
    const std::string name = std::string("spec.worker.") + field;
    if (value > static_cast<uint32_t>(std::numeric_limits<int>::max()))
      return InvalidArgument(name + ": " + std::to_string(value) + " is out of range");
    *member = static_cast<int>(value);
    job.model.preset = "custom";
    LONGHAUL_RETURN_IF_ERROR(job.model.Validate().WithContext(name));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateJobId(const std::string& job_id) {
  if (job_id.empty() || job_id.size() > 64) {
    return InvalidArgument("job_id must have 1..64 characters, got " + std::to_string(job_id.size()));
  }
  for (char c : job_id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return InvalidArgument("job_id '" + job_id + "': only letters, digits, '-', '_' and '.' are allowed");
    }
  }
  if (job_id == "." || job_id == "..") return InvalidArgument("job_id '" + job_id + "' is not a valid name");
  return Status::Ok();
}

Result<trainer::IntraRegionSetting> IntraRegionFromWire(v1::IntraRegion intra_region) {
  switch (intra_region) {
    case v1::INTRA_REGION_AUTO:
      return trainer::IntraRegionSetting::kAuto;
    case v1::INTRA_REGION_NCCL:
      return trainer::IntraRegionSetting::kNccl;
    case v1::INTRA_REGION_GLOO:
      return trainer::IntraRegionSetting::kGloo;
    case v1::INTRA_REGION_UNSPECIFIED:
      return InvalidArgument("intra_region is unset (the orchestrator fills every default at admission)");
    default:
      return InvalidArgument("intra_region: unknown value " + std::to_string(static_cast<int>(intra_region)));
  }
}

v1::IntraRegion IntraRegionToWire(trainer::IntraRegionBackend backend) {
  return backend == trainer::IntraRegionBackend::kNccl ? v1::INTRA_REGION_NCCL : v1::INTRA_REGION_GLOO;
}

Result<JobConfig> ParseJobAssignment(const v1::JobAssignment& a) {
  LONGHAUL_RETURN_IF_ERROR(ValidateJobId(a.job_id()));
  if (!a.has_spec()) return InvalidArgument("assignment has no spec");
  const v1::JobSpec& spec = a.spec();
  JobConfig job;
  job.job_id = a.job_id();
  job.region = a.region();
  job.region_index = a.region_index();
  job.region_count = spec.regions_size() > 0 ? static_cast<uint32_t>(spec.regions_size()) : spec.region_count();
  if (job.region_count == 0) return InvalidArgument("spec.region_count must be > 0");
  if (job.region_index >= job.region_count) {
    return InvalidArgument("region_index " + std::to_string(job.region_index) + " is out of range for " +
                           std::to_string(job.region_count) + " regions");
  }
  if (spec.workers_per_region() == 0) return InvalidArgument("spec.workers_per_region must be > 0");
  job.workers = spec.workers_per_region();
  if (spec.rounds() == 0) return InvalidArgument("spec.rounds must be > 0");
  job.rounds = spec.rounds();
  job.seed = spec.seed();
  job.checkpoint_interval = spec.checkpoint_interval();
  job.exit_grace_s = spec.worker().exit_grace_s();

  const bool is_command = spec.has_worker() && spec.worker().has_command();
  if (is_command) {
    LONGHAUL_RETURN_IF_ERROR(ParseCommand(spec.worker().command(), job));
  } else {
    LONGHAUL_RETURN_IF_ERROR(ParseBuiltin(spec, job));
  }

  // The spec is complete (the orchestrator filled the defaults table at
  // admission): every value is taken as it is, 0 included, and validated.
  const auto& sync = spec.sync();
  auto kind = proto::SyncKindOf(sync);
  if (!kind.ok()) return kind.status().WithContext("spec");
  job.schedule.kind = *kind;
  job.schedule.inner_steps = sync.inner_steps();
  job.schedule.fragments = sync.fragments();
  job.schedule.overlap_steps = sync.overlap_steps();
  job.schedule.mixing_alpha = sync.mixing_alpha();
  LONGHAUL_RETURN_IF_ERROR(job.schedule.Validate().WithContext("spec.sync"));

  // A command may bring its own data; data it is given is checked and passed on.
  job.has_data = !is_command || spec.data().has_synthetic() || spec.data().has_text_file();
  if (job.has_data) LONGHAUL_RETURN_IF_ERROR(ParseData(spec.data(), job));
  if (!is_command) LONGHAUL_RETURN_IF_ERROR(trainer::CheckModelCoversData(job.model, job.data).WithContext("spec"));
  LONGHAUL_RETURN_IF_ERROR(ParseInner(spec.inner(), job.rounds, job));
  LONGHAUL_RETURN_IF_ERROR(ParseOuter(spec.outer(), job));

  auto intra_region = IntraRegionFromWire(spec.intra_region());
  if (!intra_region.ok()) return intra_region.status().WithContext("spec");
  job.intra_region = *intra_region;

  auto compression = proto::CompressionFromWire(spec.compression());
  if (!compression.ok()) return compression.status().WithContext("spec");
  job.compression = *compression;
  LONGHAUL_RETURN_IF_ERROR(job.compression.Validate().WithContext("spec.compression"));
  return job;
}

Result<JobConfig> AdmitJob(const v1::JobAssignment& a, const std::string& region, int capacity_workers) {
  if (a.region() != region) {
    return InvalidArgument("job " + a.job_id() + " is assigned to region '" + a.region() + "' but this agent is '" +
                           region + "'");
  }
  auto job = ParseJobAssignment(a);
  if (!job.ok()) return job.status().WithContext("job " + a.job_id());
  if (job->workers > static_cast<uint32_t>(capacity_workers)) {
    return ResourceExhausted("job " + job->job_id + " needs " + std::to_string(job->workers) +
                             " workers per region; region " + region + " has " + std::to_string(capacity_workers));
  }
  if (job->has_data && job->data.kind == "text") {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(job->data.text_path, ec)) {
      return NotFound("job " + job->job_id + ": data file " + job->data.text_path + " does not exist or is not a file");
    }
    std::ifstream probe(job->data.text_path, std::ios::binary);
    if (!probe) return NotFound("job " + job->job_id + ": data file " + job->data.text_path + " is not readable");
  }
  if (!a.checkpoint_path().empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(a.checkpoint_path(), ec)) {
      return NotFound("job " + job->job_id + ": checkpoint " + a.checkpoint_path() + " does not exist");
    }
  }
  return job;
}

}  // namespace longhaul::worker
