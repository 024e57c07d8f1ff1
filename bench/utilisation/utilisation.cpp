// bench_utilisation: the fraction of wall time the trainer spends computing
// (inner steps) rather than waiting on the WAN, for DiLoCo and Streaming
// DiLoCo, end to end on a LocalCluster over linkem links.
//
// Workers time their inner steps (RoundReport.compute_seconds); the
// orchestrator stores the mean over regions per committed round. Two figures
// per configuration:
//   in-round   = sum(compute) / sum(round wall)   (the worker's own view)
//   end-to-end = sum(compute) / job wall time     (adds the orchestrator's
//                                                  turnaround between rounds)
// The baseline, measured in the same run, is "local" (the same job with no
// cross-region sync at all): its utilisation is the ceiling that everything
// except the WAN allows on this machine; each configuration is also printed as
// a ratio to it.
//
// The CU model (sync_policies/cu_model.h, docs/planning.md) is checked on the
// same rounds: the orchestrator predicts each round's WAN wait from the links
// it measured and the step time of the last round; "predicted" is the in-round
// utilisation with the measured comm time replaced by that prediction (over
// the rounds it could predict: from round 2, with measured links).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "e2e_run.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/demo.h"
#include "longhaul/proto/wire_enums.h"

using namespace longhaul;
namespace orch = longhaul::orchestrator;
using longhaul::sync_policies::SyncKind;

namespace {

struct Config {
  std::string label;
  SyncKind kind;
  uint32_t h = 100;
  uint32_t fragments = 1;
  uint32_t overlap = 0;
};

struct Options {
  std::string preset = "small";
  uint32_t regions = 3;
  uint32_t h = 100;
  uint32_t rounds = 8;
  int job_timeout_s = 900;
  bool keep_logs = false;
};

struct Figures {
  double compute = 0, round_wall = 0, job_wall = 0;
  // Over the rounds with a prediction: compute, measured wall, wall with the predicted comm time.
  double predicted_compute = 0, measured_wall = 0, predicted_wall = 0;
  double in_round() const { return round_wall > 0 ? compute / round_wall : 0; }
  double end_to_end() const { return job_wall > 0 ? compute / job_wall : 0; }
  bool predicted() const { return predicted_wall > 0; }
  double predicted_in_round() const { return predicted() ? predicted_compute / predicted_wall : 0; }
  double measured_in_round() const { return measured_wall > 0 ? predicted_compute / measured_wall : 0; }
};

Figures Measure(const bench::E2eRun& run, bool has_wan) {
  Figures f;
  for (const auto& r : run.rounds) {
    f.compute += r.compute_seconds;
    f.round_wall += r.wall_seconds;
    // Round 1: the orchestrator knows no step time yet (and maybe no link).
    if (has_wan && (r.round == 1 || r.predicted_comm_seconds <= 0)) continue;
    f.predicted_compute += r.compute_seconds;
    f.measured_wall += r.wall_seconds;
    f.predicted_wall += r.wall_seconds - r.comm_seconds + r.predicted_comm_seconds;
  }
  f.job_wall = run.status.wall_seconds();
  return f;
}

v1::JobSpec SpecFor(const Config& c, const Options& o, const std::vector<orch::LocalRegion>& regions) {
  v1::JobSpec s = bench::BuiltinJobSpec("utilisation " + c.label, o.preset, regions);
  s.set_rounds(o.rounds);
  proto::SetSyncKind(s.mutable_sync(), c.kind);
  s.mutable_sync()->set_inner_steps(c.h);
  s.mutable_sync()->set_fragments(c.fragments);
  s.mutable_sync()->set_overlap_steps(c.overlap);
  s.mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_utilisation: compute fraction of DiLoCo and Streaming DiLoCo over emulated WAN links"};
  app.add_option("--preset", o.preset, "model preset (tiny | small)");
  app.add_option("--regions", o.regions, "regions (2-4)")->check(CLI::Range(2, 4));
  app.add_option("--inner-steps", o.h, "H, inner steps per round")->check(CLI::Range(8, 100000));
  app.add_option("--rounds", o.rounds, "outer rounds per configuration")->check(CLI::Range(1, 1000));
  app.add_option("--job-timeout-s", o.job_timeout_s, "give up on a job after this long");
  app.add_flag("--keep-logs", o.keep_logs, "keep the cluster's folder (logs, state file) and print its path");
  CLI11_PARSE(app, argc, argv);

  const uint32_t h = o.h;
  const std::vector<Config> configs = {
      {"local only (baseline: no WAN)", SyncKind::kLocal, h},
      {"DiLoCo H=" + std::to_string(h) + " int8", SyncKind::kDiLoCo, h},
      {"DiLoCo H=" + std::to_string(h / 4) + " int8", SyncKind::kDiLoCo, h / 4},
      {"Streaming DiLoCo H=" + std::to_string(h) + " P=4 tau=0 int8", SyncKind::kStreamingDiLoCo, h, 4, 0},
      {"Streaming DiLoCo H=" + std::to_string(h) + " P=4 tau=" + std::to_string(h / 8) + " int8", SyncKind::kStreamingDiLoCo,
       h, 4, h / 8},
  };
  orch::LocalClusterOptions co = bench::BenchClusterOptions(o.regions, "utilisation", orch::DefaultBinDir(argv[0]));
  co.keep_work_dir = o.keep_logs;
  auto cluster = orch::LocalCluster::Start(co);
  if (!cluster.ok()) {
    std::fprintf(stderr, "bench_utilisation: %s\n", cluster.status().message().c_str());
    return 1;
  }
  std::printf("preset %s, %u regions over linkem links:", o.preset.c_str(), o.regions);
  for (const auto& r : co.regions) std::printf(" %s %.0f Mbit/s %.0f ms", r.name.c_str(), r.rate_mbit, r.delay_ms);
  std::printf("\n\n| configuration | rounds | inner steps | compute | in-round utilisation | end-to-end utilisation | "
              "vs local | CU model: predicted vs measured (rounds it predicted) |\n|---|---|---|---|---|---|---|---|\n");
  double ceiling = 0;
  for (const auto& c : configs) {
    Options per = o;
    per.rounds = o.rounds * (h / c.h);  // equal inner steps in every configuration
    auto run = bench::RunJob(**cluster, SpecFor(c, per, co.regions), std::chrono::seconds(o.job_timeout_s));
    if (!run.ok()) {
      std::fprintf(stderr, "bench_utilisation: %s (logs: %s)\n", run.status().message().c_str(),
                   (*cluster)->log_dir().c_str());
      return 1;
    }
    const Figures f = Measure(*run, c.kind != SyncKind::kLocal);
    if (c.kind == SyncKind::kLocal) ceiling = f.end_to_end();
    char model[96] = "-";
    if (c.kind != SyncKind::kLocal && f.predicted()) {
      std::snprintf(model, sizeof(model), "%.1f%% vs %.1f%% (%+.1f pp)", 100 * f.predicted_in_round(),
                    100 * f.measured_in_round(), 100 * (f.predicted_in_round() - f.measured_in_round()));
    }
    std::printf("| %s | %u | %u | %s | %.1f%% | %.1f%% | %.2fx | %s |\n", c.label.c_str(), per.rounds, per.rounds * c.h,
                orch::HumanSeconds(f.compute).c_str(), 100 * f.in_round(), 100 * f.end_to_end(),
                ceiling > 0 ? f.end_to_end() / ceiling : 0.0, model);
    std::fflush(stdout);
  }
  // The links the orchestrator measured (the CU model's input) beside what
  // linkem emulates: a link into region B runs at B's rate, its round trip
  // crosses B's delay both ways.
  auto regions = (*cluster)->Regions();
  if (!regions.ok()) {
    std::fprintf(stderr, "bench_utilisation: %s\n", regions.status().message().c_str());
    return 1;
  }
  std::printf("\nlinks as the orchestrator last measured them (linkem's settings in brackets):\n");
  for (const auto& info : regions->regions()) {
    for (const auto& l : info.links()) {
      const auto into = std::find_if(co.regions.begin(), co.regions.end(), [&](const auto& r) { return r.name == l.peer(); });
      if (into == co.regions.end()) continue;
      std::printf("  %s -> %s: %.2f MB/s (%.2f), RTT %.0f ms (%.0f)\n", info.region().c_str(), l.peer().c_str(),
                  l.bytes_per_second() / 1e6, into->rate_mbit / 8, l.rtt_seconds() * 1e3, 2 * into->delay_ms);
    }
  }
  if (o.keep_logs) std::printf("\nlogs kept in %s\n", (*cluster)->log_dir().c_str());
  return 0;
}
