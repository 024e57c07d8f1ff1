// FlatInnerState: an inner optimizer's state held by the caller as flat fp32
// buffers of the parameters' length (a PyTorch AdamW's exp_avg and exp_avg_sq
// made views of two flat tensors, or a C program's moment arrays). Saved at each
// round's start and restored exactly when the round rolls back; in a sync job a
// joining region receives them from a live one. A step counter, where the
// optimizer keeps one, is the caller's: it follows the job step. With a mirror
// the buffers are host copies of state kept elsewhere (a GPU): they are brought
// up to date before they are read and handed back after they were written.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "longhaul/worker/region_replica.h"

namespace longhaul::worker {

class FlatInnerState final : public InnerState {
 public:
  // Every buffer must hold `num_params` floats (kInvalidArgument otherwise).
  // `mirror` (optional) must outlive the state.
  static Result<std::unique_ptr<FlatInnerState>> Create(std::vector<std::span<float>> state, size_t num_params,
                                                        ParameterMirror* mirror = nullptr);
  void Save() override;
  void Restore() override;
  void Rejoined(uint64_t) override {}
  std::vector<std::span<float>> SharedState() override;
  void SharedStateWritten() override;
  // The first failed copy through the mirror (these calls return nothing);
  // cleared by reading it.
  Status TakeFailure() override { return std::exchange(failure_, Status::Ok()); }

 private:
  FlatInnerState(std::vector<std::span<float>> state, ParameterMirror* mirror)
      : state_(std::move(state)), saved_(state_.size()), mirror_(mirror) {}
  void Keep(const Status& s);
  void Refresh();  // the host buffers from the originals (or, while those are stale, the other way)
  void Push();     // the originals from the host buffers
  std::vector<std::span<float>> state_;
  std::vector<std::vector<float>> saved_;
  ParameterMirror* mirror_;
  Status failure_;
  bool originals_stale_ = false;  // a copy back failed: the host buffers hold the right values
};

}  // namespace longhaul::worker
