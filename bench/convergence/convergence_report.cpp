#include "convergence_report.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "longhaul/common/format_number.h"
#include "longhaul/orchestrator/cli.h"

namespace longhaul::bench {
namespace {

std::string RowKey(const Row& r) { return r.setting.Name() + " / " + r.policy.Name(); }
std::string PointKey(const Row& r, const Point& p) { return RowKey(r) + " / " + p.Name(r.policy.is_sync()); }

bool IsTargetPolicy(const Policy& p) {
  return p.kind == sync_policies::SyncKind::kDiLoCo && p.h == 50 && p.codec == v1::CODEC_INT8_BLOCK &&
         !p.published_outer;
}

TargetCheck Check(const RowSummary& r, const RowSummary& base) {
  TargetCheck t;
  t.setting = r.row.setting.Name();
  t.policy = r.row.policy.Name();
  t.present = true;
  t.gap = r.Best().mean / base.Best().mean - 1;
  t.reduction = r.Best().wan_bytes > 0 ? base.Best().wan_bytes / r.Best().wan_bytes : 0;
  t.met = t.gap <= 0.02 && t.reduction >= 100;
  return t;
}

}  // namespace

std::vector<RowSummary> Summarize(const std::vector<RunRecord>& runs) {
  std::vector<RowSummary> rows;
  for (const auto& run : runs) {
    auto row = std::find_if(rows.begin(), rows.end(), [&](const RowSummary& r) { return RowKey(r.row) == RowKey(run.row); });
    if (row == rows.end()) {
      rows.push_back({run.row, {}, 0, false, std::nullopt});
      row = rows.end() - 1;
    }
    auto point = std::find_if(row->points.begin(), row->points.end(), [&](const PointSummary& p) {
      return PointKey(run.row, p.point) == PointKey(run.row, run.point);
    });
    if (point == row->points.end()) {
      row->points.push_back({run.point, {}, 0, 0, 0, 0});
      point = row->points.end() - 1;
    }
    point->runs.push_back(&run);
  }
  for (auto& row : rows) {
    double lo = INFINITY, hi = -INFINITY;
    for (auto& p : row.points) {
      const double n = static_cast<double>(p.runs.size());
      for (const auto* r : p.runs) {
        p.mean += r->val_loss / n;
        p.floor += r->loss_floor / n;
        p.wan_bytes += static_cast<double>(r->wan_bytes) / n;
      }
      double ss = 0;
      for (const auto* r : p.runs) ss += (r->val_loss - p.mean) * (r->val_loss - p.mean);
      p.stdev = p.runs.size() > 1 ? std::sqrt(ss / (n - 1)) : 0;
      lo = std::min(lo, p.point.inner_lr);
      hi = std::max(hi, p.point.inner_lr);
    }
    for (size_t i = 1; i < row.points.size(); ++i) {
      if (row.points[i].mean < row.points[row.best].mean) row.best = i;
    }
    const double best_lr = row.Best().point.inner_lr;
    row.best_on_edge = lo < hi && (best_lr == lo || best_lr == hi);
  }
  return rows;
}

const RowSummary* BaselineOf(const std::vector<RowSummary>& rows, const std::string& setting) {
  for (const auto& r : rows)
    if (r.row.policy.is_sync() && r.row.setting.Name() == setting) return &r;
  return nullptr;
}

TargetCheck CheckTarget(const std::vector<RowSummary>& rows, const std::string& setting) {
  TargetCheck t;
  t.setting = setting;
  const RowSummary* base = BaselineOf(rows, setting);
  for (const auto& r : rows) {
    if (base && r.row.setting.Name() == setting && IsTargetPolicy(r.row.policy) && r.row.policy.method == Method::kNone)
      t = Check(r, *base);
  }
  return t;
}

TargetCheck ClosestWithMethod(const std::vector<RowSummary>& rows, const std::string& setting) {
  TargetCheck best;
  best.setting = setting;
  const RowSummary* base = BaselineOf(rows, setting);
  for (const auto& r : rows) {
    if (!base || r.row.setting.Name() != setting || !IsTargetPolicy(r.row.policy) || r.row.policy.method == Method::kNone)
      continue;
    const TargetCheck c = Check(r, *base);
    if (c.reduction >= 100 && (!best.present || c.gap < best.gap)) best = c;
  }
  return best;
}

std::string Table(const std::vector<RowSummary>& rows, const PlanOptions& o) {
  std::ostringstream t;
  t << "| setting | policy | best point | val loss (mean ± sd) | gap to floor | vs best sync | WAN bytes | comm "
       "reduction | wall (emulated links) |\n"
    << "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    const PointSummary& b = r.Best();
    const RowSummary* base = BaselineOf(rows, r.row.setting.Name());
    const bool is_base = base == &r;
    t << "| " << r.row.setting.Name() << " | " << r.row.policy.Name() << " | " << b.point.Name(r.row.policy.is_sync())
      << (r.best_on_edge ? " (edge of grid)" : "") << " | " << FormatNumber("%.4f", b.mean) << " ± " << FormatNumber("%.4f", b.stdev)
      << " | " << (b.floor > 0 ? FormatNumber("%+.4f", b.mean - b.floor) : "-") << " | "
      << (base && !is_base ? FormatNumber("%+.2f%%", 100 * (b.mean / base->Best().mean - 1)) : "-") << " | "
      << orchestrator::HumanBytes(b.wan_bytes) << " | "
      << (is_base ? "1x" : base && b.wan_bytes > 0 ? FormatNumber("%.0fx", base->Best().wan_bytes / b.wan_bytes) : "-") << " | "
      << (r.wall_seconds ? orchestrator::HumanSeconds(*r.wall_seconds) : "-") << " |\n";
  }
  t << "\n";
  for (const std::string setting : {"3 regions, iid", "3 regions, text", "3 regions, non-iid"}) {
    const TargetCheck c = CheckTarget(rows, setting);
    if (!c.present) continue;
    t << "Target (" << setting << "): DiLoCo H=50 int8 within 2% of the best-tuned synchronous baseline's validation "
      << "loss with >= 100x fewer WAN bytes, mean over seeds: " << FormatNumber("%+.2f%%", 100 * c.gap) << ", "
      << FormatNumber("%.0fx", c.reduction) << (c.met ? " -> met\n" : " -> not met\n");
    const TargetCheck m = ClosestWithMethod(rows, setting);
    if (m.present) {
      t << "  closest with a method at >= 100x fewer bytes: " << m.policy << ": " << FormatNumber("%+.2f%%", 100 * m.gap) << ", "
        << FormatNumber("%.0fx", m.reduction) << (m.met ? " -> met\n" : " -> not met\n");
    }
  }
  t << "\nEqual compute and tokens: " << o.total_steps << " inner steps per worker, batch " << o.batch << ", preset "
    << o.preset << ", " << o.seeds << " seeds per point (model init and synthetic chain); every policy at the "
    << "lowest mean validation loss of its grid (sync: inner AdamW lr; DiLoCo: inner lr x outer Nesterov lr and "
    << "momentum); the whole sweep is in convergence_sweep.tsv.\n";
  return t.str();
}

std::string SweepTsv(const std::vector<RunRecord>& runs) {
  std::ostringstream o;
  o << "# setting\tpolicy\tinner_lr\touter_lr\touter_momentum\tseed\tval_loss\tloss_floor\twan_bytes\trounds\n";
  for (const auto& r : runs) {
    const bool sync = r.row.policy.is_sync();
    o << r.row.setting.Name() << "\t" << r.row.policy.Name() << "\t" << r.point.inner_lr << "\t"
      << (sync ? 0 : r.point.outer_lr) << "\t" << (sync ? 0 : r.point.outer_momentum) << "\t" << r.seed << "\t"
      << FormatNumber("%.6f", r.val_loss) << "\t" << FormatNumber("%.6f", r.loss_floor) << "\t" << r.wan_bytes << "\t" << r.rounds << "\n";
  }
  return o.str();
}

std::string CurvesTsv(const std::vector<RowSummary>& rows) {
  std::ostringstream o;
  o << "# run\tsetting\tpolicy\tround\tcumulative_wan_bytes\tval_loss\tloss_floor\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const PointSummary& b = rows[i].Best();
    if (b.runs.empty()) continue;
    const RunRecord& first = *b.runs.front();
    uint32_t round = 0;
    for (const auto& [bytes, loss] : first.curve) {
      o << i << "\t" << rows[i].row.setting.Name() << "\t" << rows[i].row.policy.Name() << "\t" << ++round << "\t"
        << bytes << "\t" << loss << "\t" << first.loss_floor << "\n";
    }
  }
  return o.str();
}

}  // namespace longhaul::bench
