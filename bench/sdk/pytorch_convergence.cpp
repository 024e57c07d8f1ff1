// bench_pytorch_convergence: the PyTorch example (examples/pytorch/train.py,
// a byte-level transformer over longhaul.torch) under DiLoCo against the fully
// synchronous baseline, end to end on a LocalCluster.
//
// Every run is a real job whose workers are train.py: the same model flags,
// text file, batch and total inner steps per worker T in every run (a DiLoCo
// run with H inner steps has T/H rounds; the synchronous baseline, kind
// "sync", is synchronous data parallelism: every step the gradients of every
// region are averaged in fp32 before the optimizer step; it reports
// every --sync-round-steps steps). Each policy runs at every inner learning
// rate of the sweep and is reported at its best final validation loss, so a
// policy is not judged at a learning rate tuned for another.
//
// --seeds runs every setting once per job seed (initial parameters and data
// order) and reports means; --dtypes repeats every policy with train.py
// --dtype (a bfloat16 model next to the float32 one).
//
// Prints per policy: best inner lr, final validation loss at each lr, the gap
// to the synchronous baseline's best, WAN bytes, the reduction factor against
// the baseline, wall time. --out DIR writes NAME.md and NAME.tsv (--name,
// default pytorch_convergence; every run of the sweep, with its per-round
// validation losses).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "command_job.h"
#include "e2e_run.h"
#include "longhaul/common/format_number.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/demo.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/proto/wire_enums.h"

using namespace longhaul;
namespace orch = longhaul::orchestrator;
using longhaul::sync_policies::SyncKind;
namespace fs = std::filesystem;

namespace {

struct Policy {
  SyncKind kind = SyncKind::kSync;
  uint32_t h = 0;
  v1::Codec codec = v1::CODEC_FP32;
  double outer_momentum = 0;
  bool show_momentum = false;  // the sweep has more than one outer momentum
  std::string dtype = "float32";  // train.py --dtype: the model's parameters
  bool baseline = false;          // the first dtype's sync run: what every row is compared with
  std::string Label() const {
    const std::string model = dtype == "float32" ? "" : ", " + dtype + " model";
    if (kind == SyncKind::kSync) return "sync fp32" + model + (baseline ? " (baseline)" : "");
    std::string l = "DiLoCo H=" + std::to_string(h) + " " + std::string(proto::CodecName(codec));
    if (show_momentum) l += ", outer momentum " + FormatNumber("%g", outer_momentum);
    return l + model;
  }
};

struct Options {
  uint32_t regions = 3;
  uint32_t total_steps = 600;
  uint32_t sync_round_steps = 50;
  std::vector<uint32_t> hs = {10, 50, 100};
  std::vector<std::string> codecs = {"int8", "fp4"};
  std::vector<uint32_t> fp32_hs = {50};
  std::vector<double> lrs = {1.5e-3, 3e-3, 6e-3, 1.2e-2};
  uint32_t batch = 16;
  uint32_t warmup = 20;
  double outer_lr = 0.7;
  // The DiLoCo default 0.9, and 0.5 (as bench/convergence uses): 6-60 outer steps are few for 0.9.
  std::vector<double> outer_momenta = {0.9, 0.5};
  std::vector<std::string> dtypes = {"float32"};  // train.py --dtype values, each a set of rows
  std::vector<uint32_t> seeds = {1};  // job seeds (initial parameters and data order) of every setting
  uint32_t context = 32, d_model = 48, layers = 1, heads = 2;
  std::string text_file = "/usr/share/common-licenses/GPL-3";
  std::string python = LONGHAUL_PYTHON;
  std::string example_dir = LONGHAUL_PYTORCH_EXAMPLE_DIR;
  std::string out_dir;
  std::string name = "pytorch_convergence";  // the report's file names in out_dir
  bool wan_emulation = false;
  int job_timeout_s = 900;
};

Result<std::vector<Policy>> Plan(const Options& o) {
  std::vector<Policy> p;
  const bool show = o.outer_momenta.size() > 1;
  for (const auto& dtype : o.dtypes) {
    if (dtype != "float32" && dtype != "bfloat16") return InvalidArgument("--dtypes: unknown dtype '" + dtype + "'");
    p.push_back({SyncKind::kSync, 0, v1::CODEC_FP32, 0, false, dtype, p.empty()});
    for (double m : o.outer_momenta) {
      for (uint32_t h : o.hs) {
        for (const auto& name : o.codecs) {
          LONGHAUL_ASSIGN_OR_RETURN(v1::Codec c, proto::CodecFromName(name));
          p.push_back({SyncKind::kDiLoCo, h, c, m, show, dtype});
        }
        for (uint32_t f : o.fp32_hs)
          if (f == h) p.push_back({SyncKind::kDiLoCo, h, v1::CODEC_FP32, m, show, dtype});
      }
    }
  }
  for (const auto& x : p)
    if (x.kind == SyncKind::kDiLoCo && o.total_steps % x.h != 0)
      return InvalidArgument("--total-steps " + std::to_string(o.total_steps) +
                             " is not a multiple of H=" + std::to_string(x.h));
  return p;
}

v1::JobSpec SpecFor(const Policy& p, double lr, uint32_t seed, const Options& o,
                    const std::vector<orch::LocalRegion>& regions) {
  v1::JobSpec s = orch::DefaultJobSpec();
  s.set_name("pytorch " + p.Label() + " lr " + FormatNumber("%g", lr) + " seed " + std::to_string(seed));
  bench::SetRegions(s, regions);
  s.set_seed(seed);
  s.set_checkpoint_interval(0);
  const uint32_t h = p.kind == SyncKind::kSync ? o.sync_round_steps : p.h;
  s.set_rounds(std::max(1u, o.total_steps / h));
  proto::SetSyncKind(s.mutable_sync(), p.kind);
  s.mutable_sync()->set_inner_steps(h);
  s.mutable_compression()->set_codec(p.codec);
  // examples/pytorch/job.yaml's inner AdamW, at the sweep's lr.
  auto* in = s.mutable_inner();
  in->set_lr(lr);
  in->set_weight_decay(0);
  in->set_beta1(0.9);
  in->set_beta2(0.95);
  in->set_batch_size(o.batch);
  in->set_warmup_steps(o.warmup);
  s.mutable_outer()->set_name("nesterov");
  s.mutable_outer()->set_lr(o.outer_lr);
  s.mutable_outer()->set_momentum(p.kind == SyncKind::kSync ? o.outer_momenta.front() : p.outer_momentum);
  s.mutable_data()->mutable_text_file()->set_path(o.text_file);
  s.mutable_data()->mutable_text_file()->set_validation_fraction(0.05);
  bench::CommandWorkerOptions w;
  w.argv = {o.python,    (fs::path(o.example_dir) / "train.py").string(),
            "--context", std::to_string(o.context),
            "--d-model", std::to_string(o.d_model),
            "--layers",  std::to_string(o.layers),
            "--heads",   std::to_string(o.heads),
            "--dtype",   p.dtype};
  w.working_dir = o.example_dir;
  bench::SetCommandWorker(s, w);
  return s;
}

struct Run {
  Policy policy;
  double lr = 0;
  uint32_t seed = 0;
  bench::E2eRun run;
};

// The runs of one (policy, inner lr) over the seeds.
struct Setting {
  const Policy* policy = nullptr;
  double lr = 0;
  std::vector<const Run*> runs;
  double Mean(double (*of)(const Run&)) const {
    double sum = 0;
    for (const Run* r : runs) sum += of(*r);
    return runs.empty() ? NAN : sum / static_cast<double>(runs.size());
  }
  double MeanVal() const { return Mean([](const Run& r) { return static_cast<double>(r.run.status.val_loss()); }); }
  // Half the spread of the seeds' validation losses.
  double HalfRange() const {
    double lo = INFINITY, hi = -INFINITY;
    for (const Run* r : runs) {
      lo = std::min(lo, static_cast<double>(r->run.status.val_loss()));
      hi = std::max(hi, static_cast<double>(r->run.status.val_loss()));
    }
    return runs.empty() ? NAN : (hi - lo) / 2;
  }
};

Setting SettingOf(const Policy& p, double lr, const std::vector<Run>& runs) {
  Setting s{&p, lr, {}};
  for (const auto& r : runs)
    if (r.policy.Label() == p.Label() && r.lr == lr) s.runs.push_back(&r);
  return s;
}

// The best setting (lowest mean final validation loss over the seeds) of each policy, in plan order.
std::vector<Setting> Best(const std::vector<Policy>& plan, const std::vector<Run>& runs, const Options& o) {
  std::vector<Setting> best;
  for (const auto& p : plan) {
    std::optional<Setting> b;
    for (double lr : o.lrs) {
      Setting s = SettingOf(p, lr, runs);
      // A diverged run (NaN) never wins, nor keeps a later setting from winning.
      if (!s.runs.empty() && (!b || std::isnan(b->MeanVal()) || s.MeanVal() < b->MeanVal())) b = s;
    }
    if (b) best.push_back(*b);
  }
  return best;
}

std::string Table(const std::vector<Policy>& plan, const std::vector<Run>& runs, const Options& o) {
  const auto best = Best(plan, runs, o);
  const Setting* sync = nullptr;
  for (const Setting& b : best)
    if (b.policy->baseline) sync = &b;
  const bool seeds = o.seeds.size() > 1;
  std::ostringstream t;
  t << "| policy | rounds | best inner lr | val loss" << (seeds ? " (mean ± half range)" : "") << " | val loss at lr";
  for (double lr : o.lrs) t << " " << FormatNumber("%g", lr);
  t << " | vs sync | WAN bytes | reduction | wall |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const Setting& b : best) {
    const auto& s = b.runs.front()->run.status;
    std::string sweep;
    for (double lr : o.lrs) {
      const Setting at = SettingOf(*b.policy, lr, runs);
      if (at.runs.empty()) continue;
      if (!sweep.empty()) sweep += " / ";
      sweep += FormatNumber("%.4f", at.MeanVal());
    }
    const bool is_sync = &b == sync;
    const double gap = sync ? b.MeanVal() / sync->MeanVal() - 1 : NAN;
    const double reduction = sync && s.wan_bytes() > 0 ? static_cast<double>(sync->runs.front()->run.status.wan_bytes()) /
                                                             static_cast<double>(s.wan_bytes())
                                                       : NAN;
    const double wall = b.Mean([](const Run& r) { return r.run.status.wall_seconds(); });
    t << "| " << b.policy->Label() << " | " << s.total_rounds() << " | " << FormatNumber("%g", b.lr) << " | "
      << FormatNumber("%.4f", b.MeanVal()) << (seeds ? FormatNumber(" ± %.4f", b.HalfRange()) : std::string())
      << " | " << sweep << " | "
      << (is_sync ? std::string("-")
          : sync  ? FormatNumber("%+.2f%%", 100 * gap)
                  : std::string("-"))
      << " | " << orch::HumanBytes(static_cast<double>(s.wan_bytes())) << " | "
      << (is_sync ? std::string("1x")
          : sync  ? FormatNumber("%.0fx", reduction)
                  : std::string("-"))
      << " | " << orch::HumanSeconds(wall) << " |\n";
  }
  t << "\n"
    << o.regions << " regions on " << (o.wan_emulation ? "linkem WAN links" : "plain loopback links") << "; every run "
    << o.total_steps << " inner steps per worker, batch " << o.batch << ", CharLM --context " << o.context
    << " --d-model " << o.d_model << " --layers " << o.layers << " --heads " << o.heads << " on " << o.text_file
    << " (last 5% held out; each region trains on its own third of the rest). Inner AdamW (betas "
    << "0.9/0.95, no weight decay, " << o.warmup << " warm-up steps, cosine to 10%) at each lr of the sweep; "
    << "each policy shown at its best";
  if (seeds) {
    t << " mean over job seeds";
    for (size_t i = 0; i < o.seeds.size(); ++i) t << (i ? ", " : " ") << o.seeds[i];
    t << " (each seed draws other initial parameters and another data order; val loss, the sweep and wall are "
         "means over them, rounds and WAN bytes the first seed's)";
  }
  t << ". DiLoCo outer Nesterov lr " << o.outer_lr << ", momentum";
  for (size_t i = 0; i < o.outer_momenta.size(); ++i) t << (i ? " / " : " ") << FormatNumber("%g", o.outer_momenta[i]);
  t << ". The baseline is synchronous data parallelism: every step's gradients averaged across regions in "
    << "fp32 before one identical optimizer step (kind sync, train.py's sync_gradients(), reported every "
    << o.sync_round_steps << " steps). val loss: the last round's, on rank 0 of each region (identical "
    << "parameters), 4 fixed batches of 16 windows, nats/byte.";
  for (const auto& dtype : o.dtypes)
    if (dtype != "float32")
      t << " Rows marked " << dtype << " model: train.py --dtype " << dtype
        << ", the model's parameters, gradients and AdamW state in " << dtype
        << "; the SDK's outer step (global parameters, pseudo-gradients, outer momentum) stays float32 on a host "
           "copy, and kind sync averages the gradients in fp32 and rounds the mean to "
        << dtype << ".";
  t << "\n";
  return t.str();
}

void WriteTsv(const std::vector<Run>& runs, const std::vector<Policy>& plan, const Options& opts, const fs::path& file) {
  const auto best = Best(plan, runs, opts);
  std::ofstream o(file);
  o << "# policy\tkind\tH\tcodec\touter_momentum\tinner_lr\tseed\trounds\tval_loss\twan_bytes\twall_seconds\t"
       "best_of_policy\tval_loss_by_round\n";
  for (const auto& r : runs) {
    const auto& s = r.run.status;
    bool is_best = false;  // a run of its policy's best setting
    for (const Setting& b : best) is_best |= std::find(b.runs.begin(), b.runs.end(), &r) != b.runs.end();
    std::string curve;
    for (const auto& c : r.run.rounds) {
      if (!curve.empty()) curve += ',';
      curve += FormatNumber("%.4f", c.val_loss);
    }
    o << r.policy.Label() << "\t" << sync_policies::SyncKindName(r.policy.kind) << "\t" << (r.policy.kind == SyncKind::kSync ? 1 : r.policy.h) << "\t"
      << proto::CodecName(r.policy.codec) << "\t"
      << (r.policy.kind == SyncKind::kSync ? std::string("-") : FormatNumber("%g", r.policy.outer_momentum)) << "\t" << FormatNumber("%g", r.lr)
      << "\t" << r.seed << "\t" << s.total_rounds() << "\t" << FormatNumber("%.4f", s.val_loss()) << "\t" << s.wan_bytes() << "\t"
      << FormatNumber("%.1f", s.wall_seconds()) << "\t" << (is_best ? 1 : 0) << "\t" << curve << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_pytorch_convergence: examples/pytorch under DiLoCo vs the synchronous baseline"};
  app.add_option("--regions", o.regions, "regions")->check(CLI::Range(2, 4));
  app.add_option("--total-steps", o.total_steps, "inner steps per worker in every run")->check(CLI::Range(10, 1000000));
  app.add_option("--sync-round-steps", o.sync_round_steps, "the baseline's steps per reported round");
  app.add_option("--h", o.hs, "DiLoCo H values")->delimiter(',');
  app.add_option("--codecs", o.codecs, "codecs run at every H")->delimiter(',');
  app.add_option("--fp32-h", o.fp32_hs, "H values also run with fp32 pseudo-gradients")->delimiter(',');
  app.add_option("--lrs", o.lrs, "inner AdamW learning rates of the sweep")->delimiter(',');
  app.add_option("--batch", o.batch, "sequences per worker per step")->check(CLI::Range(1, 4096));
  app.add_option("--warmup", o.warmup, "inner warm-up steps");
  app.add_option("--outer-lr", o.outer_lr, "DiLoCo outer Nesterov lr");
  app.add_option("--outer-momenta", o.outer_momenta, "DiLoCo outer Nesterov momenta (each a set of rows)")
      ->delimiter(',');
  app.add_option("--context", o.context, "train.py --context");
  app.add_option("--d-model", o.d_model, "train.py --d-model");
  app.add_option("--layers", o.layers, "train.py --layers");
  app.add_option("--heads", o.heads, "train.py --heads");
  app.add_option("--text-file", o.text_file, "the job's data.text_file");
  app.add_option("--python", o.python, "Python interpreter with torch");
  app.add_option("--example-dir", o.example_dir, "where train.py and charlm.py live");
  app.add_flag("--wan-emulation", o.wan_emulation, "put linkem WAN links between the regions (default: loopback)");
  app.add_option("--seeds", o.seeds, "job seeds run at every setting; the table shows means")->delimiter(',');
  app.add_option("--dtypes", o.dtypes, "train.py --dtype values (float32, bfloat16), each a set of rows; the "
                 "first one's sync run is the baseline")->delimiter(',');
  app.add_option("--out", o.out_dir, "write NAME.md and NAME.tsv here");
  app.add_option("--name", o.name, "the report's file name (default pytorch_convergence)");
  app.add_option("--job-timeout-s", o.job_timeout_s, "give up on a job after this long");
  CLI11_PARSE(app, argc, argv);

  auto plan = Plan(o);
  if (!plan.ok()) {
    std::fprintf(stderr, "bench_pytorch_convergence: %s\n", plan.status().message().c_str());
    return 2;
  }
  orch::LocalClusterOptions co = bench::BenchClusterOptions(o.regions, "pytorch", orch::DefaultBinDir(argv[0]));
  co.wan_emulation = o.wan_emulation;
  co.allow_commands = {o.python};
  co.allow_working_dirs = {o.example_dir};
  auto cluster = orch::LocalCluster::Start(co);
  if (!cluster.ok()) {
    std::fprintf(stderr, "bench_pytorch_convergence: %s\n", cluster.status().message().c_str());
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Run> runs;
  const size_t total = plan->size() * o.lrs.size() * o.seeds.size();
  for (const auto& p : *plan) {
    for (double lr : o.lrs) {
      for (uint32_t seed : o.seeds) {
        std::fprintf(stderr, "run %zu/%zu: %s, inner lr %g, seed %u\n", runs.size() + 1, total, p.Label().c_str(), lr,
                     seed);
        auto run =
            bench::RunJob(**cluster, SpecFor(p, lr, seed, o, co.regions), std::chrono::seconds(o.job_timeout_s));
        if (!run.ok()) {
          std::fprintf(stderr, "bench_pytorch_convergence: %s (logs: %s)\n", run.status().message().c_str(),
                       (*cluster)->log_dir().c_str());
          return 1;
        }
        runs.push_back({p, lr, seed, std::move(*run)});
      }
    }
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string table = Table(*plan, runs, o);
  std::printf("%s\nbench_pytorch_convergence: %zu runs in %s\n", table.c_str(), runs.size(),
              orch::HumanSeconds(elapsed).c_str());
  if (!o.out_dir.empty()) {
    fs::create_directories(o.out_dir);
    std::string command = "build/bin/bench_pytorch_convergence";
    for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
    std::ofstream(fs::path(o.out_dir) / (o.name + ".md"))
        << "# bench_pytorch_convergence\n\nPrinted by `" << command
        << "` (one run on the 2-core development machine, " << runs.size() << " jobs in "
        << orch::HumanSeconds(elapsed)
        << "). Every run is a real job: orchestrator, one agent per region, and examples/pytorch/train.py as "
           "every region's worker (Debian's Python and torch, one thread each). The whole sweep, with every "
           "run's per-round validation loss, is in "
        << o.name << ".tsv.\n\n"
        << table;
    WriteTsv(runs, *plan, o, fs::path(o.out_dir) / (o.name + ".tsv"));
    std::fprintf(stderr, "wrote %s/%s.md and .tsv\n", o.out_dir.c_str(), o.name.c_str());
  }
  return 0;
}
