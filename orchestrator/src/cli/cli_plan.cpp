// `longhaul plan`: the candidate schedules for a model, its step time and a
// WAN link, with the CU model's predictions, and the one to run. With a job
// file, the link is the orchestrator's measured one for the job's regions, and
// the job's own schedule is predicted beside the candidates.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli_request.h"
#include "longhaul/common/join.h"
#include "longhaul/common/format_number.h"
#include "longhaul/orchestrator/cli.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/scheduler.h"
#include "longhaul/proto/wire_enums.h"
#include "longhaul/proto/wire_links.h"
#include "longhaul/sync_policies/planner.h"

namespace longhaul::orchestrator {
namespace {

// The job's own schedule, predicted on the same link.
struct JobRow {
  std::string name;
  sync_policies::CuEstimate estimate;
};

// Where the link came from (job-file mode): the ring the orchestrator would choose.
struct LinkSource {
  std::vector<std::string> ring;
};

std::string Row(bool chosen, const std::string& name, const sync_policies::CuEstimate& e, double target_cu) {
  char line[200];
  std::snprintf(line, sizeof(line), "%s %-42s %14s %8s %6.1f%%%s\n", chosen ? "*" : " ", name.c_str(),
                HumanBytes(e.wan_bytes_per_step).c_str(), HumanSeconds(e.round_seconds).c_str(), 100 * e.cu,
                e.cu >= target_cu ? "" : "  (below target)");
  return line;
}

std::string RenderPlan(const sync_policies::PlanDecision& d, const PlanRequest& r, const std::optional<JobRow>& job,
                       const std::optional<LinkSource>& link) {
  std::ostringstream t;
  if (link) {
    t << "link (measured by the orchestrator): ring " << Join(link->ring, " -> ") << ", bottleneck "
      << FormatNumber("%.3g", r.bandwidth_gbit * 1000) << " Mbit/s, RTT " << FormatNumber("%.0f", r.rtt_ms) << " ms\n\n";
  }
  t << "schedule                                    WAN bytes/step   round      CU\n";
  for (size_t i = 0; i < d.candidates.size(); ++i)
    t << Row(static_cast<int>(i) == d.chosen, d.candidates[i].name, d.candidates[i].estimate, r.target_cu);
  t << "(per region; a round is H inner steps, one step for data parallelism)\n";
  if (job) t << "\nthis job:\n" << Row(false, job->name, job->estimate, r.target_cu);
  t << "\nplan: " << d.candidates[d.chosen].name << ": " << d.reason << "\n";
  return t.str();
}

std::string EstimateJson(const sync_policies::CuEstimate& e) {
  return "\"wan_bytes_per_step\":" + FormatNumber("%.0f", e.wan_bytes_per_step) + ",\"round_seconds\":" +
         FormatNumber("%.6g", e.round_seconds) + ",\"cu\":" + FormatNumber("%.6f", e.cu);
}

std::string PlanJson(const sync_policies::PlanDecision& d, const PlanRequest& r, const std::optional<JobRow>& job,
                     const std::optional<LinkSource>& link) {
  std::ostringstream j;
  j << "{\"target_cu\":" << r.target_cu << ",\"regions\":" << r.regions << ",\"bandwidth_gbit\":"
    << FormatNumber("%.6g", r.bandwidth_gbit) << ",\"rtt_ms\":" << FormatNumber("%.6g", r.rtt_ms);
  if (link) {
    j << ",\"ring\":[";
    for (size_t i = 0; i < link->ring.size(); ++i) j << (i ? "," : "") << JsonQuote(link->ring[i]);
    j << "]";
  }
  j << ",\"candidates\":[";
  for (size_t i = 0; i < d.candidates.size(); ++i) {
    const auto& c = d.candidates[i];
    j << (i ? "," : "") << "{\"name\":" << JsonQuote(c.name) << ",\"kind\":\""
      << sync_policies::PlanKindName(c.schedule.kind) << "\",\"inner_steps\":" << c.schedule.inner_steps
      << ",\"fragments\":" << c.schedule.fragments << ",\"overlap_steps\":" << c.schedule.overlap_steps
      << ",\"codec\":\"" << sync_policies::Traits(c.codec).name << "\"," << EstimateJson(c.estimate) << "}";
  }
  j << "]";
  if (job) j << ",\"job\":{\"name\":" << JsonQuote(job->name) << "," << EstimateJson(job->estimate) << "}";
  j << ",\"chosen\":" << JsonQuote(d.candidates[d.chosen].name)
    << ",\"meets_target\":" << (d.meets_target ? "true" : "false") << ",\"reason\":" << JsonQuote(d.reason) << "}\n";
  return j.str();
}

int Run(const CliContext& ctx, const PlanRequest& r, const std::optional<sync_policies::PlanSchedule>& job_schedule,
        const std::string& job_name, const std::optional<LinkSource>& link) {
  const sync_policies::ComputeProfile compute{r.params, r.layers, r.step_seconds};
  const sync_policies::WanProfile wan{r.regions, r.bandwidth_gbit * 1e9, r.rtt_ms / 1000.0};
  auto d = sync_policies::ChoosePlan(compute, wan, r.target_cu, r.layerwise);
  if (!d.ok()) return ReportFailure(ctx, kExitUsage, d.status().message());
  std::optional<JobRow> job;
  if (job_schedule) {
    auto e = sync_policies::PredictRound(compute, wan, *job_schedule);
    if (!e.ok()) return ReportFailure(ctx, kExitUsage, e.status().WithContext("the job's schedule").message());
    job = JobRow{job_name, *e};
  }
  std::ostream& out = ctx.out ? *ctx.out : std::cout;
  out << (ctx.json ? PlanJson(*d, r, job, link) : RenderPlan(*d, r, job, link));
  return kExitOk;
}

}  // namespace

int CliPlan(const CliContext& ctx, const PlanRequest& r) {
  if (!(r.bandwidth_gbit > 0)) {
    return ReportFailure(ctx, kExitUsage, "plan needs --bandwidth-gbit (or a job file, to use the measured links)");
  }
  return Run(ctx, r, std::nullopt, "", std::nullopt);
}

int CliPlanJob(const CliContext& ctx, const std::string& job_file, PlanRequest r) {
  auto spec = LoadJobSpecFile(job_file);
  if (!spec.ok()) return ReportFailure(ctx, kExitUsage, spec.status().message());
  v1::ControlMessage req;
  req.mutable_list_regions();
  auto reply = CliRequest(ctx, std::move(req));
  if (!reply.ok()) return ReportError(ctx, reply.status());
  const auto& listed = reply->list_regions_reply().regions();
  // The job's regions, or as many up regions as it asks for, by name (placement's order; busy
  // regions count too: another job does not change the links).
  std::vector<std::string> regions(spec->regions().begin(), spec->regions().end());
  if (regions.empty()) {
    std::vector<std::string> up;
    for (const auto& info : listed)
      if (info.state() == "up") up.push_back(info.region());
    std::sort(up.begin(), up.end());
    up.resize(std::min<size_t>(up.size(), spec->region_count()));
    regions = up;
  }
  if (regions.size() < 2) {
    return ReportFailure(ctx, kExitFailed,
                         "the job runs on " + std::to_string(regions.size()) + " region(s) the orchestrator knows: "
                         "a plan needs at least 2");
  }
  LinkTable links;
  for (const auto& info : listed) {
    for (const auto& l : info.links()) {
      auto e = proto::LinkFromWire(l);
      if (!e.ok()) return ReportError(ctx, e.status().WithContext("the orchestrator's links of region " + info.region()));
      links.SetLink(info.region(), l.peer(), *e);
    }
  }
  auto ring = PlanRound(regions, links, RoundShape{});
  if (!ring.ok()) return ReportError(ctx, ring.status());
  if (ring->bottleneck_bytes_per_second <= 0) {
    return ReportFailure(ctx, kExitFailed,
                         "no link measurements between " + Join(regions, ", ") +
                             " yet (agents measure their links during rounds): pass --bandwidth-gbit and --rtt-ms "
                             "without the job file");
  }
  r.regions = static_cast<uint32_t>(regions.size());
  r.bandwidth_gbit = ring->bottleneck_bytes_per_second * 8 / 1e9;
  r.rtt_ms = ring->rtt_seconds * 1000;
  const auto kind = proto::SyncKindOf(spec->sync());
  const auto compression = proto::CompressionFromWire(spec->compression());
  if (!kind.ok() || !compression.ok()) return ReportFailure(ctx, kExitUsage, "the job's sync kind or codec is unknown");
  std::optional<sync_policies::PlanSchedule> schedule;
  std::string name = "\"" + spec->name() + "\": " + std::string(sync_policies::Traits(*kind).name) + " H=" +
                     std::to_string(spec->sync().inner_steps()) + " " +
                     std::string(sync_policies::Traits(compression->codec).name);
  if (*kind != sync_policies::SyncKind::kLocal) {
    auto bits = sync_policies::WireBitsPerValue(*compression);
    if (!bits.ok()) return ReportFailure(ctx, kExitUsage, bits.status().WithContext("the job's compression").message());
    schedule = PlanScheduleOf({.kind = *kind,
                               .inner_steps = spec->sync().inner_steps(),
                               .fragments = spec->sync().fragments(),
                               .overlap_steps = spec->sync().overlap_steps()},
                              *bits);
    schedule->layerwise = r.layerwise;
  }
  return Run(ctx, r, schedule, name, LinkSource{ring->ring});
}

}  // namespace longhaul::orchestrator
