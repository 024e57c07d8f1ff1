#include "longhaul/sync_policies/compressor.h"

namespace longhaul::sync_policies {

void ErrorFeedback::Compress(const Compressor& compressor, std::span<const float> update, std::vector<std::byte>& out) {
  if (residual_.size() != update.size()) residual_.assign(update.size(), 0.0f);
  float* r = residual_.data();
  for (size_t i = 0; i < update.size(); ++i) r[i] += update[i];  // r = update + residual
  compressor.Encode(residual_, out);
  scratch_.resize(update.size());
  // Our own encoding always decodes; an error here would be a codec bug.
  Status decoded = compressor.Decode(out, scratch_);
  if (!decoded.ok()) {
    residual_.assign(update.size(), 0.0f);
    return;
  }
  const float* sent = scratch_.data();
  for (size_t i = 0; i < update.size(); ++i) r[i] -= sent[i];  // keep what was not sent
}

}  // namespace longhaul::sync_policies
