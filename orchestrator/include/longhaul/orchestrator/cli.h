// The `longhaul` CLI's commands, as library functions so tests call them and
// cli_main.cpp stays a thin flag parser (CLI11 lives only there).
//
// Exit codes (kExit*): 0 ok; 1 operation failed (job failed, unknown job);
// 2 usage or bad input (bad flag, bad job file, missing key file, a spec the
// orchestrator refuses); 3 orchestrator unreachable or refusing our key (within
// `timeout`). Every command has --output json: one JSON document per result on
// stdout, and an error as {"error": "...", "code": <exit code>} on stdout too
// (in text mode errors go to stderr as "longhaul: ...").
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>
#include <string_view>

#include "longhaul/common/status.h"
#include "longhaul/v1/control.pb.h"
#include "longhaul/wan_transport/curve.h"

namespace longhaul::orchestrator {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

struct CliContext {
  std::string orchestrator;     // tcp://host:port
  std::string key_file;         // our .key
  std::string server_key_file;  // orchestrator's .pub
  bool insecure = false;
  bool json = false;
  std::chrono::milliseconds timeout{5000};
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
};

// Maps a Status to the exit code above and reports it as ReportFailure does.
int ReportError(const CliContext& ctx, const Status& status);
int ExitCodeFor(const Status& status);
// Prints "longhaul: <message>" to err, or with ctx.json the error object to out;
// returns `code`.
int ReportFailure(const CliContext& ctx, int code, const std::string& message);

// Sent with `idempotency_key` (a random one if empty) and re-sent every second
// until answered or ctx.timeout passes, so a reply lost to an orchestrator
// restart never creates a second job.
int CliSubmit(const CliContext& ctx, const std::string& job_file, bool watch, std::string idempotency_key = "");
int CliStatus(const CliContext& ctx, const std::string& job_id, bool watch, std::chrono::milliseconds interval);
// Every job, fetched page by page (each page at most 1 MiB), as one table or JSON document.
int CliJobs(const CliContext& ctx);
int CliCancel(const CliContext& ctx, const std::string& job_id);
int CliRegions(const CliContext& ctx);
int CliRemoveRegion(const CliContext& ctx, const std::string& region, bool force);
int CliKeysGen(const CliContext& ctx, const std::string& dir, const std::string& name);

// `longhaul plan`: no orchestrator needed; the model's size and step time, the
// WAN's bottleneck link, and the CU the user wants (sync_policies/planner.h).
struct PlanRequest {
  double params = 0;
  uint32_t layers = 1;
  double step_seconds = 0;
  uint32_t regions = 2;
  double bandwidth_gbit = 0;
  double rtt_ms = 0;
  double target_cu = 0.95;
  bool layerwise = false;  // exchanges overlap the backward pass layer by layer (the paper's simulator)
};
int CliPlan(const CliContext& ctx, const PlanRequest& request);
// With a job file: the link is the orchestrator's measured one for the job's
// regions (its ring's bottleneck and largest RTT; bandwidth_gbit, rtt_ms and
// regions of `request` are replaced), and the job's own schedule is predicted
// beside the candidates.
int CliPlanJob(const CliContext& ctx, const std::string& job_file, PlanRequest request);

// Rendering (cli_render.cpp).
std::string RenderJobStatus(const v1::JobStatus& status, bool color);
std::string RenderJobTable(const v1::JobList& jobs);
std::string RenderRegionTable(const v1::ListRegionsReply& regions);
std::string ToJson(const google::protobuf::Message& msg);
// `s` as a JSON string literal, quotes included; bytes that are not UTF-8 become U+FFFD.
std::string JsonQuote(std::string_view s);
std::string HumanBytes(double bytes);
std::string HumanSeconds(double seconds);

}  // namespace longhaul::orchestrator
