#include "longhaul/common/timeouts.h"

namespace longhaul {

namespace {
std::string Ms(Duration d) { return std::to_string(d.count()) + "ms"; }
}  // namespace

Status Timeouts::Validate() const {
  if (link_io.count() <= 0) return InvalidArgument("timeouts.link_io must be > 0, got " + Ms(link_io));
  if (heartbeat_interval.count() <= 0)
    return InvalidArgument("timeouts.heartbeat_interval must be > 0, got " + Ms(heartbeat_interval));
  if (heartbeat_misses < 1)
    return InvalidArgument("timeouts.heartbeat_misses must be >= 1, got " + std::to_string(heartbeat_misses));
  if (!(link_io < collective))
    return InvalidArgument("timeouts: link_io (" + Ms(link_io) + ") must be < collective (" + Ms(collective) + ")");
  if (!(heartbeat_miss() < round))
    return InvalidArgument("timeouts: heartbeat_miss (" + Ms(heartbeat_miss()) + ") must be < round (" +
                           Ms(round) + ")");
  if (!(collective < round))
    return InvalidArgument("timeouts: collective (" + Ms(collective) + ") must be < round (" + Ms(round) + ")");
  if (!(round < job_idle))
    return InvalidArgument("timeouts: round (" + Ms(round) + ") must be < job_idle (" + Ms(job_idle) + ")");
  return Status::Ok();
}

}  // namespace longhaul
