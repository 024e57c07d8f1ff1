// bench_link_drop: what a job's compute utilisation does when one region's WAN
// links drop to a quarter of their rate mid-job, without and with live
// re-planning (sync.adaptive), and whether the orchestrator's predicted wait
// follows the links it measures.
//
// Setup: per mode a LocalCluster, 3 regions over linkem links
// (bench::BenchRegions), and one job (small preset, int8, the same seed): "fixed" keeps the
// spec's schedule, "adaptive" says sync.adaptive {target_utilisation,
// max_inner_steps, codecs}. When round D has committed, the bench writes
// "rate-mbit=<rate / factor>" into the control file of every linkem of one
// region (longhaul-linkem --control-file, <job dir>/linkem-N.control) and
// waits for the linkem's log to confirm it. Per round: the round's plan (H,
// codec), compute (mean over regions), wall and comm (the longest wait) as the
// orchestrator committed them, its predicted comm, and CU = compute / wall.
// Summary per mode: CU over rounds 2..D (before) and D+3..R (two rounds after
// the drop, as issue 34 measures), and the job's re-plans.
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
  std::string mode = "both";  // fixed | adaptive | both
  double target = 0.6;
  uint32_t max_inner_steps = 400;
  uint32_t max_overlap_steps = 0;
  std::vector<std::string> codecs = {"int8", "int4"};
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

struct JobRun {
  std::vector<orch::CommittedRound> rounds;
  uint32_t replans = 0;
  std::vector<std::string> replan_events;  // the job's "replanned" events, oldest first
};

// One job on the cluster; its links drop once round o.drop_after has committed.
Result<JobRun> RunJob(orch::LocalCluster& cluster, const Options& o, const std::vector<orch::LocalRegion>& regions,
                      bool adaptive, double before_mbit, double after_mbit) {
  v1::JobSpec spec = bench::BuiltinJobSpec("link drop " + o.kind + (adaptive ? " adaptive" : " fixed"), "small", regions);
  spec.set_rounds(o.rounds);
  const bool streaming = o.kind == "streaming_diloco";
  proto::SetSyncKind(spec.mutable_sync(), streaming ? SyncKind::kStreamingDiLoCo : SyncKind::kDiLoCo);
  spec.mutable_sync()->set_inner_steps(o.h);
  spec.mutable_sync()->set_fragments(streaming ? o.fragments : 1);
  spec.mutable_sync()->set_overlap_steps(streaming ? o.overlap : 0);
  spec.mutable_compression()->set_codec(v1::CODEC_INT8_BLOCK);
  if (adaptive) {
    auto* a = spec.mutable_sync()->mutable_adaptive();
    a->set_target_utilisation(o.target);
    a->set_max_inner_steps(o.max_inner_steps);
    if (streaming) a->set_max_overlap_steps(o.max_overlap_steps);
    for (const auto& name : o.codecs) {
      LONGHAUL_ASSIGN_OR_RETURN(v1::Codec codec, proto::CodecFromName(name));
      a->add_codecs(codec);
    }
  }
  LONGHAUL_ASSIGN_OR_RETURN(std::string id, cluster.Submit(spec));
  Status drop = Status::Ok();
  bool dropped = false;
  auto status = cluster.WaitForJob(id, std::chrono::seconds(o.job_timeout_s), std::chrono::milliseconds(100),
                                   [&](const v1::JobStatus& s) {
                                     if (dropped || s.round() < o.drop_after) return;
                                     dropped = true;
                                     drop = DropLinks(cluster.work_dir() / o.region / id, after_mbit);
                                     std::fprintf(stderr, "%s: round %u committed: %s's links %g -> %g Mbit/s%s\n",
                                                  id.c_str(), s.round(), o.region.c_str(), before_mbit, after_mbit,
                                                  drop.ok() ? "" : (" FAILED: " + drop.message()).c_str());
                                   });
  LONGHAUL_RETURN_IF_ERROR(drop);
  if (!status.ok()) return status.status();
  if (status->state() != "succeeded") return Aborted(id + " " + status->state() + ": " + status->reason());
  LONGHAUL_ASSIGN_OR_RETURN(auto store, orch::StateStore::Open(cluster.state_file()));
  JobRun run;
  LONGHAUL_ASSIGN_OR_RETURN(run.rounds, store->LoadRounds(id));
  LONGHAUL_ASSIGN_OR_RETURN(auto job, store->LoadJob(id));
  if (job) run.replans = job->replans;
  LONGHAUL_ASSIGN_OR_RETURN(auto events, store->LoadEvents(id, 1000));
  for (const auto& e : events)
    if (e.kind == "replanned") run.replan_events.push_back(e.message);
  return run;
}

void PrintRounds(const JobRun& run, uint32_t drop_after) {
  std::printf("| round | plan | compute | wall | comm (longest wait) | predicted comm | CU | val loss |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : run.rounds) {
    std::printf("| %u%s | H=%u%s %s | %.2f s | %.2f s | %.2f s | %.2f s | %.1f%% | %.4f |\n", r.round,
                r.round == drop_after + 1 ? " (dropped)" : "", r.inner_steps,
                r.overlap_steps > 0 ? (" tau=" + std::to_string(r.overlap_steps)).c_str() : "",
                std::string(proto::CodecName(r.codec)).c_str(), r.compute_seconds, r.wall_seconds, r.comm_seconds,
                r.predicted_comm_seconds, r.wall_seconds > 0 ? 100 * r.compute_seconds / r.wall_seconds : 0.0,
                r.val_loss);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_link_drop: compute utilisation before and after one region's WAN links drop mid-job, "
               "without and with live re-planning"};
  app.add_option("--kind", o.kind, "diloco | streaming_diloco")->check(CLI::IsMember({"diloco", "streaming_diloco"}));
  app.add_option("--inner-steps", o.h, "H")->check(CLI::Range(8, 100000));
  app.add_option("--fragments", o.fragments, "streaming_diloco: P")->check(CLI::Range(1, 64));
  app.add_option("--overlap-steps", o.overlap, "streaming_diloco: tau");
  app.add_option("--rounds", o.rounds, "outer rounds")->check(CLI::Range(6, 1000));
  app.add_option("--drop-after", o.drop_after, "the links drop once this round has committed")->check(CLI::Range(2, 1000));
  app.add_option("--region", o.region, "whose links drop (its inbound links: every peer's sends to it)");
  app.add_option("--factor", o.factor, "the rate is divided by this")->check(CLI::Range(1.0, 1000.0));
  app.add_option("--mode", o.mode, "fixed (the spec's schedule), adaptive (sync.adaptive) or both, one job each")
      ->check(CLI::IsMember({"fixed", "adaptive", "both"}));
  app.add_option("--target", o.target, "adaptive: sync.adaptive.target_utilisation")->check(CLI::Range(0.01, 1.0));
  app.add_option("--max-inner-steps", o.max_inner_steps, "adaptive: sync.adaptive.max_inner_steps");
  app.add_option("--codecs", o.codecs, "adaptive: sync.adaptive.codecs, most preferred first");
  app.add_option("--max-overlap-steps", o.max_overlap_steps, "adaptive, streaming_diloco: sync.adaptive.max_overlap_steps");
  app.add_option("--job-timeout-s", o.job_timeout_s, "give up on a job after this long");
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
  const bool streaming = o.kind == "streaming_diloco";
  std::printf("%s H=%u%s int8, small preset, 3 regions over linkem links; %s's links %g -> %g Mbit/s after round %u\n",
              o.kind.c_str(), o.h,
              streaming ? (" P=" + std::to_string(o.fragments) + " tau=" + std::to_string(o.overlap)).c_str() : "",
              o.region.c_str(), before_mbit, after_mbit, o.drop_after);
  std::string summary;
  for (const bool adaptive : {false, true}) {
    if (o.mode != "both" && (o.mode == "adaptive") != adaptive) continue;
    // A cluster of its own per job: the orchestrator's link estimates (per pair
    // of regions, shared by jobs) would carry the first job's dropped link into
    // the second's, whose linkem links start at the full rate.
    auto cluster = orch::LocalCluster::Start(co);
    if (!cluster.ok()) {
      std::fprintf(stderr, "bench_link_drop: %s\n", cluster.status().message().c_str());
      return 1;
    }
    auto run = RunJob(**cluster, o, co.regions, adaptive, before_mbit, after_mbit);
    if (!run.ok()) {
      std::fprintf(stderr, "bench_link_drop: %s (logs: %s)\n", run.status().message().c_str(),
                   (*cluster)->log_dir().c_str());
      return 1;
    }
    std::string codecs;
    for (const auto& c : o.codecs) codecs += (codecs.empty() ? "" : ", ") + c;
    const std::string mode = adaptive ? "adaptive (target " + std::to_string(static_cast<int>(100 * o.target + 0.5)) +
                                            "%, H up to " + std::to_string(o.max_inner_steps) + ", codecs " + codecs + ")"
                                      : std::string("fixed schedule");
    std::printf("\n%s:\n\n", mode.c_str());
    PrintRounds(*run, o.drop_after);
    if (!run->replan_events.empty()) std::printf("\nre-plans:\n");
    for (const auto& e : run->replan_events) std::printf("- %s\n", e.c_str());
    char line[400];
    std::snprintf(line, sizeof line, "%s: CU rounds 2-%u (before) %.1f%%, rounds %u-%u (two rounds after the drop) %.1f%%%s\n",
                  adaptive ? "adaptive" : "fixed   ", o.drop_after, 100 * Cu(run->rounds, 2, o.drop_after),
                  o.drop_after + 3, o.rounds, 100 * Cu(run->rounds, o.drop_after + 3, o.rounds),
                  adaptive ? (", " + std::to_string(run->replans) + " re-plan(s); target " +
                              std::to_string(static_cast<int>(100 * o.target + 0.5)) + "%")
                                 .c_str()
                           : "");
    summary += line;
  }
  std::printf("\n%s", summary.c_str());
  return 0;
}
