// bench_uneven: a job with one region computing at half speed (the worker
// throttle, longhaul-agent --compute-throttle-percent 200), run with fixed-H
// rounds and with time-budgeted rounds (sync.time_budgeted), one job each on a
// fresh local cluster, the same spec and seed otherwise.
//
// Per round and region (the orchestrator's round_regions rows): the steps it
// ran and its CU = its compute / the round's wall time (the throttle's sleep
// counts as compute: it is how slow the region is). Summary per mode: each
// region's CU over rounds 2..R-1, the final validation loss and the job's time
// (first round's start to last commit), per seed and their mean: the
// time-budgeted job runs twice the rounds, in about the fixed job's time (its
// rounds are the fast regions' H steps, not the slow one's). --check: exit 3 unless, over the
// time-budgeted rounds after the first, the slow region ran fewer steps than
// each other region (the test suite runs it so, at a 4x throttle).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>

#include "e2e_run.h"
#include "longhaul/orchestrator/demo.h"
#include "longhaul/proto/wire_enums.h"

using namespace longhaul;
namespace orch = longhaul::orchestrator;

namespace {

struct Options {
  std::string preset = "tiny";
  uint32_t h = 400, rounds = 8, batch = 64;
  std::string slow_region = "us-east";
  int throttle_percent = 200;
  bool wan = false;  // linkem links (the bench's WAN profiles) instead of loopback
  bool check = false;
  uint32_t seeds = 3;
  int job_timeout_s = 1200;
};

// Seconds from the job's first round's start (its commit less its wall time)
// to each round's commit: the control plane's share of a round counts too.
std::vector<double> Elapsed(const std::vector<orch::CommittedRound>& rounds) {
  std::vector<double> out;
  if (rounds.empty()) return out;
  const double start = rounds.front().committed_at - rounds.front().wall_seconds;
  for (const auto& r : rounds) out.push_back(r.committed_at - start);
  return out;
}

// Over rounds 2..R-1: round 1 runs H everywhere (nothing measured yet), and the
// last round's wall holds the job's final, larger validation.
std::map<std::string, double> RegionCu(const std::vector<orch::CommittedRound>& rounds) {
  std::map<std::string, double> compute, wall;
  for (const auto& r : rounds) {
    if (r.round < 2 || r.round == rounds.back().round) continue;
    for (const auto& g : r.regions) {
      compute[g.region] += g.compute_seconds;
      wall[g.region] += r.wall_seconds;
    }
  }
  std::map<std::string, double> cu;
  for (const auto& [region, c] : compute) cu[region] = wall[region] > 0 ? c / wall[region] : 0;
  return cu;
}

void PrintRounds(const std::vector<orch::CommittedRound>& rounds, const std::vector<std::string>& regions) {
  std::printf("| round | wall |");
  for (const auto& r : regions) std::printf(" %s steps | %s CU |", r.c_str(), r.c_str());
  std::printf(" val loss |\n|---|---|");
  for (size_t i = 0; i < regions.size(); ++i) std::printf("---|---|");
  std::printf("---|\n");
  for (const auto& round : rounds) {
    std::printf("| %u | %.2f s |", round.round, round.wall_seconds);
    for (const auto& name : regions) {
      auto g = std::find_if(round.regions.begin(), round.regions.end(), [&](const auto& x) { return x.region == name; });
      if (g == round.regions.end()) {
        std::printf(" - | - |");
        continue;
      }
      std::printf(" %u | %.1f%% |", g->inner_steps,
                  round.wall_seconds > 0 ? 100 * g->compute_seconds / round.wall_seconds : 0.0);
    }
    std::printf(" %.4f |\n", round.val_loss);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_uneven: one region at half speed, fixed-H against time-budgeted rounds"};
  app.add_option("--preset", o.preset, "built-in trainer preset")->check(CLI::IsMember({"tiny", "small"}));
  app.add_option("--inner-steps", o.h, "H")->check(CLI::Range(4, 100000));
  app.add_option("--batch", o.batch, "sequences per worker per inner step")->check(CLI::Range(1, 4096));
  app.add_option("--rounds", o.rounds, "rounds of the fixed-H job (the time-budgeted job runs twice as many)")
      ->check(CLI::Range(3, 1000));
  app.add_option("--slow-region", o.slow_region, "the region whose workers compute slower");
  app.add_option("--throttle-percent", o.throttle_percent, "its compute time in percent of its own speed")
      ->check(CLI::Range(100, 10000));
  app.add_option("--seeds", o.seeds, "model and data seeds 1..N, both modes each")->check(CLI::Range(1, 100));
  app.add_flag("--wan", o.wan, "linkem links with the bench's WAN profiles instead of loopback");
  app.add_flag("--check", o.check, "exit 3 unless, over the time-budgeted rounds after the first, the slow "
                                   "region ran fewer steps than each other");
  app.add_option("--job-timeout-s", o.job_timeout_s, "give up on a job after this long");
  CLI11_PARSE(app, argc, argv);
  orch::LocalClusterOptions co = bench::BenchClusterOptions(3, "uneven", orch::DefaultBinDir(argv[0]));
  co.wan_emulation = o.wan;
  auto slow = std::find_if(co.regions.begin(), co.regions.end(), [&](const auto& r) { return r.name == o.slow_region; });
  if (slow == co.regions.end()) {
    std::fprintf(stderr, "bench_uneven: --slow-region %s is not one of the bench's regions\n", o.slow_region.c_str());
    return 2;
  }
  slow->compute_throttle_percent = o.throttle_percent;
  std::vector<std::string> names;
  for (const auto& r : co.regions) names.push_back(r.name);
  std::printf("DiLoCo H=%u int8, %s preset, batch %u, 3 regions over %s; %s computes at %d%% of its time\n", o.h,
              o.preset.c_str(), o.batch, o.wan ? "linkem links" : "loopback", o.slow_region.c_str(), o.throttle_percent);

  struct Result {
    std::map<std::string, double> cu;
    double final_loss = 0, seconds = 0;
  };
  std::vector<Result> results[2];
  for (uint32_t seed = 1; seed <= o.seeds; ++seed) {
    for (const bool budgeted : {false, true}) {
      auto cluster = orch::LocalCluster::Start(co);
      if (!cluster.ok()) {
        std::fprintf(stderr, "bench_uneven: %s\n", cluster.status().message().c_str());
        return 1;
      }
      v1::JobSpec spec =
          bench::BuiltinJobSpec(budgeted ? "uneven time-budgeted" : "uneven fixed H", o.preset, co.regions);
      spec.mutable_sync()->set_inner_steps(o.h);
      spec.mutable_inner()->set_batch_size(o.batch);
      spec.mutable_sync()->set_time_budgeted(budgeted);
      spec.mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
      spec.set_rounds(budgeted ? 2 * o.rounds : o.rounds);
      spec.set_seed(seed);
      spec.mutable_data()->mutable_synthetic()->set_seed(seed);
      auto run = bench::RunJob(**cluster, spec, std::chrono::seconds(o.job_timeout_s));
      if (!run.ok()) {
        std::fprintf(stderr, "bench_uneven: %s (logs: %s)\n", run.status().message().c_str(),
                     (*cluster)->log_dir().c_str());
        return 1;
      }
      const auto& rounds = run->rounds;
      if (seed == 1) {
        std::printf("\nseed 1, %s:\n\n", budgeted ? "time-budgeted rounds (sync.time_budgeted)" : "fixed H");
        PrintRounds(rounds, names);
      }
      results[budgeted].push_back({RegionCu(rounds), rounds.back().val_loss, Elapsed(rounds).back()});
      if (o.check && budgeted) {
        // Over the rounds after the first, not round by round: a fast region
        // stalled for a moment in one round (a loaded machine) rightly runs
        // fewer steps in it.
        std::map<std::string, uint64_t> steps;
        for (const auto& round : rounds) {
          if (round.round < 2) continue;
          for (const auto& g : round.regions) steps[g.region] += g.inner_steps;
          if (round.regions.size() != 3) {
            std::fprintf(stderr, "bench_uneven: time-budgeted round %u had %zu regions, not 3\n", round.round,
                         round.regions.size());
            return 3;
          }
        }
        const uint64_t slow_steps = steps.count(o.slow_region) ? steps.at(o.slow_region) : 0;
        for (const auto& [region, n] : steps) {
          if (region == o.slow_region || (slow_steps > 0 && slow_steps < n)) continue;
          std::fprintf(stderr, "bench_uneven: time-budgeted rounds 2..%zu: %s ran %lu steps, %s %lu\n", rounds.size(),
                       o.slow_region.c_str(), static_cast<unsigned long>(slow_steps), region.c_str(),
                       static_cast<unsigned long>(n));
          return 3;
        }
      }
    }
  }
  std::printf("\n| seed | mode |");
  for (const auto& r : names) std::printf(" %s CU |", r.c_str());
  std::printf(" final val loss | job time |\n|---|---|");
  for (size_t i = 0; i < names.size(); ++i) std::printf("---|");
  std::printf("---|---|\n");
  for (const bool budgeted : {false, true}) {
    Result mean;
    for (size_t k = 0; k < results[budgeted].size(); ++k) {
      const Result& r = results[budgeted][k];
      std::printf("| %zu | %s |", k + 1, budgeted ? "time-budgeted" : "fixed H");
      for (const auto& n : names) {
        const double cu = r.cu.count(n) ? r.cu.at(n) : 0.0;
        std::printf(" %.1f%% |", 100 * cu);
        mean.cu[n] += cu / static_cast<double>(results[budgeted].size());
      }
      std::printf(" %.4f | %.1f s |\n", r.final_loss, r.seconds);
      mean.final_loss += r.final_loss / static_cast<double>(results[budgeted].size());
      mean.seconds += r.seconds / static_cast<double>(results[budgeted].size());
    }
    std::printf("| mean | %s |", budgeted ? "time-budgeted" : "fixed H");
    for (const auto& n : names) std::printf(" %.1f%% |", 100 * mean.cu[n]);
    std::printf(" %.4f | %.1f s |\n", mean.final_loss, mean.seconds);
  }
  std::printf("\nCU over rounds 2..R-1 of each job (round 1 runs H everywhere; the last round holds the final, "
              "larger validation); final val loss: the last round's; job time: from the first round's start to the "
              "last commit.\n");
  return 0;
}
