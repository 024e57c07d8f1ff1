#include "longhaul/proto/wire_links.h"

namespace longhaul::proto {

v1::LinkSample LinkToWire(const std::string& peer_region, const sync_policies::LinkEstimate& e) {
  v1::LinkSample s;
  s.set_peer(peer_region);
  s.set_bytes_per_second(e.bytes_per_second);
  s.set_rtt_seconds(e.rtt_seconds);
  return s;
}

Result<sync_policies::LinkEstimate> LinkFromWire(const v1::LinkSample& sample) {
  // Written to be false for NaN as well as for negative values.
  if (!(sample.bytes_per_second() >= 0) || !(sample.rtt_seconds() >= 0)) {
    return InvalidArgument("link to '" + sample.peer() + "': negative or NaN measurement");
  }
  return sync_policies::LinkEstimate{sample.bytes_per_second(), sample.rtt_seconds()};
}

}  // namespace longhaul::proto
