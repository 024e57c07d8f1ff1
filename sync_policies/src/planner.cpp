#include "longhaul/sync_policies/planner.h"

#include "longhaul/common/format_number.h"
#include "longhaul/sync_policies/compressor.h"

namespace longhaul::sync_policies {
namespace {

std::string Percent(double x) { return FormatNumber("%.1f%%", 100 * x); }

}  // namespace

Result<double> WireBitsPerValue(const CompressionOptions& compression) {
  LONGHAUL_ASSIGN_OR_RETURN(auto codec, Compressor::Create(compression));
  constexpr size_t kValues = size_t{1} << 20;
  return 8.0 * static_cast<double>(codec->EncodedBytes(kValues)) / kValues;
}

std::vector<PlanCandidate> CandidateSchedules(bool layerwise) {
  struct Row {
    PlanKind kind;
    uint32_t h, fragments, overlap;
    Codec codec;
  };
  // Most synchronous first. Streaming rows: P divides H, tau < H / P.
  const Row rows[] = {
      {PlanKind::kDataParallel, 1, 1, 0, Codec::kFp32},
      {PlanKind::kDataParallel, 1, 1, 0, Codec::kBf16},
      {PlanKind::kDiLoCo, 10, 1, 0, Codec::kInt8Block},
      {PlanKind::kDiLoCo, 50, 1, 0, Codec::kInt8Block},
      {PlanKind::kStreamingDiLoCo, 50, 5, 5, Codec::kInt8Block},
      {PlanKind::kDiLoCo, 100, 1, 0, Codec::kInt8Block},
      {PlanKind::kStreamingDiLoCo, 100, 10, 5, Codec::kInt8Block},
      {PlanKind::kDiLoCo, 100, 1, 0, Codec::kFp4E3M0},
      {PlanKind::kStreamingDiLoCo, 100, 10, 5, Codec::kFp4E3M0},
      {PlanKind::kDiLoCo, 500, 1, 0, Codec::kFp4E3M0},
      {PlanKind::kStreamingDiLoCo, 500, 10, 10, Codec::kFp4E3M0},
  };
  std::vector<PlanCandidate> out;
  for (const Row& r : rows) {
    PlanCandidate c;
    c.codec = r.codec;
    c.schedule = {.kind = r.kind,
                  .inner_steps = r.h,
                  .fragments = r.fragments,
                  .overlap_steps = r.overlap,
                  .bits_per_value = WireBitsPerValue({.codec = r.codec}).value(),  // the table's codecs are valid
                  .layerwise = layerwise};
    const std::string codec(Traits(r.codec).name);
    switch (r.kind) {
      case PlanKind::kDataParallel: c.name = "sync " + codec + " (data parallel)"; break;
      case PlanKind::kDiLoCo: c.name = "DiLoCo H=" + std::to_string(r.h) + " " + codec; break;
      case PlanKind::kStreamingDiLoCo:
        c.name = "Streaming DiLoCo H=" + std::to_string(r.h) + " P=" + std::to_string(r.fragments) +
                 " tau=" + std::to_string(r.overlap) + " " + codec;
        break;
    }
    out.push_back(std::move(c));
  }
  return out;
}

Result<PlanDecision> ChoosePlan(const ComputeProfile& compute, const WanProfile& wan, double target_cu, bool layerwise) {
  if (!(target_cu > 0 && target_cu <= 1)) return InvalidArgument("target CU must be in (0, 1]");
  PlanDecision d;
  d.candidates = CandidateSchedules(layerwise);
  int best = 0;
  for (size_t i = 0; i < d.candidates.size(); ++i) {
    PlanCandidate& c = d.candidates[i];
    auto e = PredictRound(compute, wan, c.schedule);
    if (!e.ok()) return e.status().WithContext(c.name);
    c.estimate = *e;
    if (c.estimate.cu > d.candidates[best].estimate.cu) best = static_cast<int>(i);
    if (d.chosen < 0 && c.estimate.cu >= target_cu) d.chosen = static_cast<int>(i);
  }
  if (d.chosen >= 0) {
    d.meets_target = true;
    const PlanCandidate& c = d.candidates[d.chosen];
    d.reason = "the most synchronous candidate predicted at CU >= " + Percent(target_cu) + " (" +
               Percent(c.estimate.cu) + ")";
    if (d.chosen > 0) {
      const PlanCandidate& before = d.candidates[d.chosen - 1];
      d.reason += "; the one before it, " + before.name + ", stalls on the WAN (CU " + Percent(before.estimate.cu) + ")";
    }
  } else {
    d.chosen = best;
    d.reason = "no candidate reaches CU " + Percent(target_cu) + " on this link; this one comes closest (" +
               Percent(d.candidates[best].estimate.cu) + ")";
  }
  return d;
}

}  // namespace longhaul::sync_policies
