// longhaul: command-line client. Flag parsing only; the commands live in the
// orchestrator library (cli.h, demo.h).
#include <CLI/CLI.hpp>

#include <cstdlib>

#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/demo.h"
#include "longhaul/orchestrator/local_up.h"
#include "longhaul/orchestrator/request_limits.h"

namespace {
std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Whether the command line asks for JSON, read from argv itself: a usage error
// may stop CLI11 before it reaches --output.
bool WantsJson(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--output=json" || (a == "--output" && i + 1 < argc && std::string(argv[i + 1]) == "json")) return true;
  }
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace longhaul::orchestrator;
  CLI::App app{"longhaul - command-line client of the longhaul orchestrator"};
  app.require_subcommand(1);
  app.fallthrough();  // inherited: global flags may follow the subcommand (`longhaul jobs --output json`)
  CliContext ctx;
  ctx.orchestrator = Env("LONGHAUL_ORCHESTRATOR");
  ctx.key_file = Env("LONGHAUL_KEY");
  ctx.server_key_file = Env("LONGHAUL_SERVER_KEY");
  std::string output = "text";
  double timeout_s = 5;
  app.add_option("--orchestrator", ctx.orchestrator, "control endpoint, tcp://HOST:PORT (env LONGHAUL_ORCHESTRATOR)");
  app.add_option("--key", ctx.key_file, "your key pair, FILE.key (env LONGHAUL_KEY)");
  app.add_option("--server-key", ctx.server_key_file, "the orchestrator's public key, FILE.pub (env LONGHAUL_SERVER_KEY)");
  app.add_option("--output", output, "text or json")->check(CLI::IsMember({"text", "json"}));
  app.add_option("--timeout-s", timeout_s, "give up on an unreachable orchestrator after this long")
      ->check(CLI::Range(0.1, 600.0));
  app.add_flag("--insecure", ctx.insecure, "connect without CURVE (only to an --insecure orchestrator)");

  std::string job_file, job_id, keys_dir = ".", keys_name;
  bool watch = false;
  double interval_s = 1;
  auto* submit = app.add_subcommand("submit", "submit a job spec (YAML)");
  submit->add_option("JOB.yaml", job_file, "job spec file")->required();
  submit->add_flag("--watch", watch, "follow the job until it ends");
  std::string idempotency_key;
  submit->add_option("--idempotency-key", idempotency_key,
                     "submit at most once under this key: a repeated submit with it returns the first job "
                     "(default: a random key, so the CLI's own retries never create a second job)")
      ->check([](const std::string& k) {
        return request_limits::IsValidIdempotencyKey(k) ? std::string()
                                                        : std::string("at most 128 characters of [A-Za-z0-9._:-]");
      });
  auto* status = app.add_subcommand("status", "show a job (or all jobs) with per-region progress");
  status->add_option("JOB", job_id, "job id");
  status->add_flag("--watch", watch, "refresh until the job ends");
  status->add_option("--interval-s", interval_s, "refresh interval for --watch")->check(CLI::Range(0.1, 3600.0));
  app.add_subcommand("jobs", "list jobs");
  auto* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("JOB", job_id, "job id")->required();
  auto* regions = app.add_subcommand("regions", "list regions and their health");
  std::string region_name;
  bool force = false;
  auto* remove = regions->add_subcommand("remove", "forget a region and release its name's binding to an agent key");
  remove->add_option("REGION", region_name, "region name")->required();
  remove->add_flag("--force", force, "remove it even while its agent is up (the agent registers again at once)");
  auto* keys = app.add_subcommand("keys", "CURVE key management");
  keys->require_subcommand(1);
  auto* gen = keys->add_subcommand("gen", "generate a key pair: DIR/NAME.key (secret) and DIR/NAME.pub");
  gen->add_option("--dir", keys_dir, "directory to write to");
  gen->add_option("--name", keys_name, "key name")->required();
  DemoOptions demo_options;
  auto* demo = app.add_subcommand("demo", "run a local 3-region demo: DiLoCo+int8 vs fully synchronous");
  demo->add_option("--rounds", demo_options.rounds, "outer rounds per job")->check(CLI::Range(1, 10000));
  demo->add_option("--inner-steps", demo_options.inner_steps, "H, inner steps per round")->check(CLI::Range(1, 100000));
  demo->add_option("--workers", demo_options.workers_per_region, "workers per region")->check(CLI::Range(1, 64));
  demo->add_option("--bin-dir", demo_options.bin_dir, "where longhaul-* binaries are (default: next to this one)");
  demo->add_flag("--keep", demo_options.keep_work_dir, "keep the demo's temporary directory");
  demo->add_flag("--no-sync-baseline", demo_options.skip_sync_baseline, "run only the DiLoCo job");
  demo->add_option("--example", demo_options.example,
                   "run an example's own worker program instead of the built-in trainer (pytorch: examples/pytorch)")
      ->check(CLI::IsMember({"pytorch"}));
  demo->add_option("--examples-dir", demo_options.examples_dir, "where the examples are (default: the source tree's)");
  bool no_wan = false;
  demo->add_flag("--no-wan-emulation", no_wan, "plain loopback instead of longhaul-linkem WAN links");
  demo->add_flag("--netns", demo_options.netns,
                 "each region on a host of its own: a network namespace with its own address, its link's rate "
                 "shaped by tc tbf, its delay by longhaul-linkem (root)");
  UpOptions up_options;
  auto* up = app.add_subcommand("up", "start a local cluster in the background and print its environment "
                                      "(eval \"$(longhaul up)\"; then submit, status, jobs need no flags)");
  up->add_option("--dir", up_options.dir, "the cluster's folder: state, keys, logs (default ~/.longhaul/up)");
  up->add_option("--regions", up_options.regions, "region agents")->check(CLI::Range(1, 8));
  up->add_option("--workers-per-region", up_options.workers_per_region, "worker slots per agent")
      ->check(CLI::Range(1, 64));
  up->add_option("--wan-rate-mbit", up_options.wan_rate_mbit,
                 "emulate a WAN: every region's links at this rate (longhaul-linkem); default plain loopback")
      ->check(CLI::Range(0.01, 100000.0));
  up->add_option("--wan-delay-ms", up_options.wan_delay_ms, "one-way delay of the emulated WAN (with --wan-rate-mbit)")
      ->check(CLI::Range(0.0, 10000.0));
  up->add_option("--bin-dir", up_options.bin_dir, "where longhaul-* binaries are (default: next to this one)");
  up->add_option("--allow-command", up_options.allow_commands,
                 "a program your jobs may run as their worker (repeatable; default /usr/bin/python3)");
  up->add_option("--allow-working-dir", up_options.allow_working_dirs,
                 "a folder your jobs' worker.working_dir may name (repeatable; default the current folder)");
  DownOptions down_options;
  PlanRequest plan_request;
  auto* plan = app.add_subcommand("plan", "predict compute utilisation of the candidate schedules on a link, and pick one");
  plan->add_option("--params", plan_request.params, "model parameters (e.g. 1e9)")->required()->check(CLI::Range(1.0, 1e15));
  plan->add_option("--step-time", plan_request.step_seconds, "seconds of compute per inner step in a region")
      ->required()->check(CLI::Range(1e-6, 1e6));
  plan->add_option("--regions", plan_request.regions, "regions (default 2)")->check(CLI::Range(2, 64));
  std::string plan_job;
  plan->add_option("job", plan_job, "a job spec (YAML): plan on the orchestrator's measured links for its regions");
  plan->add_option("--bandwidth-gbit", plan_request.bandwidth_gbit, "the slowest WAN link's bandwidth, Gbit/s")
      ->check(CLI::Range(1e-6, 1e6));
  plan->add_option("--rtt-ms", plan_request.rtt_ms, "its round-trip time in ms (default 0)")->check(CLI::Range(0.0, 1e6));
  plan->add_option("--target-cu", plan_request.target_cu, "compute utilisation to reach (default 0.95)")
      ->check(CLI::Range(0.01, 1.0));
  plan->add_option("--layers", plan_request.layers, "layers, with --layerwise (default 1)")->check(CLI::Range(1, 100000));
  plan->add_flag("--layerwise", plan_request.layerwise,
                 "model exchanges that leave layer by layer during the backward pass (the Streaming DiLoCo paper's "
                 "simulator); longhaul's own leave at the step's end");
  auto* down = app.add_subcommand("down", "stop the local cluster `longhaul up` started (and nothing else)");
  down->add_option("--dir", down_options.dir, "the cluster's folder (default ~/.longhaul/up)");
  down->add_flag("--keep", down_options.keep, "keep the folder (logs, state) after stopping");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0 (CLI11 prints it); every usage error exits 2, not CLI11's 105-109.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    ctx.json = output == "json" || WantsJson(argc, argv);
    if (ctx.json) return ReportFailure(ctx, kExitUsage, e.what());
    (void)app.exit(e);  // the message and "Run with --help for more information."
    return kExitUsage;
  }
  ctx.json = output == "json";
  ctx.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));

  if (*submit) return CliSubmit(ctx, job_file, watch, idempotency_key);
  if (*status) return CliStatus(ctx, job_id, watch, std::chrono::milliseconds(static_cast<long long>(interval_s * 1000)));
  if (app.got_subcommand("jobs")) return CliJobs(ctx);
  if (*cancel) return CliCancel(ctx, job_id);
  if (*remove) return CliRemoveRegion(ctx, region_name, force);
  if (*regions) return CliRegions(ctx);
  if (*gen) return CliKeysGen(ctx, keys_dir, keys_name);
  if (*up) {
    if (up_options.wan_delay_ms > 0 && up_options.wan_rate_mbit <= 0) {
      return ReportFailure(ctx, kExitUsage, "--wan-delay-ms needs --wan-rate-mbit (the emulated WAN)");
    }
    if (up_options.bin_dir.empty()) up_options.bin_dir = DefaultBinDir(argv[0]);
    return RunUp(up_options);
  }
  if (*down) return RunDown(down_options);
  if (*plan) return plan_job.empty() ? CliPlan(ctx, plan_request) : CliPlanJob(ctx, plan_job, plan_request);
  if (*demo) {
    if (demo_options.bin_dir.empty()) demo_options.bin_dir = DefaultBinDir(argv[0]);
    if (demo_options.examples_dir.empty()) demo_options.examples_dir = LONGHAUL_EXAMPLES_DIR;
    demo_options.json = ctx.json;
    demo_options.wan_emulation = !no_wan;
    return RunDemo(demo_options);
  }
  return kExitUsage;
}
