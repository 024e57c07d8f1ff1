#include "longhaul/worker/flat_inner_state.h"

#include <algorithm>
#include <string>

namespace longhaul::worker {

Result<std::unique_ptr<FlatInnerState>> FlatInnerState::Create(std::vector<std::span<float>> state,
                                                              size_t num_params) {
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].size() != num_params || state[i].data() == nullptr) {
      return InvalidArgument("optimizer state buffer " + std::to_string(i) + " holds " +
                             std::to_string(state[i].size()) + " floats; it must hold one per parameter (" +
                             std::to_string(num_params) + ")");
    }
  }
  return std::unique_ptr<FlatInnerState>(new FlatInnerState(std::move(state)));
}

void FlatInnerState::Save() {
  for (size_t i = 0; i < state_.size(); ++i) saved_[i].assign(state_[i].begin(), state_[i].end());
}

void FlatInnerState::Restore() {
  for (size_t i = 0; i < state_.size(); ++i)
    if (saved_[i].size() == state_[i].size()) std::copy(saved_[i].begin(), saved_[i].end(), state_[i].begin());
}

}  // namespace longhaul::worker
