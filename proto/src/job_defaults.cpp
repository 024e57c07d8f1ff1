#include "longhaul/proto/job_defaults.h"

#include <algorithm>
#include <string>

#include "longhaul/proto/wire_enums.h"

namespace longhaul::proto {

namespace d = job_defaults;

namespace {

void FillData(v1::DataSpec* data) {
  if (data->has_synthetic()) {
    v1::SyntheticData* s = data->mutable_synthetic();
    if (!s->has_seed()) s->set_seed(d::kSyntheticSeed);
    if (s->branching() == 0) s->set_branching(d::kSyntheticBranching);
    if (s->order() == 0) s->set_order(d::kSyntheticOrder);
  } else if (data->has_text_file()) {
    v1::TextFileData* t = data->mutable_text_file();
    if (t->validation_fraction() == 0) t->set_validation_fraction(d::kTextValidationFraction);
  }
}

void FillInner(v1::InnerOptimizer* in) {
  if (in->name().empty()) in->set_name(d::kInnerName);
  if (!in->has_lr()) in->set_lr(d::kInnerLr);
  if (!in->has_weight_decay()) in->set_weight_decay(d::kInnerWeightDecay);
  if (!in->has_beta1()) in->set_beta1(d::kInnerBeta1);
  if (!in->has_beta2()) in->set_beta2(d::kInnerBeta2);
  if (!in->has_warmup_steps()) in->set_warmup_steps(d::kInnerWarmupSteps);
  if (in->batch_size() == 0) in->set_batch_size(d::kInnerBatchSize);
  if (!in->has_first_moment_sync_rounds()) in->set_first_moment_sync_rounds(d::kInnerFirstMomentSyncRounds);
  if (!in->has_second_moment_sync_rounds()) in->set_second_moment_sync_rounds(d::kInnerSecondMomentSyncRounds);
}

void FillOuter(v1::OuterOptimizer* out) {
  if (out->name().empty()) out->set_name(d::kOuterName);
  if (!out->has_lr()) out->set_lr(d::kOuterLr);
  if (!out->has_momentum()) out->set_momentum(d::kOuterMomentum);
  if (!out->has_warmup_rounds()) out->set_warmup_rounds(d::kOuterWarmupRounds);
  if (out->lr_decay().empty()) out->set_lr_decay(d::kOuterLrDecay);
  if (!out->has_final_lr_fraction()) out->set_final_lr_fraction(d::kOuterFinalLrFraction);
  if (!out->has_momentum_warmup_rounds()) out->set_momentum_warmup_rounds(d::kOuterMomentumWarmupRounds);
  if (!out->has_momentum_restart_rounds()) out->set_momentum_restart_rounds(d::kOuterMomentumRestartRounds);
}

void FillSync(v1::SyncPolicy* sync) {
  if (sync->kind().empty()) SetSyncKind(sync, d::kSyncKind);
  if (sync->inner_steps() == 0) sync->set_inner_steps(d::kInnerSteps);
  if (sync->fragments() == 0) sync->set_fragments(d::kFragments);
  if (!sync->has_overlap_steps()) sync->set_overlap_steps(d::kOverlapSteps);
  if (!sync->has_mixing_alpha()) sync->set_mixing_alpha(d::kMixingAlpha);
}

void FillCompression(const v1::SyncPolicy& sync, v1::Compression* c) {
  auto kind = SyncKindOf(sync);  // an unknown kind gets no codec: validation refuses the kind
  if (c->codec() == v1::CODEC_UNSPECIFIED && kind.ok())
    c->set_codec(CodecToWire(sync_policies::Traits(*kind).default_codec));
  if (c->block_size() == 0) c->set_block_size(d::kBlockSize);
  if (c->topk_fraction() == 0) c->set_topk_fraction(d::kTopkFraction);
}

}  // namespace

void FillJobDefaults(v1::JobSpec* spec) {
  if (spec->name().empty()) spec->set_name(d::kName);
  if (!spec->has_seed()) spec->set_seed(d::kSeed);
  if (spec->region_count() == 0)
    spec->set_region_count(spec->regions_size() > 0 ? static_cast<uint32_t>(spec->regions_size()) : d::kRegionCount);
  if (spec->min_regions() == 0) spec->set_min_regions(std::min(d::kMinRegions, spec->region_count()));
  if (spec->workers_per_region() == 0) spec->set_workers_per_region(d::kWorkersPerRegion);
  if (!spec->has_checkpoint_interval()) spec->set_checkpoint_interval(d::kCheckpointInterval);
  if (!spec->worker().has_exit_grace_s()) spec->mutable_worker()->set_exit_grace_s(d::kWorkerExitGraceS);
  if (spec->intra_region() == v1::INTRA_REGION_UNSPECIFIED) spec->set_intra_region(d::kIntraRegion);
  const bool command = spec->has_worker() && spec->worker().has_command();
  if (!command) {
    // The built-in trainer's preset, in both spellings (worker.preset and the
    // older model_preset) so either reads it; two different names stay for
    // validation to refuse.
    const std::string& named = spec->has_worker() ? spec->worker().builtin().preset() : std::string();
    const std::string preset = !named.empty()                 ? named
                               : !spec->model_preset().empty() ? spec->model_preset()
                                                               : std::string(d::kModelPreset);
    if (spec->model_preset().empty()) spec->set_model_preset(preset);
    if (spec->has_worker() && named.empty()) spec->mutable_worker()->mutable_builtin()->set_preset(preset);
    if (!spec->data().has_synthetic() && !spec->data().has_text_file()) spec->mutable_data()->mutable_synthetic();
  }
  if (spec->has_data()) FillData(spec->mutable_data());
  FillInner(spec->mutable_inner());
  FillOuter(spec->mutable_outer());
  FillSync(spec->mutable_sync());
  FillCompression(spec->sync(), spec->mutable_compression());
}

}  // namespace longhaul::proto
