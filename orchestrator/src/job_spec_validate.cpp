// Semantic checks of a JobSpec, wherever it came from (YAML or the wire).
#include <cmath>
#include <set>

#include "job_spec_limits.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/proto/wire_enums.h"
#include "longhaul/sync_policies/moment_sync.h"
#include "longhaul/sync_policies/outer_optimizer.h"
#include "worker_spec_rules.h"

namespace longhaul::orchestrator {
namespace {

using spec_limits::CheckText;
using spec_limits::ShortQuote;

Status Bad(const std::string& field, const std::string& rule, const std::string& got) {
  return InvalidArgument("field '" + field + "' " + rule + ", got " + got);
}

// Sizes and encodings first (job_spec_limits.h): a spec from the wire may not
// come from the YAML reader, and no later message may quote a huge value. The
// worker section's strings are checked by worker_rules::CheckWorker.
Status ValidateTexts(const v1::JobSpec& s) {
  LONGHAUL_RETURN_IF_ERROR(CheckText(spec_limits::kName, s.name()));
  LONGHAUL_RETURN_IF_ERROR(CheckText(spec_limits::kModelPreset, s.model_preset()));
  if (static_cast<size_t>(s.regions_size()) > spec_limits::kMaxRegions)
    return Bad("regions", "must have at most " + std::to_string(spec_limits::kMaxRegions) + " names",
               std::to_string(s.regions_size()));
  std::set<std::string_view> seen;
  for (int i = 0; i < s.regions_size(); ++i) {
    const std::string field = "regions[" + std::to_string(i) + "]";
    LONGHAUL_RETURN_IF_ERROR(CheckText(field, s.regions(i), spec_limits::kRegion.max_bytes));
    if (s.regions(i).empty()) return Bad(field, "must be a non-empty name", "''");
    if (!seen.insert(s.regions(i)).second)
      return Bad("regions", "must not list a name twice", ShortQuote(s.regions(i)));
  }
  if (s.data().has_text_file())
    LONGHAUL_RETURN_IF_ERROR(CheckText(spec_limits::kTextPath, s.data().text_file().path()));
  LONGHAUL_RETURN_IF_ERROR(CheckText(spec_limits::kInnerName, s.inner().name()));
  LONGHAUL_RETURN_IF_ERROR(CheckText(spec_limits::kOuterName, s.outer().name()));
  LONGHAUL_RETURN_IF_ERROR(CheckText(spec_limits::kOuterLrDecay, s.outer().lr_decay()));
  LONGHAUL_RETURN_IF_ERROR(CheckText(spec_limits::kSyncKind, s.sync().kind()));
  if (s.worker().has_builtin())
    LONGHAUL_RETURN_IF_ERROR(CheckText(spec_limits::kWorkerPreset, s.worker().builtin().preset()));
  return Status::Ok();
}

std::string Num(double v) {
  std::string s = std::to_string(v);
  return s;
}

Status ValidateOptimizers(const v1::JobSpec& s) {
  const auto& in = s.inner();
  if (in.name() != "adamw") return Bad("inner.name", "must be 'adamw'", ShortQuote(in.name()));
  if (!(in.lr() > 0 && in.lr() < 10)) return Bad("inner.lr", "must be in (0, 10)", Num(in.lr()));
  if (!(in.weight_decay() >= 0 && in.weight_decay() < 10))
    return Bad("inner.weight_decay", "must be in [0, 10)", Num(in.weight_decay()));
  if (!(in.beta1() >= 0 && in.beta1() < 1)) return Bad("inner.beta1", "must be in [0, 1)", Num(in.beta1()));
  if (!(in.beta2() >= 0 && in.beta2() < 1)) return Bad("inner.beta2", "must be in [0, 1)", Num(in.beta2()));
  if (in.batch_size() == 0 || in.batch_size() > 4096)
    return Bad("inner.batch_size", "must be in 1..4096", std::to_string(in.batch_size()));
  const auto& out = s.outer();
  if (out.name() != "nesterov" && out.name() != "sgd")
    return Bad("outer.name", "must be 'nesterov' or 'sgd'", ShortQuote(out.name()));
  if (!(out.lr() > 0 && out.lr() <= 10)) return Bad("outer.lr", "must be in (0, 10]", Num(out.lr()));
  if (!(out.momentum() >= 0 && out.momentum() < 1))
    return Bad("outer.momentum", "must be in [0, 1)", Num(out.momentum()));
  const uint32_t kMaxRounds = 1000000;
  if (out.warmup_rounds() > kMaxRounds) return Bad("outer.warmup_rounds", "must be in 0..1000000", std::to_string(out.warmup_rounds()));
  if (!sync_policies::LrDecayFromName(out.lr_decay()).ok()) {
    return Bad("outer.lr_decay", "must be 'none', 'cosine' or 'linear'", ShortQuote(out.lr_decay()));
  }
  if (!(out.final_lr_fraction() >= 0 && out.final_lr_fraction() <= 1))
    return Bad("outer.final_lr_fraction", "must be in [0, 1]", Num(out.final_lr_fraction()));
  if (out.momentum_warmup_rounds() > kMaxRounds)
    return Bad("outer.momentum_warmup_rounds", "must be in 0..1000000", std::to_string(out.momentum_warmup_rounds()));
  if (out.momentum_restart_rounds() > kMaxRounds)
    return Bad("outer.momentum_restart_rounds", "must be in 0..1000000", std::to_string(out.momentum_restart_rounds()));
  return Status::Ok();
}

constexpr uint32_t kMaxInnerSteps = 1000000;  // sync.inner_steps and sync.adaptive.max_inner_steps

// The options of compression that `codec` reads; `why` says what uses it when it
// is not compression.codec itself ("" when it is).
Status ValidateCodecOptions(const v1::Compression& c, sync_policies::Codec codec, const std::string& why) {
  const sync_policies::CodecTraits& traits = sync_policies::Traits(codec);
  if (traits.uses_blocks && (c.block_size() < 8 || c.block_size() > (1u << 20)))
    return Bad("compression.block_size", "must be in 8..1048576" + why, std::to_string(c.block_size()));
  if (traits.sparse && !(c.topk_fraction() > 0 && c.topk_fraction() <= 1))
    return Bad("compression.topk_fraction", "must be in (0, 1]" + why, Num(c.topk_fraction()));
  return Status::Ok();
}

// Each codec at most once: the limit is the number of codecs on the wire.
static_assert(spec_limits::kMaxAdaptiveCodecs == static_cast<size_t>(v1::Codec_MAX),
              "kMaxAdaptiveCodecs must be the number of codecs in common.proto");

// sync.adaptive's codecs: known, each once, and the compression options they
// read valid (a round may run with any of them, not only compression.codec).
Status ValidateAdaptiveCodecs(const v1::JobSpec& s) {
  const auto& a = s.sync().adaptive();
  if (static_cast<size_t>(a.codecs_size()) > spec_limits::kMaxAdaptiveCodecs)
    return Bad("sync.adaptive.codecs",
               "must have at most " + std::to_string(spec_limits::kMaxAdaptiveCodecs) + " codecs",
               std::to_string(a.codecs_size()));
  std::set<int> seen;
  for (int i = 0; i < a.codecs_size(); ++i) {
    const std::string field = "sync.adaptive.codecs[" + std::to_string(i) + "]";
    const v1::Codec wire = a.codecs(i);
    auto codec = proto::CodecFromWire(wire);
    if (!codec.ok())
      return Bad(field, "must be one of " + sync_policies::CodecNames(),
                 wire == v1::CODEC_UNSPECIFIED ? std::string("nothing") : std::to_string(static_cast<int>(wire)));
    const std::string name(sync_policies::CodecName(*codec));
    if (!seen.insert(static_cast<int>(wire)).second)
      return Bad("sync.adaptive.codecs", "must not list a codec twice", ShortQuote(name));
    LONGHAUL_RETURN_IF_ERROR(ValidateCodecOptions(s.compression(), *codec, " (" + field + " is " + name + ")"));
  }
  return Status::Ok();
}

// sync.adaptive: the bounds re-planning moves a round's H and codec within. Only
// kinds whose rounds end in one exchange of pseudo-gradients can trade them for
// WAN time. H grows by doubling from inner_steps up to max_inner_steps, so for
// streaming_diloco every H stays a multiple of the fragments only if the bound is.
Status ValidateAdaptive(const v1::JobSpec& s, sync_policies::SyncKind kind) {
  const auto& sy = s.sync();
  const auto& a = sy.adaptive();
  const sync_policies::SyncKindTraits& traits = sync_policies::Traits(kind);
  if (!traits.needs_link || traits.averages_gradients)
    return Bad("sync.adaptive",
               "applies only to sync.kind diloco or streaming_diloco (it re-plans H and the codec of the "
               "pseudo-gradient exchanges)",
               "sync.kind " + ShortQuote(sy.kind()));
  if (!(a.target_utilisation() > 0 && a.target_utilisation() <= 1))
    return Bad("sync.adaptive.target_utilisation", "must be in (0, 1]", Num(a.target_utilisation()));
  const uint32_t h_max = a.max_inner_steps();
  if (h_max != 0 && (h_max < sy.inner_steps() || h_max > kMaxInnerSteps))
    return Bad("sync.adaptive.max_inner_steps",
               "must be 0 (H stays the spec's) or in inner_steps..1000000 (" + std::to_string(sy.inner_steps()) +
                   "..1000000)",
               std::to_string(h_max));
  if (a.max_overlap_steps() != 0 && !traits.streams_fragments)
    return Bad("sync.adaptive.max_overlap_steps", "must be 0 for " + sy.kind() + " (only streaming_diloco overlaps)",
               std::to_string(a.max_overlap_steps()));
  if (a.max_overlap_steps() != 0 && a.max_overlap_steps() < sy.overlap_steps())
    return Bad("sync.adaptive.max_overlap_steps",
               "must be 0 (tau stays the spec's) or at least overlap_steps (" + std::to_string(sy.overlap_steps()) + ")",
               std::to_string(a.max_overlap_steps()));
  if (traits.streams_fragments && h_max % sy.fragments() != 0)
    return Bad("sync.adaptive.max_inner_steps",
               "must be a multiple of sync.fragments (" + std::to_string(sy.fragments()) + ") for " + sy.kind(),
               std::to_string(h_max));
  return ValidateAdaptiveCodecs(s);
}

Status ValidateSync(const v1::JobSpec& s) {
  const auto& sy = s.sync();
  auto kind = proto::SyncKindOf(sy);
  if (!kind.ok()) return Bad("sync.kind", "must be one of " + sync_policies::SyncKindNames(), ShortQuote(sy.kind()));
  if (sy.inner_steps() == 0 || sy.inner_steps() > kMaxInnerSteps)
    return Bad("sync.inner_steps", "must be in 1..1000000", std::to_string(sy.inner_steps()));
  if (!sync_policies::Traits(*kind).streams_fragments) {
    if (sy.fragments() != 1)
      return Bad("sync.fragments", "must be 1 for " + sy.kind() + " (only streaming_diloco splits the parameters)",
                 std::to_string(sy.fragments()));
    if (sy.overlap_steps() != 0)
      return Bad("sync.overlap_steps", "must be 0 for " + sy.kind() + " (only streaming_diloco overlaps)",
                 std::to_string(sy.overlap_steps()));
  } else {
    if (sy.fragments() == 0 || sy.fragments() > sy.inner_steps())
      return Bad("sync.fragments", "must be in 1..inner_steps for streaming_diloco", std::to_string(sy.fragments()));
    if (sy.overlap_steps() >= sy.inner_steps())
      return Bad("sync.overlap_steps", "must be < inner_steps", std::to_string(sy.overlap_steps()));
    if (!(sy.mixing_alpha() >= 0 && sy.mixing_alpha() <= 1))
      return Bad("sync.mixing_alpha", "must be in [0, 1]", Num(sy.mixing_alpha()));
  }
  // Averaging the inner moments belongs to the kinds whose regions keep their
  // own (sync's are identical, local's never meet).
  const auto& in = s.inner();
  const sync_policies::MomentSyncOptions moments{in.first_moment_sync_rounds(), in.second_moment_sync_rounds()};
  if (Status st = moments.Validate(); !st.ok()) return InvalidArgument("inner." + st.message());
  for (const auto& [field, value] : {std::pair{"inner.first_moment_sync_rounds", in.first_moment_sync_rounds()},
                                     std::pair{"inner.second_moment_sync_rounds", in.second_moment_sync_rounds()}}) {
    if (value != 0 && !sync_policies::Traits(*kind).uses_outer_optimizer)
      return Bad(field, "must be 0 for " + sy.kind() + " (only diloco and streaming_diloco average the inner moments)",
                 std::to_string(value));
  }
  const auto& c = s.compression();
  if (c.codec() == v1::CODEC_UNSPECIFIED) return Bad("compression.codec", "must be set", "nothing");
  auto codec = proto::CodecFromWire(c.codec());
  if (!codec.ok())
    return Bad("compression.codec", "must be one of " + sync_policies::CodecNames(), std::to_string(c.codec()));
  LONGHAUL_RETURN_IF_ERROR(ValidateCodecOptions(c, *codec, ""));
  // Streaming's fragments are exchanged at fixed steps of the round, which a
  // region's own step count would move; only diloco's one exchange at the end fits.
  if (sy.time_budgeted() && *kind != sync_policies::SyncKind::kDiLoCo)
    return Bad("sync.time_budgeted", "applies only to sync.kind diloco (one exchange at each round's end)",
               "sync.kind " + ShortQuote(sy.kind()));
  return sy.has_adaptive() ? ValidateAdaptive(s, *kind) : Status::Ok();
}

// The built-in trainer needs data; a command worker may bring its own, and any
// data it is given is checked the same way and passed through to it.
Status ValidateData(const v1::JobSpec& s) {
  if (s.data().has_text_file()) {
    const auto& t = s.data().text_file();
    if (t.path().empty()) return Bad("data.text_file.path", "must be set", "nothing");
    if (!(t.validation_fraction() > 0 && t.validation_fraction() < 1))
      return Bad("data.text_file.validation_fraction", "must be in (0, 1)", Num(t.validation_fraction()));
  } else if (s.data().has_synthetic()) {
    const auto& d = s.data().synthetic();
    if (d.branching() < 1 || d.branching() > 256)
      return Bad("data.synthetic.branching", "must be in 1..256", std::to_string(d.branching()));
    if (d.order() < 1 || d.order() > 2) return Bad("data.synthetic.order", "must be 1 or 2", std::to_string(d.order()));
  } else if (!worker_rules::IsCommandWorker(s)) {
    return Bad("data", "must have 'synthetic' or 'text_file' (only a worker.command may leave it out)", "neither");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateJobSpec(const v1::JobSpec& s) {
  LONGHAUL_RETURN_IF_ERROR(ValidateTexts(s));
  if (s.name().empty()) return Bad("name", "must not be empty", "''");
  if (s.rounds() == 0 || s.rounds() > 1000000) return Bad("rounds", "must be in 1..1000000", std::to_string(s.rounds()));
  const uint32_t need = RequiredRegions(s);
  if (need == 0 || need > spec_limits::kMaxRegions)
    return Bad("region_count", "must be in 1.." + std::to_string(spec_limits::kMaxRegions), std::to_string(need));
  if (s.regions_size() > 0 && s.region_count() != 0 && s.region_count() != static_cast<uint32_t>(s.regions_size()))
    return Bad("region_count", "must equal the number of names in 'regions' (" + std::to_string(s.regions_size()) + ")",
               std::to_string(s.region_count()));
  if (s.min_regions() == 0 || s.min_regions() > need)
    return Bad("min_regions", "must be in 1.." + std::to_string(need), std::to_string(s.min_regions()));
  if (s.workers_per_region() == 0 || s.workers_per_region() > 256)
    return Bad("workers_per_region", "must be in 1..256", std::to_string(s.workers_per_region()));
  if (!proto::IntraRegionFromName(proto::IntraRegionName(s.intra_region())).ok())  // not in the names table
    return Bad("intra_region", "must be one of " + proto::IntraRegionNames(),
               std::to_string(static_cast<int>(s.intra_region())));
  LONGHAUL_RETURN_IF_ERROR(worker_rules::CheckWorker(s));
  LONGHAUL_RETURN_IF_ERROR(ValidateData(s));
  LONGHAUL_RETURN_IF_ERROR(ValidateOptimizers(s));
  LONGHAUL_RETURN_IF_ERROR(ValidateSync(s));
  // The inner schedule spans the spec's rounds x inner_steps even when
  // sync.adaptive lets H grow (more steps run at its final lr), so this bound
  // stays the spec's H: max_inner_steps >= inner_steps only adds steps.
  const uint64_t steps = uint64_t{s.rounds()} * s.sync().inner_steps();
  if (s.inner().warmup_steps() > steps)
    return Bad("inner.warmup_steps", "must be at most the job's rounds x inner_steps (" + std::to_string(steps) + ")",
               std::to_string(s.inner().warmup_steps()));
  return Status::Ok();
}

}  // namespace longhaul::orchestrator
