#include "longhaul/region_agent/agent_options.h"

#include <unistd.h>

#include <cctype>
#include <cmath>

namespace longhaul::region_agent {

Status AgentOptions::Validate() const {
  if (region.empty()) return InvalidArgument("--region must not be empty");
  for (char c : region) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return InvalidArgument("--region '" + region + "': only letters, digits, '-', '_' and '.' are allowed");
    }
  }
  if (orchestrator.rfind("tcp://", 0) != 0 && orchestrator.rfind("ipc://", 0) != 0) {
    return InvalidArgument("--orchestrator '" + orchestrator + "' must look like tcp://HOST:PORT");
  }
  if (!insecure) {
    if (orchestrator_public_key.empty()) return InvalidArgument("--orchestrator-public-key is required unless --insecure");
    if (key_file.empty()) return InvalidArgument("--key is required unless --insecure");
  }
  if (workers < 1 || workers > 256) return InvalidArgument("--workers must be in [1, 256], got " + std::to_string(workers));
  if (validation_batches < 0 || validation_batches > 4096)
    return InvalidArgument("--validation-batches must be in [0, 4096], got " + std::to_string(validation_batches));
  if (compute_throttle_percent < 100 || compute_throttle_percent > 10000)
    return InvalidArgument("--compute-throttle-percent must be in [100, 10000], got " +
                           std::to_string(compute_throttle_percent));
  if (data_host.empty()) return InvalidArgument("--data-host must not be empty");
  if (worker_bind.empty() || worker_bind == "*" || worker_bind == "0.0.0.0" || worker_bind.find(':') != std::string::npos) {
    return InvalidArgument("--worker-bind '" + worker_bind + "' must be one IPv4 address or host name of this host that "
                           "workers can reach (no wildcard, no port)");
  }
  if (work_dir.empty()) return InvalidArgument("--work-dir must not be empty");
  if (!(std::isfinite(wan_rate_mbit) && wan_rate_mbit >= 0)) return InvalidArgument("--wan-rate-mbit must be >= 0, got " + std::to_string(wan_rate_mbit));
  if (!(std::isfinite(wan_delay_ms) && wan_delay_ms >= 0)) return InvalidArgument("--wan-delay-ms must be >= 0, got " + std::to_string(wan_delay_ms));
  if (!(std::isfinite(wan_jitter_ms) && wan_jitter_ms >= 0)) return InvalidArgument("--wan-jitter-ms must be >= 0, got " + std::to_string(wan_jitter_ms));
  for (const auto& p : commands.allowed_programs) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec) || ::access(p.c_str(), X_OK) != 0)
      return InvalidArgument("--allow-command " + p.string() + ": not an executable file");
  }
  for (const auto& d : commands.allowed_working_dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(d, ec)) return InvalidArgument("--allow-working-dir " + d.string() + ": not a folder");
  }
  if (Status s = launcher.Validate(); !s.ok()) return s.WithContext("--launcher " + std::string(LauncherKindName(launcher.kind)));
  if (launcher.kind == LauncherKind::kSlurm && launcher.slurm.nodes > 1 && !workers_may_be_remote()) {
    return InvalidArgument("--slurm-nodes " + std::to_string(launcher.slurm.nodes) +
                           " puts workers on other hosts: they need --data-host auto (each binds on its own host) and "
                           "a --worker-bind address they can reach (not loopback)");
  }
  if (data_host == session::kAutoHost && wan_rate_mbit > 0) {
    return InvalidArgument("--data-host auto with --wan-rate-mbit: link emulation is for workers on this host");
  }
  return timeouts.Validate();
}

}  // namespace longhaul::region_agent
