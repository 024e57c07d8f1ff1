// One directed WAN link as measured (the transport's passive estimates and
// probes, a worker's link report) or as assumed (the scheduler's fallback to a
// region's rate): the one link-estimate type of transport, worker, scheduler
// and ring order. Its wire form is v1::LinkSample (proto/wire_links.h).
#pragma once

#include <cstdint>

namespace longhaul::sync_policies {

struct LinkEstimate {
  double bytes_per_second = 0;  // goodput over all of the link's connections; 0 = unknown
  double rtt_seconds = 0;       // round-trip time; 0 = unknown
  uint64_t samples = 0;         // measurements behind it (counted by the transport's estimator; 0 where not counted)
  // bytes_per_second is a region's rate over whole exchanges (RoundReport bytes
  // / comm time), not the link's goodput: their latency is already in it.
  bool rate_includes_latency = false;

  bool has_rate() const { return bytes_per_second > 0; }
  bool has_rtt() const { return rtt_seconds > 0; }
  double bits_per_second() const { return bytes_per_second * 8; }
};

}  // namespace longhaul::sync_policies
