#include "longhaul/orchestrator/scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "longhaul/sync_policies/cu_model.h"
#include "longhaul/sync_policies/ring_order.h"
#include "longhaul/wan_transport/endpoint.h"

namespace longhaul::orchestrator {

void LinkTable::SetLink(const std::string& from, const std::string& to, LinkEstimate e) {
  LinkEstimate& known = links_[{from, to}];
  if (!e.has_rate()) e.bytes_per_second = known.bytes_per_second;
  if (!e.has_rtt()) e.rtt_seconds = known.rtt_seconds;
  known = e;
}

LinkEstimate LinkTable::Get(const std::string& from, const std::string& to) const {
  auto it = links_.find({from, to});
  if (it != links_.end() && it->second.has_rate()) return it->second;
  LinkEstimate e;
  if (it != links_.end()) e.rtt_seconds = it->second.rtt_seconds;
  auto a = region_rate_.find(from), b = region_rate_.find(to);
  if (a != region_rate_.end() && b != region_rate_.end()) {
    e.bytes_per_second = std::min(a->second, b->second);
    e.rate_includes_latency = true;
  }
  return e;
}

std::map<std::string, LinkEstimate> LinkTable::MeasuredFrom(const std::string& region) const {
  std::map<std::string, LinkEstimate> out;
  for (auto it = links_.lower_bound({region, ""}); it != links_.end() && it->first.first == region; ++it)
    out[it->first.second] = it->second;
  return out;
}

sync_policies::PlanSchedule PlanScheduleOf(const RoundShape& shape, double bits_per_value) {
  using sync_policies::PlanKind;
  using sync_policies::SyncKind;
  const bool streaming = shape.kind == SyncKind::kStreamingDiLoCo;
  return {
      .kind = shape.kind == SyncKind::kSync ? PlanKind::kDataParallel
              : streaming                   ? PlanKind::kStreamingDiLoCo
                                            : PlanKind::kDiLoCo,
      .inner_steps = std::max(1u, shape.inner_steps),
      .fragments = streaming ? std::max(1u, shape.fragments) : 1,
      .overlap_steps = streaming ? shape.overlap_steps : 0,
      .bits_per_value = bits_per_value,
      .layerwise = false,  // longhaul exchanges whole vectors (fragments) after the step
  };
}

double PredictRoundCommSeconds(const RoundShape& shape, const sync_policies::WanProfile& wan) {
  if (wan.regions < 2 || shape.payload_bytes == 0 || shape.kind == sync_policies::SyncKind::kLocal) return 0;
  // One "value" per payload byte.
  const sync_policies::ComputeProfile compute{static_cast<double>(shape.payload_bytes), 1,
                                              std::max(shape.step_seconds, 1e-9)};
  auto e = sync_policies::PredictRound(compute, wan, PlanScheduleOf(shape, 8));
  if (!e.ok()) return 0;
  const uint32_t steps = std::max(1u, shape.inner_steps);
  const double behind = shape.fastest_step_seconds > 0 ? std::max(0.0, shape.step_seconds - shape.fastest_step_seconds) : 0;
  // The model's data-parallel round is one step; a sync job's round is H of them.
  return e->stall_seconds * (shape.kind == sync_policies::SyncKind::kSync ? steps : 1) + steps * behind;
}

uint32_t ConnectionsForLink(double bytes_per_second, double rtt_seconds, const ScheduleOptions& o) {
  if (o.bytes_in_flight_per_connection < 1) return 1;
  return static_cast<uint32_t>(wan_transport::ConnectionsForBdp(
      bytes_per_second, rtt_seconds, static_cast<size_t>(o.bytes_in_flight_per_connection),
      static_cast<int>(std::min<uint32_t>(o.max_connections_per_link, 1024)), /*unmeasured=*/1));
}

Result<RoundSchedule> PlanRound(const std::vector<std::string>& participants, const LinkTable& links,
                                const RoundShape& shape, const ScheduleOptions& o) {
  RoundSchedule s;
  const int m = static_cast<int>(participants.size());
  if (m == 0) return InvalidArgument("cannot schedule a round without participants");
  if (m == 1) {
    s.ring = participants;
    s.reason = "single participant; no WAN traffic";
    return s;
  }
  sync_policies::BandwidthMatrix matrix;
  matrix.bytes_per_second.assign(m, std::vector<double>(m, 0.0));
  bool any_known = false;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j)
      if (i != j) {
        // Rings come from measured links only: a region's exchange rate (the
        // prediction's fallback) says nothing about one direction, and under
        // overlap it is no rate at all.
        const LinkEstimate e = links.Get(participants[i], participants[j]);
        matrix.bytes_per_second[i][j] = e.rate_includes_latency ? 0 : e.bytes_per_second;
        any_known = any_known || matrix.bytes_per_second[i][j] > 0;
      }
  std::string ring_reason;
  if (any_known) {
    auto order = sync_policies::ChooseRingOrder(matrix);
    if (!order.ok()) return order.status().WithContext("choosing the ring order");
    for (int idx : order->order) {
      if (idx < 0 || idx >= m) return Internal("ring order names participant " + std::to_string(idx));
      s.ring.push_back(participants[idx]);
    }
    ring_reason = order->reason;
  } else {
    s.ring = participants;
    ring_reason = "no link measurements yet; ring in job order";
  }
  // Bottleneck and RTT along the chosen ring (link k: ring[k] -> ring[k + 1]).
  double bottleneck = 0, rtt = 0;
  bool all_known = true, all_rtts = true;
  uint32_t conns = 1;
  sync_policies::WanProfile wan{.regions = static_cast<uint32_t>(m)};
  for (int k = 0; k < m; ++k) {
    const LinkEstimate e = links.Get(s.ring[k], s.ring[(k + 1) % m]);
    if (!e.has_rate()) all_known = false;
    else bottleneck = bottleneck == 0 ? e.bytes_per_second : std::min(bottleneck, e.bytes_per_second);
    rtt = std::max(rtt, e.rtt_seconds);
    all_rtts = all_rtts && e.has_rtt();
    s.rate_includes_latency = s.rate_includes_latency || e.rate_includes_latency;
    wan.ring.push_back(e);
  }
  if (rtt <= 0) rtt = o.assumed_rtt_seconds;
  for (int k = 0; k < m; ++k) {
    const LinkEstimate e = links.Get(s.ring[k], s.ring[(k + 1) % m]);
    conns = std::max(conns, ConnectionsForLink(e.bytes_per_second, e.rtt_seconds > 0 ? e.rtt_seconds : rtt, o));
  }
  s.connections_per_link = conns;
  s.bottleneck_bytes_per_second = all_known ? bottleneck : 0;
  s.rtt_seconds = rtt;
  // Every link measured: the exchange's hops along them. A rate measured over
  // whole exchanges already holds their round trips; else the slowest link at
  // the largest (or assumed) RTT.
  if (all_known) {
    if (s.rate_includes_latency || !all_rtts) {
      wan.ring.clear();
      wan.bandwidth_bps = bottleneck * 8;
      wan.rtt_seconds = s.rate_includes_latency ? 0 : rtt;
    }
    s.predicted_comm_seconds = PredictRoundCommSeconds(shape, wan);
    s.wan = wan;
  }
  char buf[300];
  std::snprintf(buf, sizeof(buf), "; bottleneck %.2f MB/s%s, rtt %.0f ms, %u connection(s) per link, predicted %.3f s",
                s.bottleneck_bytes_per_second / 1e6,
                s.rate_includes_latency ? " (a region's rate over whole exchanges: latency included)" : "", rtt * 1e3,
                conns, s.predicted_comm_seconds);
  s.reason = ring_reason + buf;
  return s;
}

}  // namespace longhaul::orchestrator
