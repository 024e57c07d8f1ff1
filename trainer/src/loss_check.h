// The inner step's loss check, shared by the host and device trainers.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "longhaul/common/status.h"

namespace longhaul::trainer {

// kDataLoss when the loss of inner step `step` (1-based) is not finite.
inline Status CheckTrainingLoss(float loss, uint64_t step) {
  if (std::isfinite(loss)) return Status::Ok();
  return DataLoss("training loss is not finite at inner step " + std::to_string(step));
}

}  // namespace longhaul::trainer
