// bench_link_drop: what a job's compute utilisation does when one region's WAN
// links drop to a quarter of their rate mid-job, and whether the orchestrator's
// predicted wait follows the links it measures. No adaptation yet: this is the
// baseline that live re-planning (issue 34) is to beat.
//
// Setup: a LocalCluster, 3 regions over linkem links (bench::BenchRegions), one
// job (small preset, int8). When round D has committed, the bench writes
// "rate-mbit=<rate / factor>" into the control file of every linkem of one
// region (longhaul-linkem --control-file, <job dir>/linkem-N.control) and
// waits for the linkem's log to confirm it. Per round: compute (mean over
// regions), wall and comm (the longest wait) as the orchestrator committed
// them, its predicted comm, and CU = compute / wall. Summary: CU over rounds
// 2..D (before) and D+3..R (two rounds after the drop, as issue 34 measures).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "e2e_run.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/demo.h"
#include "longhaul/orchestrator/state_store.h"
#include "longhaul/proto/wire_enums.h"

using namespace longhaul;
namespace fs = std::filesystem;
namespace orch = longhaul::orchestrator;
using longhaul::sync_policies::SyncKind;

namespace {

struct Options {
  std::string kind = "diloco";  // diloco | streaming_diloco
  uint32_t h = 50, fragments = 4, overlap = 6;
  uint32_t rounds = 12, drop_after = 5;
  std::string region = "us-east";
  double factor = 4;
  int job_timeout_s = 1200;
};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes the control file of every linkem of `job_dir` and waits (bounded) for
// each to log its new shape.
Status DropLinks(const fs::path& job_dir, double rate_mbit) {
  std::vector<fs::path> logs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(job_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("linkem-", 0) == 0 && e.path().extension() == ".log") logs.push_back(e.path());
  }
  if (ec || logs.empty()) return NotFound("no linkem logs in " + job_dir.string() + " (is the WAN emulated?)");
  char text[64];
  std::snprintf(text, sizeof text, "rate-mbit=%g\n", rate_mbit);
  char expect[64];
  std::snprintf(expect, sizeof expect, "now rate-mbit=%g ", rate_mbit);
  for (const auto& log : logs) {
    fs::path control = log;
    control.replace_extension(".control");
    std::ofstream(control) << text;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (const auto& log : logs) {
    while (ReadFile(log).find(expect) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return DeadlineExceeded(log.string() + " never logged '" + expect + "'");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return Status::Ok();
}

double Cu(const std::vector<orch::CommittedRound>& rounds, uint32_t first, uint32_t last) {
  double compute = 0, wall = 0;
  for (const auto& r : rounds) {
    if (r.round < first || r.round > last) continue;
    compute += r.compute_seconds;
    wall += r.wall_seconds;
  }
  return wall > 0 ? compute / wall : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_link_drop: compute utilisation before and after one region's WAN links drop mid-job"};
  app.add_option("--kind", o.kind, "diloco | streaming_diloco")->check(CLI::IsMember({"diloco", "streaming_diloco"}));
  app.add_option("--inner-steps", o.h, "H")->check(CLI::Range(8, 100000));
  app.add_option("--fragments", o.fragments, "streaming_diloco: P")->check(CLI::Range(1, 64));
  app.add_option("--overlap-steps", o.overlap, "streaming_diloco: tau");
  app.add_option("--rounds", o.rounds, "outer rounds")->check(CLI::Range(6, 1000));
  app.add_option("--drop-after", o.drop_after, "the links drop once this round has committed")->check(CLI::Range(2, 1000));
  app.add_option("--region", o.region, "whose links drop (its inbound links: every peer's sends to it)");
  app.add_option("--factor", o.factor, "the rate is divided by this")->check(CLI::Range(1.0, 1000.0));
  app.add_option("--job-timeout-s", o.job_timeout_s, "give up on the job after this long");
  CLI11_PARSE(app, argc, argv);
  if (o.drop_after + 3 > o.rounds) {
    std::fprintf(stderr, "bench_link_drop: --rounds must leave 3 rounds after --drop-after\n");
    return 2;
  }
  orch::LocalClusterOptions co = bench::BenchClusterOptions(3, "link-drop", orch::DefaultBinDir(argv[0]));
  auto region = std::find_if(co.regions.begin(), co.regions.end(), [&](const auto& r) { return r.name == o.region; });
  if (region == co.regions.end()) {
    std::fprintf(stderr, "bench_link_drop: --region %s is not one of the bench's regions\n", o.region.c_str());
    return 2;
  }
  const double before_mbit = region->rate_mbit, after_mbit = region->rate_mbit / o.factor;
  auto cluster = orch::LocalCluster::Start(co);
  if (!cluster.ok()) {
    std::fprintf(stderr, "bench_link_drop: %s\n", cluster.status().message().c_str());
    return 1;
  }
  v1::JobSpec spec = bench::BuiltinJobSpec("link drop " + o.kind, "small", co.regions);
  spec.set_rounds(o.rounds);
  const bool streaming = o.kind == "streaming_diloco";
  proto::SetSyncKind(spec.mutable_sync(), streaming ? SyncKind::kStreamingDiLoCo : SyncKind::kDiLoCo);
  spec.mutable_sync()->set_inner_steps(o.h);
  spec.mutable_sync()->set_fragments(streaming ? o.fragments : 1);
  spec.mutable_sync()->set_overlap_steps(streaming ? o.overlap : 0);
  spec.mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
  auto id = (*cluster)->Submit(spec);
  if (!id.ok()) {
    std::fprintf(stderr, "bench_link_drop: %s\n", id.status().message().c_str());
    return 1;
  }
  Status drop = Status::Ok();
  bool dropped = false;
  auto status = (*cluster)->WaitForJob(*id, std::chrono::seconds(o.job_timeout_s), std::chrono::milliseconds(100),
                                       [&](const v1::JobStatus& s) {
                                         if (dropped || s.round() < o.drop_after) return;
                                         dropped = true;
                                         drop = DropLinks((*cluster)->work_dir() / o.region / *id, after_mbit);
                                         std::fprintf(stderr, "round %u committed: %s's links %g -> %g Mbit/s%s\n",
                                                      s.round(), o.region.c_str(), before_mbit, after_mbit,
                                                      drop.ok() ? "" : (" FAILED: " + drop.message()).c_str());
                                       });
  if (!status.ok() || status->state() != "succeeded" || !drop.ok()) {
    std::fprintf(stderr, "bench_link_drop: %s (logs: %s)\n",
                 !drop.ok()       ? drop.message().c_str()
                 : !status.ok()   ? status.status().message().c_str()
                                  : (status->state() + ": " + status->reason()).c_str(),
                 (*cluster)->log_dir().c_str());
    return 1;
  }
  auto store = orch::StateStore::Open((*cluster)->state_file());
  auto rounds = store.ok() ? (*store)->LoadRounds(*id) : Result<std::vector<orch::CommittedRound>>(store.status());
  if (!rounds.ok()) {
    std::fprintf(stderr, "bench_link_drop: %s\n", rounds.status().message().c_str());
    return 1;
  }
  std::printf("%s H=%u%s int8, small preset, 3 regions over linkem links; %s's links %g -> %g Mbit/s after round %u\n\n",
              o.kind.c_str(), o.h,
              streaming ? (" P=" + std::to_string(o.fragments) + " tau=" + std::to_string(o.overlap)).c_str() : "",
              o.region.c_str(), before_mbit, after_mbit, o.drop_after);
  std::printf("| round | compute | wall | comm (longest wait) | predicted comm | CU |\n|---|---|---|---|---|---|\n");
  for (const auto& r : *rounds) {
    std::printf("| %u%s | %.2f s | %.2f s | %.2f s | %.2f s | %.1f%% |\n", r.round, r.round == o.drop_after + 1 ? " (dropped)" : "",
                r.compute_seconds, r.wall_seconds, r.comm_seconds, r.predicted_comm_seconds,
                r.wall_seconds > 0 ? 100 * r.compute_seconds / r.wall_seconds : 0.0);
  }
  std::printf("\nCU rounds 2-%u (before): %.1f%%; rounds %u-%u (two rounds after the drop): %.1f%%; no adaptation\n",
              o.drop_after, 100 * Cu(*rounds, 2, o.drop_after), o.drop_after + 3, o.rounds,
              100 * Cu(*rounds, o.drop_after + 3, o.rounds));
  return 0;
}
