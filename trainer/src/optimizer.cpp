// AdamW update and learning-rate schedule.
#include "longhaul/trainer/optimizer.h"

#include <cmath>
#include <numbers>
#include <string>

#include "flush_subnormals.h"

namespace longhaul::trainer {
namespace {
Status Bad(const char* field, double value, const char* rule) {
  return InvalidArgument("adamw options: field '" + std::string(field) + "' " + rule + ", got " +
                         std::to_string(value));
}
}  // namespace

Status AdamWOptions::Validate() const {
  if (!(lr > 0.0f) || !std::isfinite(lr)) return Bad("lr", lr, "must be a finite value > 0");
  if (!(beta1 >= 0.0f && beta1 < 1.0f)) return Bad("beta1", beta1, "must be in [0, 1)");
  if (!(beta2 >= 0.0f && beta2 < 1.0f)) return Bad("beta2", beta2, "must be in [0, 1)");
  if (!(eps > 0.0f)) return Bad("eps", eps, "must be > 0");
  if (!(weight_decay >= 0.0f) || !std::isfinite(weight_decay))
    return Bad("weight_decay", weight_decay, "must be a finite value >= 0");
  if (total_steps < 1) return Bad("total_steps", static_cast<double>(total_steps), "must be >= 1");
  if (warmup_steps > total_steps)
    return Bad("warmup_steps", warmup_steps, "must be <= total_steps");
  if (!(min_lr_ratio >= 0.0f && min_lr_ratio <= 1.0f))
    return Bad("min_lr_ratio", min_lr_ratio, "must be in [0, 1]");
  return Status::Ok();
}

AdamW::AdamW(AdamWOptions options, size_t n) : options_(options), m_(n, 0.0f), v_(n, 0.0f) {}

float AdamW::LrAt(uint64_t t) const {
  const AdamWOptions& o = options_;
  if (o.warmup_steps > 0 && t <= o.warmup_steps)
    return o.lr * static_cast<float>(t) / static_cast<float>(o.warmup_steps);
  const double span = static_cast<double>(o.total_steps - o.warmup_steps);
  double p = span > 0 ? static_cast<double>(t - o.warmup_steps) / span : 1.0;
  if (p > 1.0) p = 1.0;
  const double min_lr = static_cast<double>(o.lr) * o.min_lr_ratio;
  return static_cast<float>(min_lr + (o.lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p)));
}

void AdamW::Step(std::span<float> params, std::span<const float> grad) {
  const FlushSubnormals flush;
  ++step_;
  const float lr = LrAt(step_);
  const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  const float bc1 = 1.0f - static_cast<float>(std::pow(static_cast<double>(b1), static_cast<double>(step_)));
  const float bc2 = 1.0f - static_cast<float>(std::pow(static_cast<double>(b2), static_cast<double>(step_)));
  const float step_size = lr / bc1;
  const float inv_sqrt_bc2 = 1.0f / std::sqrt(bc2);
  const float decay = 1.0f - lr * options_.weight_decay;
  float* p = params.data();
  const float* g = grad.data();
  float* m = m_.data();
  float* v = v_.data();
  const size_t n = params.size();
  for (size_t i = 0; i < n; ++i) {  // plain loop: vectorised by the compiler
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + eps;
    p[i] = p[i] * decay - step_size * m[i] / denom;
  }
}

}  // namespace longhaul::trainer
