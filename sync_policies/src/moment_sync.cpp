#include "longhaul/sync_policies/moment_sync.h"

#include <string>

namespace longhaul::sync_policies {

bool MomentSyncOptions::Due(size_t buffer, uint32_t round) const {
  const uint32_t period = buffer == 0 ? first_moment_sync_rounds : buffer == 1 ? second_moment_sync_rounds : 0;
  return period > 0 && round > 0 && round % period == 0;
}

Status MomentSyncOptions::Validate() const {
  constexpr uint32_t kMaxPeriod = 1000000;
  if (first_moment_sync_rounds > kMaxPeriod)
    return InvalidArgument("first_moment_sync_rounds must be in 0..1000000, got " + std::to_string(first_moment_sync_rounds));
  if (second_moment_sync_rounds > kMaxPeriod)
    return InvalidArgument("second_moment_sync_rounds must be in 0..1000000, got " + std::to_string(second_moment_sync_rounds));
  if (first_moment_sync_rounds > 0 && (second_moment_sync_rounds == 0 || first_moment_sync_rounds % second_moment_sync_rounds != 0)) {
    return InvalidArgument("first_moment_sync_rounds " + std::to_string(first_moment_sync_rounds) +
                           " must be a multiple of second_moment_sync_rounds " + std::to_string(second_moment_sync_rounds) +
                           " (every round that averages the first moment averages the second: a region dividing "
                           "the job's mean first moment by its own second moment takes huge steps)");
  }
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
