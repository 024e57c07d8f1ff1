// Outer optimizer (DiLoCo): applied to one flat fp32 shard of the global
// parameters with the averaged pseudo-gradient, once per outer round.
//
// "nesterov" (DiLoCo default, PyTorch SGD nesterov convention):
//     m <- mu * m + g;  theta <- theta - lr * (g + mu * m)
// "momentum" (heavy ball): m <- mu * m + g;  theta <- theta - lr * m
// "sgd":                   theta <- theta - lr * g            (no state)
// The state (momentum buffer) is a flat float vector so it can be checkpointed
// and sent to a joining region; every replica applies the same float ops in the
// same order, so replicas stay bitwise identical.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "longhaul/common/status.h"

namespace longhaul::sync_policies {

struct OuterOptimizerOptions {
  std::string name = "nesterov";  // "nesterov", "momentum" or "sgd"
  float lr = 0.7f;                // > 0, finite
  float momentum = 0.9f;          // [0, 1) for nesterov/momentum; ignored by sgd
  Status Validate() const;
};

class OuterOptimizer {
 public:
  static Result<std::unique_ptr<OuterOptimizer>> Create(const OuterOptimizerOptions& options, size_t shard_size);

  // Precondition: params.size() == pseudo_gradient.size() == shard_size()
  // (a programming error otherwise: the process aborts with a message).
  void Step(std::span<float> params, std::span<const float> pseudo_gradient);
  // Checked variant for callers whose sizes come from outside.
  Status TryStep(std::span<float> params, std::span<const float> pseudo_gradient);

  // Momentum buffer (empty for sgd).
  std::span<const float> state() const { return momentum_buffer_; }
  // Restores a state() taken from this or another replica; size must match.
  Status LoadState(std::span<const float> state);

  const OuterOptimizerOptions& options() const { return options_; }
  size_t shard_size() const { return shard_size_; }

 private:
  enum class Kind { kSgd, kMomentum, kNesterov };
  OuterOptimizer(OuterOptimizerOptions options, Kind kind, size_t shard_size);

  OuterOptimizerOptions options_;
  Kind kind_;
  size_t shard_size_;
  std::vector<float> momentum_buffer_;
};

}  // namespace longhaul::sync_policies
