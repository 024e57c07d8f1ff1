#include "longhaul/sync_policies/outer_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace longhaul::sync_policies {

Result<LrDecay> LrDecayFromName(std::string_view name) {
  std::string names;
  for (const auto& d : kLrDecays) {
    if (name == d.name) return d.decay;
    names += (names.empty() ? "" : ", ") + std::string(d.name);
  }
  return InvalidArgument("unknown lr decay '" + std::string(name) + "' (one of: " + names + ")");
}

const char* LrDecayName(LrDecay decay) {
  for (const auto& d : kLrDecays)
    if (d.decay == decay) return d.name;
  return "?";
}

OuterStepSettings OuterScheduleAt(const OuterOptimizerOptions& o, uint32_t round) {
  OuterStepSettings s{o.lr, o.momentum, false};
  if (round == 0) return s;
  const double t = round;
  double lr_scale = 1.0;
  if (o.warmup_rounds > 0 && round <= o.warmup_rounds) {
    lr_scale = t / o.warmup_rounds;
  } else if (o.decay != LrDecay::kNone && o.total_rounds > o.warmup_rounds) {
    // 0 right after the warm-up, 1 at the last round.
    const double p = std::min(1.0, (t - o.warmup_rounds) / static_cast<double>(o.total_rounds - o.warmup_rounds));
    const double f = o.final_lr_fraction;
    lr_scale = o.decay == LrDecay::kCosine ? f + (1 - f) * 0.5 * (1 + std::cos(M_PI * p)) : 1 - (1 - f) * p;
  }
  s.lr = static_cast<float>(o.lr * lr_scale);
  if (o.momentum_warmup_rounds > 0 && round <= o.momentum_warmup_rounds) {
    s.momentum = static_cast<float>(o.momentum * (t - 1) / o.momentum_warmup_rounds);
  }
  s.restart = o.momentum_restart_rounds > 0 && round > 1 && (round - 1) % o.momentum_restart_rounds == 0;
  return s;
}

Status OuterOptimizerOptions::Validate() const {
  if (name != "nesterov" && name != "momentum" && name != "sgd")
    return InvalidArgument("outer_optimizer.name must be nesterov, momentum or sgd, got '" + name + "'");
  if (!(lr > 0.0f) || !std::isfinite(lr))
    return InvalidArgument("outer_optimizer.lr must be a finite value > 0, got " + std::to_string(lr));
  if (name != "sgd" && !(momentum >= 0.0f && momentum < 1.0f))
    return InvalidArgument("outer_optimizer.momentum must be in [0, 1), got " + std::to_string(momentum));
  if (!(final_lr_fraction >= 0.0f && final_lr_fraction <= 1.0f))
    return InvalidArgument("outer_optimizer.final_lr_fraction must be in [0, 1], got " + std::to_string(final_lr_fraction));
  if (decay != LrDecay::kNone && total_rounds == 0)
    return InvalidArgument(std::string("outer_optimizer: a ") + LrDecayName(decay) + " lr decay needs total_rounds");
  return Status::Ok();
}

Result<std::unique_ptr<OuterOptimizer>> OuterOptimizer::Create(const OuterOptimizerOptions& options,
                                                               size_t shard_size) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  Kind kind = options.name == "sgd" ? Kind::kSgd : options.name == "momentum" ? Kind::kMomentum : Kind::kNesterov;
  return std::unique_ptr<OuterOptimizer>(new OuterOptimizer(options, kind, shard_size));
}

OuterOptimizer::OuterOptimizer(OuterOptimizerOptions options, Kind kind, size_t shard_size)
    : options_(std::move(options)), kind_(kind), shard_size_(shard_size) {
  if (kind_ != Kind::kSgd) momentum_buffer_.assign(shard_size, 0.0f);
}

Status OuterOptimizer::TryStep(std::span<float> params, std::span<const float> g, uint32_t round) {
  if (params.size() != shard_size_ || g.size() != shard_size_)
    return InvalidArgument("outer step on a shard of " + std::to_string(shard_size_) + " floats got " +
                           std::to_string(params.size()) + " parameters and " + std::to_string(g.size()) +
                           " pseudo-gradient entries");
  const OuterStepSettings step = OuterScheduleAt(options_, round);
  const float lr = step.lr;
  const float mu = step.momentum;
  if (step.restart) std::fill(momentum_buffer_.begin(), momentum_buffer_.end(), 0.0f);
  float* theta = params.data();
  float* m = momentum_buffer_.data();
  const size_t n = shard_size_;
  switch (kind_) {
    case Kind::kSgd:
      for (size_t i = 0; i < n; ++i) theta[i] -= lr * g[i];
      break;
    case Kind::kMomentum:
      for (size_t i = 0; i < n; ++i) {
        m[i] = mu * m[i] + g[i];
        theta[i] -= lr * m[i];
      }
      break;
    case Kind::kNesterov:
      for (size_t i = 0; i < n; ++i) {
        m[i] = mu * m[i] + g[i];
        theta[i] -= lr * (g[i] + mu * m[i]);
      }
      break;
  }
  return Status::Ok();
}

void OuterOptimizer::Step(std::span<float> params, std::span<const float> pseudo_gradient, uint32_t round) {
  Status s = TryStep(params, pseudo_gradient, round);
  if (!s.ok()) {
    // Sizes are fixed by the caller's own shard layout: a mismatch is a bug, and
    // continuing would silently desynchronise the replicas.
    std::fprintf(stderr, "longhaul: OuterOptimizer::Step: %s\n", s.message().c_str());
    std::abort();
  }
}

Status OuterOptimizer::LoadState(std::span<const float> state) {
  if (state.size() != momentum_buffer_.size())
    return InvalidArgument("outer optimizer '" + options_.name + "' state has " +
                           std::to_string(momentum_buffer_.size()) + " floats, got " + std::to_string(state.size()));
  momentum_buffer_.assign(state.begin(), state.end());
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
