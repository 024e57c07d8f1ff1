#include "longhaul/worker/adamw_state.h"

#include <algorithm>

namespace longhaul::worker {

void AdamWState::Save() {
  m_.assign(adam_.first_moment().begin(), adam_.first_moment().end());
  v_.assign(adam_.second_moment().begin(), adam_.second_moment().end());
  step_ = adam_.step();
}

void AdamWState::Restore() {
  std::copy(m_.begin(), m_.end(), adam_.first_moment().begin());
  std::copy(v_.begin(), v_.end(), adam_.second_moment().begin());
  adam_.set_step(step_);
}

void AdamWState::Rejoined(uint64_t job_step) {
  if (adam_.step() < job_step) adam_.set_step(job_step);
}

}  // namespace longhaul::worker
