// `longhaul plan`: the candidate schedules for a model, its step time and a
// WAN link, with the CU model's predictions, and the one to run.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "longhaul/orchestrator/cli.h"
#include "longhaul/sync_policies/planner.h"

namespace longhaul::orchestrator {
namespace {

std::string Fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof(b), f, x);
  return b;
}

std::string RenderPlan(const sync_policies::PlanDecision& d, double target_cu) {
  std::ostringstream t;
  t << "schedule                                    WAN bytes/step   round      CU\n";
  for (size_t i = 0; i < d.candidates.size(); ++i) {
    const auto& c = d.candidates[i];
    char line[160];
    std::snprintf(line, sizeof(line), "%s %-42s %14s %8s %6.1f%%%s\n", static_cast<int>(i) == d.chosen ? "*" : " ",
                  c.name.c_str(), HumanBytes(c.estimate.wan_bytes_per_step).c_str(),
                  HumanSeconds(c.estimate.round_seconds).c_str(), 100 * c.estimate.cu,
                  c.estimate.cu >= target_cu ? "" : "  (below target)");
    t << line;
  }
  t << "(per region; a round is H inner steps, one step for data parallelism)\n";
  t << "\nplan: " << d.candidates[d.chosen].name << ": " << d.reason << "\n";
  return t.str();
}

std::string PlanJson(const sync_policies::PlanDecision& d, const PlanRequest& r) {
  std::ostringstream j;
  j << "{\"target_cu\":" << r.target_cu << ",\"candidates\":[";
  for (size_t i = 0; i < d.candidates.size(); ++i) {
    const auto& c = d.candidates[i];
    j << (i ? "," : "") << "{\"name\":" << JsonQuote(c.name) << ",\"kind\":\""
      << sync_policies::PlanKindName(c.schedule.kind) << "\",\"inner_steps\":" << c.schedule.inner_steps
      << ",\"fragments\":" << c.schedule.fragments << ",\"overlap_steps\":" << c.schedule.overlap_steps
      << ",\"codec\":\"" << sync_policies::Traits(c.codec).name << "\",\"wan_bytes_per_step\":"
      << Fmt("%.0f", c.estimate.wan_bytes_per_step) << ",\"round_seconds\":" << Fmt("%.6g", c.estimate.round_seconds)
      << ",\"cu\":" << Fmt("%.6f", c.estimate.cu) << "}";
  }
  j << "],\"chosen\":" << JsonQuote(d.candidates[d.chosen].name)
    << ",\"meets_target\":" << (d.meets_target ? "true" : "false") << ",\"reason\":" << JsonQuote(d.reason) << "}\n";
  return j.str();
}

}  // namespace

int CliPlan(const CliContext& ctx, const PlanRequest& r) {
  const sync_policies::ComputeProfile compute{r.params, r.layers, r.step_seconds};
  const sync_policies::WanProfile wan{r.regions, r.bandwidth_gbit * 1e9, r.rtt_ms / 1000.0};
  auto d = sync_policies::ChoosePlan(compute, wan, r.target_cu, r.layerwise);
  if (!d.ok()) return ReportFailure(ctx, kExitUsage, d.status().message());
  std::ostream& out = ctx.out ? *ctx.out : std::cout;
  out << (ctx.json ? PlanJson(*d, r) : RenderPlan(*d, r.target_cu));
  return kExitOk;
}

}  // namespace longhaul::orchestrator
