#include "longhaul/sync_policies/outer_optimizer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace longhaul::sync_policies {

Status OuterOptimizerOptions::Validate() const {
  if (name != "nesterov" && name != "momentum" && name != "sgd")
    return InvalidArgument("outer_optimizer.name must be nesterov, momentum or sgd, got '" + name + "'");
  if (!(lr > 0.0f) || !std::isfinite(lr))
    return InvalidArgument("outer_optimizer.lr must be a finite value > 0, got " + std::to_string(lr));
  if (name != "sgd" && !(momentum >= 0.0f && momentum < 1.0f))
    return InvalidArgument("outer_optimizer.momentum must be in [0, 1), got " + std::to_string(momentum));
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

Status OuterOptimizer::TryStep(std::span<float> params, std::span<const float> g) {
  if (params.size() != shard_size_ || g.size() != shard_size_)
    return InvalidArgument("outer step on a shard of " + std::to_string(shard_size_) + " floats got " +
                           std::to_string(params.size()) + " parameters and " + std::to_string(g.size()) +
                           " pseudo-gradient entries");
  const float lr = options_.lr;
  const float mu = options_.momentum;
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

void OuterOptimizer::Step(std::span<float> params, std::span<const float> pseudo_gradient) {
  Status s = TryStep(params, pseudo_gradient);
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
