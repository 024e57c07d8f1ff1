#include "longhaul/session/session_options.h"

#include <charconv>
#include <cstdlib>

#include "longhaul/wan_transport/curve.h"

namespace longhaul::session {
namespace {

constexpr const char* kAgent = "LONGHAUL_AGENT_ENDPOINT";
constexpr const char* kAgentKey = "LONGHAUL_AGENT_PUBLIC_KEY";
constexpr const char* kJobId = "LONGHAUL_JOB_ID";
constexpr const char* kRegion = "LONGHAUL_REGION";
constexpr const char* kRank = kRankVariable;
constexpr const char* kWanHost = "LONGHAUL_WAN_HOST";
constexpr const char* kInsecure = "LONGHAUL_INSECURE";
constexpr const char* kCollectiveMs = "LONGHAUL_COLLECTIVE_TIMEOUT_MS";
constexpr const char* kLinkIoMs = "LONGHAUL_LINK_IO_TIMEOUT_MS";
constexpr const char* kValidationBatches = "LONGHAUL_VALIDATION_BATCHES";
constexpr const char* kWorkerToken = kWorkerTokenVariable;
constexpr const char* kComputeThrottle = "LONGHAUL_COMPUTE_THROTTLE_PERCENT";

Result<std::string> Required(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    return FailedPrecondition(std::string("environment variable ") + name +
                              " is not set: this program must be started by a longhaul agent as a job's worker");
  }
  return std::string(v);
}

Result<int64_t> Integer(const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  int64_t out = 0;
  const char* end = v + std::char_traits<char>::length(v);
  if (std::from_chars(v, end, out).ptr != end || out < lo || out > hi) {
    return InvalidArgument(std::string("environment variable ") + name + " must be an integer in [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + std::string(v).substr(0, 32) + "'");
  }
  return out;
}

}  // namespace

Status SessionOptions::Validate() const {
  if (agent_endpoint.empty()) return InvalidArgument("session options: agent_endpoint is empty");
  if (!agent_public_key.empty()) {
    LONGHAUL_RETURN_IF_ERROR(wan_transport::ValidateZ85Key(agent_public_key, "session options: agent_public_key"));
  }
  if (job_id.empty()) return InvalidArgument("session options: job_id is empty");
  if (region.empty()) return InvalidArgument("session options: region is empty");
  if (rank < 0) return InvalidArgument("session options: rank must be >= 0, got " + std::to_string(rank));
  if (compute_throttle_percent < 100 || compute_throttle_percent > 10000) {
    return InvalidArgument("session options: compute_throttle_percent must be in [100, 10000], got " +
                           std::to_string(compute_throttle_percent));
  }
  if (link_io >= collective_timeout) {
    return InvalidArgument("session options: link I/O timeout " + std::to_string(link_io.count()) +
                           " ms must be below the collective timeout " + std::to_string(collective_timeout.count()) + " ms");
  }
  return Status::Ok();
}

std::map<std::string, std::string> WorkerEnvironment(const SessionOptions& o, int world_size,
                                                     const std::string& master_addr, int master_port) {
  std::map<std::string, std::string> env = {
      {kAgent, o.agent_endpoint},
      {kAgentKey, o.agent_public_key},
      {kJobId, o.job_id},
      {kRegion, o.region},
      {kRank, std::to_string(o.rank)},
      {kWanHost, o.wan_host},
      {kInsecure, o.insecure ? "1" : "0"},
      {kCollectiveMs, std::to_string(o.collective_timeout.count())},
      {kLinkIoMs, std::to_string(o.link_io.count())},
      {kValidationBatches, std::to_string(o.validation_batches)},
      {kWorkerToken, o.worker_token},
      {kComputeThrottle, std::to_string(o.compute_throttle_percent)},
      // torchrun's variables: one node per region as far as torch.distributed sees it.
      {"RANK", std::to_string(o.rank)},
      {"WORLD_SIZE", std::to_string(world_size)},
      {"LOCAL_RANK", std::to_string(o.rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(world_size)},
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
  };
  return env;
}

Result<SessionOptions> SessionOptionsFromEnvironment() {
  SessionOptions o;
  LONGHAUL_ASSIGN_OR_RETURN(o.agent_endpoint, Required(kAgent));
  if (const char* k = std::getenv(kAgentKey); k != nullptr) o.agent_public_key = k;
  LONGHAUL_ASSIGN_OR_RETURN(o.job_id, Required(kJobId));
  LONGHAUL_ASSIGN_OR_RETURN(o.region, Required(kRegion));
  LONGHAUL_ASSIGN_OR_RETURN(int64_t rank, Integer(kRank, 0, 1 << 20, -1));
  if (rank < 0) return Required(kRank).status();
  o.rank = static_cast<int>(rank);
  if (const char* h = std::getenv(kWanHost); h != nullptr && *h != '\0') o.wan_host = h;
  const char* insecure = std::getenv(kInsecure);
  o.insecure = insecure != nullptr && std::string(insecure) == "1";
  LONGHAUL_ASSIGN_OR_RETURN(int64_t collective, Integer(kCollectiveMs, 1, int64_t{1} << 40, o.collective_timeout.count()));
  o.collective_timeout = Duration(collective);
  LONGHAUL_ASSIGN_OR_RETURN(int64_t link_io, Integer(kLinkIoMs, 1, int64_t{1} << 40, o.link_io.count()));
  o.link_io = Duration(link_io);
  LONGHAUL_ASSIGN_OR_RETURN(int64_t batches, Integer(kValidationBatches, 0, 1 << 20, o.validation_batches));
  o.validation_batches = static_cast<int>(batches);
  if (const char* t = std::getenv(kWorkerToken); t != nullptr) o.worker_token = t;  // without it the agent drops the hello
  LONGHAUL_ASSIGN_OR_RETURN(int64_t throttle, Integer(kComputeThrottle, 100, 10000, o.compute_throttle_percent));
  o.compute_throttle_percent = static_cast<int>(throttle);
  LONGHAUL_RETURN_IF_ERROR(o.Validate());
  return o;
}

}  // namespace longhaul::session
