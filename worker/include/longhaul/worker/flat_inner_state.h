// FlatInnerState: an inner optimizer's state held by the caller as flat fp32
// buffers of the parameters' length (a PyTorch AdamW's exp_avg and exp_avg_sq
// made views of two flat tensors, or a C program's moment arrays). Saved at each
// round's start and restored exactly when the round rolls back; in a sync job a
// joining region receives them from a live one. A step counter, where the
// optimizer keeps one, is the caller's: it follows the job step.
#pragma once

#include <span>
#include <vector>

#include "longhaul/worker/region_replica.h"

namespace longhaul::worker {

class FlatInnerState final : public InnerState {
 public:
  // Every buffer must hold `num_params` floats (kInvalidArgument otherwise).
  static Result<std::unique_ptr<FlatInnerState>> Create(std::vector<std::span<float>> state, size_t num_params);
  void Save() override;
  void Restore() override;
  void Rejoined(uint64_t) override {}
  std::vector<std::span<float>> SharedState() override { return state_; }

 private:
  explicit FlatInnerState(std::vector<std::span<float>> state) : state_(std::move(state)), saved_(state_.size()) {}
  std::vector<std::span<float>> state_;
  std::vector<std::vector<float>> saved_;
};

}  // namespace longhaul::worker
