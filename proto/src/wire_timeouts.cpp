#include "longhaul/proto/wire_timeouts.h"

namespace longhaul::proto {

v1::Timeouts TimeoutsToWire(const Timeouts& t) {
  v1::Timeouts w;
  w.set_link_io_ms(static_cast<uint32_t>(t.link_io.count()));
  w.set_collective_ms(static_cast<uint32_t>(t.collective.count()));
  w.set_heartbeat_interval_ms(static_cast<uint32_t>(t.heartbeat_interval.count()));
  w.set_heartbeat_misses(static_cast<uint32_t>(t.heartbeat_misses));
  w.set_round_ms(static_cast<uint32_t>(t.round.count()));
  w.set_job_idle_ms(static_cast<uint64_t>(t.job_idle.count()));
  return w;
}

Result<Timeouts> TimeoutsFromWire(const v1::Timeouts& w, const std::string& what) {
  Timeouts t;
  t.link_io = Duration(w.link_io_ms());
  t.collective = Duration(w.collective_ms());
  t.heartbeat_interval = Duration(w.heartbeat_interval_ms());
  t.heartbeat_misses = static_cast<int>(std::min<uint32_t>(w.heartbeat_misses(), 1000000));
  t.round = Duration(w.round_ms());
  t.job_idle = Duration(static_cast<Duration::rep>(std::min<uint64_t>(w.job_idle_ms(), uint64_t{1} << 40)));
  if (Status s = t.Validate(); !s.ok()) return InvalidArgument(what + ": " + s.message());
  return t;
}

}  // namespace longhaul::proto
