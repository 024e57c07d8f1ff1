// bench_convergence: DiLoCo against the fully synchronous baseline, end to end.
//
// Every run is a real job on a LocalCluster (orchestrator, one agent per
// region, workers, linkem WAN links, CURVE): the built-in trainer on the
// synthetic Markov source (known loss floor) or on a text file. All runs of a
// comparison use the same total compute and tokens: T inner steps per worker
// at the same batch size, so a DiLoCo run with H inner steps has T/H rounds.
// The synchronous baseline averages gradients (fp32) across regions after
// every one of its T steps. Each variant is compared with the baseline of its
// own region count and data.
//
// Prints: final validation loss, gap to the floor, gap to the baseline, WAN
// bytes, communication reduction vs the baseline, wall time. Target (the DiLoCo
// paper's claim at small scale): H=50 int8 at most 2% above the baseline's
// validation loss with >= 100x fewer WAN bytes. --out DIR writes the table
// (convergence.md) and every run's loss-vs-bytes curve (convergence.tsv, one
// row per committed round) for bench/convergence/plot.sh.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "e2e_run.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/demo.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/proto/wire_enums.h"

using namespace longhaul;
namespace orch = longhaul::orchestrator;
using longhaul::sync_policies::SyncKind;
namespace fs = std::filesystem;

namespace {

std::string Fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof(b), f, x);
  return b;
}
std::string Fmt0(double x) { return Fmt("%.0f", x); }

struct Variant {
  std::string group;  // which question the run answers: H, codec, regions, data
  uint32_t regions = 3;
  std::string data = "non-iid";  // iid | non-iid | text
  SyncKind kind = SyncKind::kDiLoCo;
  uint32_t h = 50;
  v1::Codec codec = v1::CODEC_INT8_BLOCK;
  double outer_momentum = -1;  // < 0: the run's --outer-momentum

  std::string Setting() const { return std::to_string(regions) + " regions, " + data; }
  std::string Policy() const {
    if (kind == SyncKind::kSync) return "sync fp32 (baseline)";
    std::string p = "DiLoCo H=" + std::to_string(h) + " " + std::string(proto::CodecName(codec));
    if (outer_momentum >= 0) p += " (outer momentum " + Fmt("%.1f", outer_momentum) + ")";
    return p;
  }
  std::string Key() const { return Setting() + " / " + Policy(); }
};

struct Options {
  uint32_t total_steps = 600;
  uint32_t sync_round_steps = 50;  // the baseline's steps per (reporting) round
  std::string preset = "tiny";
  double lr = 2e-2;
  std::string outer = "nesterov";
  // DiLoCo's outer lr, with momentum 0.5 rather than the paper's 0.9: these runs
  // have 3-60 outer steps, and momentum 0.9 (a memory of ~10 steps) overshoots
  // and oscillates over so few; the paper's setting is run too, as its own row.
  double outer_lr = 0.7, outer_momentum = 0.5;
  bool no_baseline = false;
  uint32_t batch = 16;
  std::string text_file;  // default: Debian's license texts, concatenated
  std::string out_dir;
  std::string only;  // run only the variants of this group (plus their baselines)
  bool no_wan_emulation = false;
  int job_timeout_s = 900;
};

std::vector<Variant> Plan(const Options& o) {
  std::vector<Variant> v;
  auto add = [&](std::string group, uint32_t regions, std::string data, SyncKind kind, uint32_t h, v1::Codec c,
                 double outer_momentum = -1) {
    if (!o.only.empty() && group != o.only && kind != SyncKind::kSync) return;
    v.push_back({std::move(group), regions, std::move(data), kind, h, c, outer_momentum});
  };
  const auto fp32 = v1::CODEC_FP32, int8 = v1::CODEC_INT8_BLOCK;
  // The central setting: 3 regions, non-IID synthetic data.
  add("H", 3, "non-iid", SyncKind::kSync, 0, fp32);
  for (uint32_t h : {10u, 50u, 200u}) add("H", 3, "non-iid", SyncKind::kDiLoCo, h, fp32);
  add("codec", 3, "non-iid", SyncKind::kDiLoCo, 50, int8);
  add("outer", 3, "non-iid", SyncKind::kDiLoCo, 50, int8, 0.9);  // the DiLoCo paper's outer momentum
  add("codec", 3, "non-iid", SyncKind::kDiLoCo, 50, v1::CODEC_INT4_BLOCK);
  add("codec", 3, "non-iid", SyncKind::kDiLoCo, 50, v1::CODEC_FP4_E3M0);
  for (uint32_t m : {2u, 4u}) {
    add("regions", m, "non-iid", SyncKind::kSync, 0, fp32);
    add("regions", m, "non-iid", SyncKind::kDiLoCo, 50, int8);
  }
  for (const char* data : {"iid", "text"}) {
    add("data", 3, data, SyncKind::kSync, 0, fp32);
    add("data", 3, data, SyncKind::kDiLoCo, 50, int8);
  }
  // A group filter keeps only the baselines its variants need.
  std::vector<Variant> kept;
  for (const auto& x : v) {
    if (x.kind == SyncKind::kSync && o.no_baseline) continue;
    if (x.kind != SyncKind::kSync) {
      kept.push_back(x);
      continue;
    }
    for (const auto& y : v)
      if (y.kind != SyncKind::kSync && y.regions == x.regions && y.data == x.data) {
        kept.push_back(x);
        break;
      }
  }
  return kept;
}

v1::JobSpec SpecFor(const Variant& v, const Options& o, const std::vector<orch::LocalRegion>& regions) {
  v1::JobSpec s = orch::DefaultJobSpec();
  s.set_name(v.Key());
  s.set_model_preset(o.preset);
  s.clear_regions();
  for (uint32_t i = 0; i < v.regions; ++i) s.add_regions(regions[i].name);
  s.set_region_count(v.regions);
  s.set_min_regions(v.regions);
  s.mutable_inner()->set_lr(o.lr);
  s.mutable_inner()->set_warmup_steps(10);
  s.mutable_inner()->set_batch_size(o.batch);
  if (v.kind != SyncKind::kSync) {
    s.mutable_outer()->set_name(o.outer);
    s.mutable_outer()->set_lr(o.outer_lr);
    s.mutable_outer()->set_momentum(v.outer_momentum >= 0 ? v.outer_momentum : o.outer_momentum);
  }
  if (v.data == "text") {
    s.mutable_data()->mutable_text_file()->set_path(o.text_file);
    s.mutable_data()->mutable_text_file()->set_validation_fraction(0.05);
  } else {
    s.mutable_data()->mutable_synthetic()->set_non_iid(v.data == "non-iid");
  }
  const uint32_t h = v.kind == SyncKind::kSync ? o.sync_round_steps : v.h;
  proto::SetSyncKind(s.mutable_sync(), v.kind);
  s.mutable_sync()->set_inner_steps(h);
  s.set_rounds(std::max(1u, o.total_steps / h));
  s.mutable_compression()->set_codec(v.codec);
  return s;
}

// Debian's license texts (base-files, on every Debian machine), concatenated
// in name order: about 200 KB of English prose.
Result<std::string> DefaultTextFile(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/share/common-licenses", ec))
    if (e.is_regular_file()) files.push_back(e.path());
  if (ec || files.empty()) return NotFound("no text file: /usr/share/common-licenses is empty; pass --text-file");
  std::sort(files.begin(), files.end());
  const fs::path out = dir / "licenses.txt";
  std::ofstream o(out, std::ios::binary);
  for (const auto& f : files) o << std::ifstream(f, std::ios::binary).rdbuf();
  if (!o) return Internal("cannot write " + out.string());
  return out.string();
}

std::string LinkSummary() {
  std::string s;
  for (const auto& r : bench::BenchRegions(4))
    s += (s.empty() ? "" : "; ") + r.name + " " + Fmt0(r.rate_mbit) + " Mbit/s " + Fmt0(r.delay_ms) + " ms";
  return s;
}

struct Row {
  Variant v;
  bench::E2eRun run;
};


std::string Table(const std::vector<Row>& rows, const Options& o, bool* target_met) {
  std::map<std::string, const Row*> baseline;
  for (const auto& r : rows)
    if (r.v.kind == SyncKind::kSync) baseline[r.v.Setting()] = &r;
  std::ostringstream t;
  t << "| setting | policy | rounds | val loss | gap to floor | vs sync | WAN bytes | comm reduction | wall |\n"
    << "|---|---|---|---|---|---|---|---|---|\n";
  *target_met = false;
  bool target_seen = false;
  std::ostringstream target;
  for (const auto& r : rows) {
    const auto& s = r.run.status;
    const double floor = s.loss_floor();
    const Row* b = baseline.count(r.v.Setting()) ? baseline[r.v.Setting()] : nullptr;
    const double gap = b ? s.val_loss() / b->run.status.val_loss() - 1 : NAN;
    const double reduction =
        b && s.wan_bytes() > 0 ? static_cast<double>(b->run.status.wan_bytes()) / static_cast<double>(s.wan_bytes()) : NAN;
    t << "| " << r.v.Setting() << " | " << r.v.Policy() << " | " << s.total_rounds() << " | "
      << Fmt("%.4f", s.val_loss()) << " | " << (floor > 0 ? Fmt("%+.4f", s.val_loss() - floor) : "-") << " | "
      << (b && b != &r ? Fmt("%+.2f%%", 100 * gap) : std::string("-")) << " | " << orch::HumanBytes(static_cast<double>(s.wan_bytes()))
      << " | " << (b == &r ? "1x" : b ? Fmt("%.0fx", reduction) : "-") << " | " << orch::HumanSeconds(s.wall_seconds())
      << " |\n";
    if (r.v.kind == SyncKind::kDiLoCo && r.v.h == 50 && r.v.codec == v1::CODEC_INT8_BLOCK && r.v.regions == 3 &&
        r.v.data == "non-iid" && r.v.outer_momentum < 0 && b) {
      target_seen = true;
      // "Within 2%" of the baseline: at most 2% above it (lower is better).
      *target_met = gap <= 0.02 && reduction >= 100;
      target << "Target (3 regions, non-IID): DiLoCo H=50 int8 at most 2% above the synchronous baseline's "
             << "validation loss with >= 100x fewer WAN bytes: " << Fmt("%+.2f%%", 100 * gap) << ", "
             << Fmt("%.0fx", reduction) << (*target_met ? " -> met\n" : " -> not met\n");
    }
  }
  t << "\n" << (target_seen ? target.str() : "(the target's run, 3 regions non-IID DiLoCo H=50 int8, was not part of this run)\n");
  t << "\nEqual compute and tokens: " << o.total_steps << " inner steps per worker, batch " << o.batch
    << ", preset " << o.preset << ", inner AdamW lr " << o.lr << "; DiLoCo outer " << o.outer << " lr " << o.outer_lr
    << " momentum " << o.outer_momentum << ".\n";
  return t.str();
}

void WriteCurves(const std::vector<Row>& rows, const fs::path& file) {
  std::ofstream o(file);
  o << "# run\tsetting\tpolicy\tround\tcumulative_wan_bytes\tval_loss\tloss_floor\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    uint64_t bytes = 0;
    for (const auto& c : rows[i].run.rounds) {
      bytes += c.wan_bytes;
      o << i << "\t" << rows[i].v.Setting() << "\t" << rows[i].v.Policy() << "\t" << c.round << "\t" << bytes << "\t"
        << c.val_loss << "\t" << rows[i].run.status.loss_floor() << "\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_convergence: DiLoCo vs the fully synchronous baseline through the real processes"};
  app.add_option("--total-steps", o.total_steps, "inner steps per worker in every run (equal compute)")
      ->check(CLI::Range(10, 1000000));
  app.add_option("--preset", o.preset, "model preset (tiny | small)");
  app.add_option("--lr", o.lr, "inner AdamW learning rate");
  app.add_option("--batch", o.batch, "sequences per worker per step")->check(CLI::Range(1, 4096));
  app.add_option("--outer", o.outer, "outer optimizer of the DiLoCo runs")->check(CLI::IsMember({"nesterov", "sgd"}));
  app.add_option("--outer-lr", o.outer_lr, "outer learning rate of the DiLoCo runs");
  app.add_option("--outer-momentum", o.outer_momentum, "outer momentum of the DiLoCo runs");
  app.add_flag("--no-baseline", o.no_baseline, "skip the synchronous baselines (no comparison columns)");
  app.add_option("--text-file", o.text_file, "text for the 'text' data runs (default: /usr/share/common-licenses/*)");
  app.add_option("--out", o.out_dir, "write convergence.md and convergence.tsv here");
  app.add_option("--only", o.only, "run one group: H | codec | outer | regions | data (and its baselines)")
      ->check(CLI::IsMember({"H", "codec", "outer", "regions", "data"}));
  app.add_flag("--no-wan-emulation", o.no_wan_emulation, "plain loopback links (no longhaul-linkem)");
  app.add_option("--job-timeout-s", o.job_timeout_s, "give up on a job after this long");
  CLI11_PARSE(app, argc, argv);

  const std::vector<Variant> plan = Plan(o);
  uint32_t max_regions = 0;
  for (const auto& v : plan) max_regions = std::max(max_regions, v.regions);
  orch::LocalClusterOptions co = bench::BenchClusterOptions(max_regions, "convergence", orch::DefaultBinDir(argv[0]));
  co.wan_emulation = !o.no_wan_emulation;
  auto cluster = orch::LocalCluster::Start(co);
  if (!cluster.ok()) {
    std::fprintf(stderr, "bench_convergence: %s\n", cluster.status().message().c_str());
    return 1;
  }
  if (o.text_file.empty()) {
    auto text = DefaultTextFile((*cluster)->work_dir());
    if (!text.ok()) {
      std::fprintf(stderr, "bench_convergence: %s\n", text.status().message().c_str());
      return 1;
    }
    o.text_file = *text;
  }
  std::vector<Row> rows;
  for (const auto& v : plan) {
    std::fprintf(stderr, "run %zu/%zu: %s\n", rows.size() + 1, plan.size(), v.Key().c_str());
    auto run = bench::RunJob(**cluster, SpecFor(v, o, co.regions), std::chrono::seconds(o.job_timeout_s));
    if (!run.ok()) {
      std::fprintf(stderr, "bench_convergence: %s (logs: %s)\n", run.status().message().c_str(),
                   (*cluster)->log_dir().c_str());
      return 1;
    }
    rows.push_back({v, std::move(*run)});
  }
  bool met = false;
  const std::string table = Table(rows, o, &met);
  std::printf("%s", table.c_str());
  if (!o.out_dir.empty()) {
    fs::create_directories(o.out_dir);
    std::ofstream(fs::path(o.out_dir) / "convergence.md")
        << "# bench_convergence\n\nPrinted by `bench_convergence` (regenerate this file, convergence.tsv and "
           "convergence.png with `bench/convergence/regenerate.sh`). Every run is a real job: orchestrator, "
           "one agent per region, workers, CURVE WAN links behind longhaul-linkem ("
        << LinkSummary() << ").\n\n"
        << table << "\n![validation loss vs WAN bytes](convergence.png)\n";
    WriteCurves(rows, fs::path(o.out_dir) / "convergence.tsv");
    std::fprintf(stderr, "wrote %s/convergence.md and convergence.tsv\n", o.out_dir.c_str());
  }
  return 0;
}
