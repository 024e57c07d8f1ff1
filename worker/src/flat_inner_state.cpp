#include "longhaul/worker/flat_inner_state.h"

#include <algorithm>
#include <string>

namespace longhaul::worker {

Result<std::unique_ptr<FlatInnerState>> FlatInnerState::Create(std::vector<std::span<float>> state,
                                                              size_t num_params, ParameterMirror* mirror) {
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].size() != num_params || state[i].data() == nullptr) {
      return InvalidArgument("optimizer state buffer " + std::to_string(i) + " holds " +
                             std::to_string(state[i].size()) + " floats; it must hold one per parameter (" +
                             std::to_string(num_params) + ")");
    }
  }
  return std::unique_ptr<FlatInnerState>(new FlatInnerState(std::move(state), mirror));
}

void FlatInnerState::Keep(const Status& s) {
  if (!s.ok() && failure_.ok()) failure_ = s.WithContext("copying the optimizer state");
}

void FlatInnerState::Refresh() {
  if (mirror_ == nullptr || state_.empty()) return;
  // After a failed copy back the host buffers are the right ones: push them
  // again rather than read the originals' stale values.
  if (originals_stale_) return Push();
  Keep(mirror_->StateToHost());
}

void FlatInnerState::Push() {
  if (mirror_ == nullptr || state_.empty()) return;
  const Status s = mirror_->StateToDevice();
  originals_stale_ = !s.ok();
  Keep(s);
}

void FlatInnerState::Save() {
  Refresh();
  for (size_t i = 0; i < state_.size(); ++i) saved_[i].assign(state_[i].begin(), state_[i].end());
}

void FlatInnerState::Restore() {
  for (size_t i = 0; i < state_.size(); ++i)
    if (saved_[i].size() == state_[i].size()) std::copy(saved_[i].begin(), saved_[i].end(), state_[i].begin());
  Push();
}

std::vector<std::span<float>> FlatInnerState::SharedState() {
  Refresh();
  return state_;
}

void FlatInnerState::SharedStateWritten() { Push(); }

}  // namespace longhaul::worker
