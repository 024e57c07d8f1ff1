// Rules of a job's `worker` section (see worker_spec_rules.h).
#include "worker_spec_rules.h"

#include "longhaul/common/environment_names.h"

#include <array>

namespace longhaul::orchestrator::worker_rules {
namespace {

using spec_limits::ShortQuote;

Status Bad(const std::string& field, const std::string& rule) {
  return InvalidArgument("field '" + field + "' " + rule);
}

Status CheckCommand(const v1::CommandWorker& c) {
  if (c.argv_size() == 0) return Bad("worker.command", "must be a non-empty list such as [python3, train.py]");
  if (static_cast<size_t>(c.argv_size()) > spec_limits::kMaxCommandArgs)
    return Bad("worker.command", "must have at most " + std::to_string(spec_limits::kMaxCommandArgs) +
                                     " entries, got " + std::to_string(c.argv_size()));
  for (int i = 0; i < c.argv_size(); ++i) LONGHAUL_RETURN_IF_ERROR(CheckArg(static_cast<size_t>(i), c.argv(i)));
  if (static_cast<size_t>(c.env_size()) > spec_limits::kMaxEnvEntries)
    return Bad("worker.env", "must have at most " + std::to_string(spec_limits::kMaxEnvEntries) + " entries, got " +
                                 std::to_string(c.env_size()));
  for (const auto& [name, value] : c.env()) LONGHAUL_RETURN_IF_ERROR(CheckEnv(name, value));
  return CheckWorkingDir(c.working_dir());
}

}  // namespace

Status CheckArg(size_t index, std::string_view arg) {
  const std::string field = "worker.command[" + std::to_string(index) + "]";
  if (arg.empty()) return Bad(field, "must not be empty");
  return spec_limits::CheckText(field, arg, spec_limits::kCommandArg.max_bytes);
}

Status CheckEnv(std::string_view name, std::string_view value) {
  if (name.size() > spec_limits::kEnvName.max_bytes)
    return Bad("worker.env", "names must be at most " + std::to_string(spec_limits::kEnvName.max_bytes) +
                                 " bytes, got " + ShortQuote(name));
  if (!IsEnvironmentName(name)) return Bad("worker.env", "names must match [A-Za-z_][A-Za-z0-9_]*, got " + ShortQuote(name));
  const std::string field = "worker.env." + std::string(name);
  if (IsReservedEnvironmentName(name))
    return Bad(field, "is set by the agent for every worker (LONGHAUL_* and torchrun's variables) and cannot be overridden");
  if (IsLoaderEnvironmentName(name))
    return Bad(field, "changes how programs are loaded or interpreted before they run and is refused");
  return spec_limits::CheckText(field, value, spec_limits::kEnvValue.max_bytes);
}

Status CheckWorkingDir(std::string_view dir) { return spec_limits::CheckText(spec_limits::kWorkingDir, dir); }

Status CheckPreset(const char* field, std::string_view preset) {
  const spec_limits::TextLimit* limit = spec_limits::FindScalarLimit(field);
  LONGHAUL_RETURN_IF_ERROR(
      spec_limits::CheckText(field, preset, limit ? limit->max_bytes : spec_limits::kWorkerPreset.max_bytes));
  if (preset != "tiny" && preset != "small") return Bad(field, "must be 'tiny' or 'small', got " + ShortQuote(preset));
  return Status::Ok();
}

Status CheckBuiltinDim(std::string_view name, uint32_t value) {
  // trainer::ModelConfig::Validate's ranges (trainer/src/presets.cpp).
  const uint32_t max = name == "context" ? 4096 : name == "layers" ? 64 : 65536;
  if (value > max)
    return Bad("worker." + std::string(name),
               "must be in 1.." + std::to_string(max) + " (0 = the preset's), got " + std::to_string(value));
  return Status::Ok();
}

Status CheckBuiltinDims(const v1::BuiltinWorker& b) {
  if (!b.preset().empty()) LONGHAUL_RETURN_IF_ERROR(CheckPreset("worker.preset", b.preset()));
  LONGHAUL_RETURN_IF_ERROR(CheckBuiltinDim("context", b.context()));
  LONGHAUL_RETURN_IF_ERROR(CheckBuiltinDim("embed", b.embed()));
  LONGHAUL_RETURN_IF_ERROR(CheckBuiltinDim("hidden", b.hidden()));
  LONGHAUL_RETURN_IF_ERROR(CheckBuiltinDim("layers", b.layers()));
  // The trainer also bounds the input layer; with one of the two left to the
  // preset the agent checks it (the orchestrator does not know the presets' sizes).
  const uint64_t input = uint64_t{b.context()} * b.embed();
  if (input > (1u << 20))
    return Bad("worker.embed", "times worker.context must be at most 1048576, got " + std::to_string(input));
  return Status::Ok();
}

Status CheckWorker(const v1::JobSpec& spec) {
  if (spec.worker().exit_grace_s() > kMaxExitGraceS)
    return Bad("worker.exit_grace_s", "must be at most " + std::to_string(kMaxExitGraceS) + " (an hour), got " +
                                          std::to_string(spec.worker().exit_grace_s()));
  if (IsCommandWorker(spec)) {
    if (!spec.model_preset().empty())
      return Bad("model_preset",
                 "names a built-in trainer preset, but 'worker.command' runs the user's program; "
                 "give only one, got " +
                     ShortQuote(spec.model_preset()));
    return CheckCommand(spec.worker().command());
  }
  const v1::BuiltinWorker& b = spec.worker().builtin();  // the default instance when unset
  if (!b.preset().empty() && !spec.model_preset().empty() && b.preset() != spec.model_preset())
    return Bad("worker.preset", ShortQuote(b.preset()) + " disagrees with 'model_preset' " +
                                    ShortQuote(spec.model_preset()) + "; give only worker.preset");
  if (!spec.model_preset().empty()) LONGHAUL_RETURN_IF_ERROR(CheckPreset("model_preset", spec.model_preset()));
  return CheckBuiltinDims(b);
}

}  // namespace longhaul::orchestrator::worker_rules
