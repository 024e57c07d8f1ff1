// InnerTrainer: batch -> forward/backward -> region all-reduce -> (caller) -> AdamW.
#include "longhaul/trainer/trainer.h"

#include <cmath>
#include <exception>
#include <limits>
#include <string>

#include "flush_subnormals.h"
#include "loss_check.h"

namespace longhaul::trainer {

Status TrainerOptions::Validate() const {
  LONGHAUL_RETURN_IF_ERROR(model.Validate());
  LONGHAUL_RETURN_IF_ERROR(adamw.Validate());
  if (batch_size < 1 || batch_size > (1 << 20))
    return InvalidArgument("trainer options: field 'batch_size' must be in [1, 1048576], got " +
                           std::to_string(batch_size));
  return Status::Ok();
}

InnerTrainer::InnerTrainer(TrainerOptions options, DataSource& data, IntraRegionGroup& group)
    : options_(std::move(options)),
      data_(data),
      group_(group),
      model_(options_.model),
      optimizer_(options_.adamw, model_.num_params()),
      grad_(model_.num_params() + 1) {
  model_.InitParams(options_.seed);
}

Result<float> InnerTrainer::Step() {
  LONGHAUL_ASSIGN_OR_RETURN(float loss, ComputeGradients());
  ApplyGradients();
  return loss;
}

Result<float> InnerTrainer::ComputeGradients() {
  const FlushSubnormals flush;
  const Batch batch = data_.NextTrain(options_.batch_size, options_.model.context);
  const size_t n = model_.num_params();
  Status computed;
  try {
    grad_[n] = model_.ForwardBackward(batch, std::span<float>(grad_).first(n));
  } catch (const std::exception& e) {  // e.g. a cuBLAS engine failing
    computed = Internal(std::string("forward/backward: ") + e.what());
    grad_[n] = std::numeric_limits<float>::quiet_NaN();
  }
  // The other ranks wait in the all-reduce: every rank joins it, even one whose
  // step failed (with a NaN loss), and the loss is checked after it, on the
  // region's mean, so every rank's step fails alike.
  const Status reduced = group_.AllReduceMean(grad_).WithContext("gradient all-reduce");
  LONGHAUL_RETURN_IF_ERROR(computed);
  LONGHAUL_RETURN_IF_ERROR(reduced);
  LONGHAUL_RETURN_IF_ERROR(CheckTrainingLoss(grad_[n], optimizer_.step() + 1));
  tokens_ += static_cast<uint64_t>(options_.batch_size);
  return grad_[n];
}

void InnerTrainer::ApplyGradients() { optimizer_.Step(model_.params(), gradient()); }

float InnerTrainer::ValidationLoss(std::span<const float> params, int batches) {
  const FlushSubnormals flush;
  double total = 0;
  for (int i = 0; i < batches; ++i)
    total += model_.LossWith(params, data_.Validation(options_.batch_size, options_.model.context, i));
  return batches > 0 ? static_cast<float>(total / batches) : 0.0f;
}

}  // namespace longhaul::trainer
