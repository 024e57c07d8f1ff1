// Between a link estimate (sync_policies/link_estimate.h) and its wire form,
// v1::LinkSample (a worker's LinkReport, RegionInfo.links): the one conversion.
#pragma once

#include <string>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/link_estimate.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::proto {

v1::LinkSample LinkToWire(const std::string& peer_region, const sync_policies::LinkEstimate& e);
// kInvalidArgument naming the peer for a negative or NaN rate or round trip.
Result<sync_policies::LinkEstimate> LinkFromWire(const v1::LinkSample& sample);

}  // namespace longhaul::proto
