// bench_submit_scale: the orchestrator with tens of thousands of waiting jobs.
//
// Starts the real longhaul-orchestrator (no agents: every job waits), submits
// --jobs jobs through the control protocol as the CLI does (one request each,
// with an idempotency key), and prints the submit rate of each window of 1,000
// jobs, and at 1k, 10k and 30k waiting jobs the latency of `longhaul jobs` (every
// job, page by page, rendered as the CLI does) and of one `longhaul status`.
// Ratios against the 1k figures in the same run show how each grows: about 1
// for the submit rate and about 30 for `jobs` at 30k mean O(1) per submit and
// O(N) per listing.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/control_client.h"
#include "longhaul/orchestrator/endpoint_file.h"
#include "longhaul/orchestrator/job_spec.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

using namespace longhaul;
using Clock = std::chrono::steady_clock;

namespace {

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "bench_submit_scale: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_submit_scale: submit rate and `jobs` latency with many waiting jobs"};
  int jobs = 30000;
  app.add_option("--jobs", jobs, "jobs to submit")->check(CLI::Range(1000, 100000));
  CLI11_PARSE(app, argc, argv);

  const testing::TempDir tmp("bench-submit");
  testing::Subprocess orch;
  const auto ep_file = tmp.path() / "endpoint";
  Status started = orch.Start({std::string(LONGHAUL_BIN_DIR) + "/longhaul-orchestrator", "--bind",
                               "tcp://127.0.0.1:0", "--init", "--state", (tmp.path() / "state.sqlite").string(),
                               "--insecure", "--endpoint-file", ep_file.string(), "--log-level", "warn"},
                              {.log_path = (tmp.path() / "orchestrator.log").string()});
  if (!started.ok()) Die(started.ToString());
  auto ep = orchestrator::WaitForEndpointFile(ep_file, std::chrono::seconds(20));
  if (!ep.ok()) Die(ep.status().ToString());
  orchestrator::ControlClientOptions co;
  co.endpoint = ep->control;
  co.insecure = true;
  co.timeout = std::chrono::seconds(30);
  auto client = orchestrator::ControlClient::Connect(co);
  if (!client.ok()) Die(client.status().ToString());

  orchestrator::CliContext cli;
  cli.orchestrator = ep->control;
  cli.insecure = true;
  cli.json = true;
  cli.timeout = std::chrono::seconds(30);

  v1::JobSpec spec = orchestrator::DefaultJobSpec();
  spec.set_rounds(1);
  std::printf("%8s %14s %14s %14s\n", "waiting", "submits/s", "jobs (s)", "status (s)");
  double rate_1k = 0, jobs_1k = 0;
  auto window = Clock::now();
  for (int i = 1; i <= jobs; ++i) {
    v1::ControlMessage req;
    spec.set_name("scale-" + std::to_string(i));
    *req.mutable_submit_job()->mutable_spec() = spec;
    req.mutable_submit_job()->set_idempotency_key("scale-" + std::to_string(i));
    auto reply = (*client)->Call(req);
    if (!reply.ok()) Die("submit " + std::to_string(i) + ": " + reply.status().ToString());
    if (!reply->has_submit_job_reply()) Die("submit " + std::to_string(i) + ": " + reply->DebugString());
    if (i % 1000 != 0) continue;
    const double rate = 1000 / Since(window);
    const bool listed = i == 1000 || i == 10000 || i == 30000 || i == jobs;
    if (!listed) {
      std::printf("%8d %14.0f\n", i, rate);
      window = Clock::now();
      continue;
    }
    std::ostringstream out, err;
    cli.out = &out;
    cli.err = &err;
    auto t0 = Clock::now();
    if (orchestrator::CliJobs(cli) != 0) Die("jobs at " + std::to_string(i) + ": " + err.str() + out.str());
    const double list_s = Since(t0);
    const size_t count = [&] {
      size_t n = 0;
      for (size_t p = out.str().find("\"job_id\""); p != std::string::npos; p = out.str().find("\"job_id\"", p + 1)) ++n;
      return n;
    }();
    if (count != static_cast<size_t>(i)) Die("jobs listed " + std::to_string(count) + " of " + std::to_string(i));
    std::ostringstream sout, serr;
    cli.out = &sout;
    cli.err = &serr;
    t0 = Clock::now();
    if (orchestrator::CliStatus(cli, "job-000001", false, std::chrono::milliseconds(0)) != 0)
      Die("status at " + std::to_string(i) + ": " + serr.str());
    const double status_s = Since(t0);
    std::printf("%8d %14.0f %14.3f %14.4f\n", i, rate, list_s, status_s);
    if (i == 1000) {
      rate_1k = rate;
      jobs_1k = list_s;
    } else {
      std::printf("         at %d against 1k: submit rate %.2fx, `jobs` latency %.1fx for %.0fx the jobs\n", i,
                  rate / rate_1k, list_s / jobs_1k, i / 1000.0);
    }
    std::fflush(stdout);
    window = Clock::now();
  }
  return 0;
}
