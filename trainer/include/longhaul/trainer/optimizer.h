// AdamW: the inner optimizer, with linear warmup then cosine decay of the learning rate.
//
// Decoupled weight decay (Loshchilov & Hutter) applied to every element of the flat
// parameter vector, biases and embeddings included: the flat vector carries no
// per-tensor roles, and at these model sizes the difference is immaterial.
// Schedule, with t = the 1-based index of the step being taken:
//   t <= warmup_steps:  lr * t / warmup_steps
//   after:              min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * p)),
//                       p = min(1, (t - warmup) / (total_steps - warmup)), min_lr = lr * min_lr_ratio
// The moments are public so a region can checkpoint and restore its inner state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/trainer/byte_lm_math.h"

namespace longhaul::trainer {

struct AdamWOptions {
  float lr = 3e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  uint32_t warmup_steps = 20;
  uint64_t total_steps = 1000;
  float min_lr_ratio = 0.1f;
  // Names the first bad field and its value.
  Status Validate() const;
};

// The learning rate of the t-th step (1-based) under `options`' schedule.
float AdamWLr(const AdamWOptions& options, uint64_t t);
// The bias corrections, step size and decay of the t-th step, which
// math::AdamWUpdate applies to every element (host loop or CUDA kernel).
math::AdamWScalars AdamWStepScalars(const AdamWOptions& options, uint64_t t);

class AdamW {
 public:
  // `options` must be valid; `n` is the number of parameters.
  AdamW(AdamWOptions options, size_t n);

  // One update of `params` (n floats) with `grad` (n floats).
  void Step(std::span<float> params, std::span<const float> grad);
  // The learning rate the next Step() will use.
  float CurrentLr() const { return LrAt(step_ + 1); }
  float LrAt(uint64_t t) const { return AdamWLr(options_, t); }
  uint64_t step() const { return step_; }

  // Inner state for checkpoints.
  std::span<float> first_moment() { return m_; }
  std::span<float> second_moment() { return v_; }
  void set_step(uint64_t step) { step_ = step; }
  const AdamWOptions& options() const { return options_; }

 private:
  AdamWOptions options_;
  uint64_t step_ = 0;
  std::vector<float> m_;
  std::vector<float> v_;
};

}  // namespace longhaul::trainer
