#include <algorithm>
#include <utility>

#include "longhaul/sync_policies/compressor.h"

namespace longhaul::sync_policies {

void ErrorFeedback::Stage(const Compressor& compressor, std::span<const float> update, std::vector<std::byte>& out) {
  const size_t n = update.size();
  const bool restart = residual_.size() != n;
  next_.resize(n);
  float* r = next_.data();
  for (size_t i = 0; i < n; ++i) r[i] = (restart ? 0.0f : residual_[i]) + update[i];  // update + residual
  compressor.Encode(next_, out);
  scratch_.resize(n);
  staged_ = true;
  // Our own encoding always decodes; an error here would be a codec bug.
  Status decoded = compressor.Decode(out, scratch_);
  if (!decoded.ok()) {
    std::fill(next_.begin(), next_.end(), 0.0f);
    return;
  }
  const float* sent = scratch_.data();
  for (size_t i = 0; i < n; ++i) r[i] -= sent[i];  // keep what was not sent
}

void ErrorFeedback::Commit() {
  if (!staged_) return;
  std::swap(residual_, next_);
  staged_ = false;
}

}  // namespace longhaul::sync_policies
