// InnerTrainer: what one worker does inside a region between outer rounds.
//
// One inner step = next training batch from this worker's DataSource, forward and
// backward on the ByteLM, AllReduceMean of the gradient over the IntraRegionGroup
// (so every worker of the region applies the same update and their replicas stay
// bitwise identical), then an AdamW step (ComputeGradients/ApplyGradients split it
// for kind sync, which averages the gradient across regions in between). The DiLoCo outer round (pseudo-gradient,
// cross-region average, outer optimizer) is not here: the caller reads and writes
// model().params() around H calls of Step().
//
// Usage:
//   TrainerOptions opts{.model = *ModelPreset("tiny")};
//   LONGHAUL_RETURN_IF_ERROR(opts.Validate());
//   InnerTrainer trainer(opts, *data, *group);   // params = InitParams(opts.seed)
//   for (int i = 0; i < H; ++i) LONGHAUL_ASSIGN_OR_RETURN(float loss, trainer.Step());
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/trainer/data.h"
#include "longhaul/trainer/intra_region.h"
#include "longhaul/trainer/model.h"
#include "longhaul/trainer/optimizer.h"

namespace longhaul::trainer {

struct TrainerOptions {
  ModelConfig model;
  AdamWOptions adamw;
  int batch_size = 16;  // examples per worker per inner step
  uint64_t seed = 1;    // parameter initialisation; the same in every region
  Status Validate() const;
};

class InnerTrainer {
 public:
  // `options` must be valid; `data` and `group` must outlive the trainer. Parameters
  // are initialised from options.seed (identical on every worker and region).
  InnerTrainer(TrainerOptions options, DataSource& data, IntraRegionGroup& group);

  // One inner step; returns the training loss averaged over the region's workers (it
  // rides along with the gradient all-reduce). Fails if the all-reduce fails or the
  // loss is not finite (kDataLoss); the parameters are then left unchanged.
  Result<float> Step();
  // Step() in two halves, for a caller that acts on the gradient in between
  // (kind sync averages it across regions): ComputeGradients takes the next
  // batch, runs forward/backward and the region all-reduce, and returns the
  // region's mean loss; gradient() then holds the region's mean gradient;
  // ApplyGradients takes the AdamW step with it.
  Result<float> ComputeGradients();
  std::span<float> gradient() { return std::span<float>(grad_).first(model_.num_params()); }
  void ApplyGradients();
  // Mean validation loss of `params` (model layout) over the fixed held-out batches
  // 0..batches-1 of options.batch_size examples; identical in every region.
  float ValidationLoss(std::span<const float> params, int batches);

  ByteLM& model() { return model_; }
  AdamW& optimizer() { return optimizer_; }
  const TrainerOptions& options() const { return options_; }
  // Training examples (predicted bytes) this worker has consumed.
  uint64_t tokens() const { return tokens_; }

 private:
  TrainerOptions options_;
  DataSource& data_;
  IntraRegionGroup& group_;
  ByteLM model_;
  AdamW optimizer_;
  std::vector<float> grad_;  // num_params gradient + 1 slot for the loss
  uint64_t tokens_ = 0;
};

}  // namespace longhaul::trainer
