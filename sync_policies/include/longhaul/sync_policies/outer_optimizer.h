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
//
// A schedule over the job's rounds (one outer step each) may change lr and mu
// per round (OuterScheduleAt, a pure function of the round, the same on every
// replica): a linear lr warm-up, a cosine or linear lr decay to a fraction of
// lr at the last round, a linear momentum warm-up from 0 (Pier-style outer
// momentum warm-up), and momentum restarts (the buffer zeroed every R rounds).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "longhaul/common/status.h"

namespace longhaul::sync_policies {

// How the outer lr falls after its warm-up. One row per kind.
enum class LrDecay { kNone, kCosine, kLinear };
struct LrDecayInfo {
  LrDecay decay;
  const char* name;
};
inline constexpr LrDecayInfo kLrDecays[] = {{LrDecay::kNone, "none"}, {LrDecay::kCosine, "cosine"}, {LrDecay::kLinear, "linear"}};
Result<LrDecay> LrDecayFromName(std::string_view name);  // error lists the names
const char* LrDecayName(LrDecay decay);

struct OuterOptimizerOptions {
  std::string name = "nesterov";  // "nesterov", "momentum" or "sgd"
  float lr = 0.7f;                // > 0, finite
  float momentum = 0.9f;          // [0, 1) for nesterov/momentum; ignored by sgd
  // Schedule (defaults: none). Rounds count from 1 to total_rounds.
  uint32_t total_rounds = 0;             // the job's rounds; needed by a decay
  uint32_t warmup_rounds = 0;            // lr * t / W for rounds t <= W
  LrDecay decay = LrDecay::kNone;        // after the warm-up, down to lr * final_lr_fraction at the last round
  float final_lr_fraction = 0.1f;        // [0, 1]
  uint32_t momentum_warmup_rounds = 0;   // mu * (t - 1) / M for rounds t <= M
  uint32_t momentum_restart_rounds = 0;  // the buffer is zeroed before the step of rounds R+1, 2R+1, ...
  Status Validate() const;
};

// The outer step's settings in round `round` (1-based).
struct OuterStepSettings {
  float lr = 0;
  float momentum = 0;
  bool restart = false;  // zero the momentum buffer before this step
};
OuterStepSettings OuterScheduleAt(const OuterOptimizerOptions& options, uint32_t round);

class OuterOptimizer {
 public:
  static Result<std::unique_ptr<OuterOptimizer>> Create(const OuterOptimizerOptions& options, size_t shard_size);

  // The outer step of round `round` (the schedule's; 0 = no schedule: lr and
  // momentum as configured). Precondition: params.size() ==
  // pseudo_gradient.size() == shard_size() (a programming error otherwise: the
  // process aborts with a message).
  void Step(std::span<float> params, std::span<const float> pseudo_gradient, uint32_t round = 0);
  // Checked variant for callers whose sizes come from outside.
  Status TryStep(std::span<float> params, std::span<const float> pseudo_gradient, uint32_t round = 0);

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
