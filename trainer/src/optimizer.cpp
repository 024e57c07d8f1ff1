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

float AdamWLr(const AdamWOptions& o, uint64_t t) {
  if (o.warmup_steps > 0 && t <= o.warmup_steps)
    return o.lr * static_cast<float>(t) / static_cast<float>(o.warmup_steps);
  const double span = static_cast<double>(o.total_steps - o.warmup_steps);
  double p = span > 0 ? static_cast<double>(t - o.warmup_steps) / span : 1.0;
  if (p > 1.0) p = 1.0;
  const double min_lr = static_cast<double>(o.lr) * o.min_lr_ratio;
  return static_cast<float>(min_lr + (o.lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p)));
}

math::AdamWScalars AdamWStepScalars(const AdamWOptions& o, uint64_t t) {
  const float lr = AdamWLr(o, t);
  math::AdamWScalars s;
  s.beta1 = o.beta1;
  s.beta2 = o.beta2;
  s.eps = o.eps;
  const float bc1 = 1.0f - static_cast<float>(std::pow(static_cast<double>(o.beta1), static_cast<double>(t)));
  const float bc2 = 1.0f - static_cast<float>(std::pow(static_cast<double>(o.beta2), static_cast<double>(t)));
  s.step_size = lr / bc1;
  s.inv_sqrt_bc2 = 1.0f / std::sqrt(bc2);
  s.decay = 1.0f - lr * o.weight_decay;
  return s;
}

AdamW::AdamW(AdamWOptions options, size_t n) : options_(options), m_(n, 0.0f), v_(n, 0.0f) {}

void AdamW::Step(std::span<float> params, std::span<const float> grad) {
  const FlushSubnormals flush;
  const math::AdamWScalars s = AdamWStepScalars(options_, ++step_);
  float* p = params.data();
  const float* g = grad.data();
  float* m = m_.data();
  float* v = v_.data();
  const size_t n = params.size();
  for (size_t i = 0; i < n; ++i) math::AdamWUpdate(p[i], g[i], m[i], v[i], s);  // vectorised by the compiler
}

}  // namespace longhaul::trainer
