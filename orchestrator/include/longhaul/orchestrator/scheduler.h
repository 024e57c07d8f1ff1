// Bandwidth-aware round scheduling, first version.
//
// From the measured link matrix (LinkReport samples from agents; failing that,
// each region's observed rate from its last RoundReport) it picks
//   - the ring order (sync_policies::ChooseRingOrder: widest bottleneck),
//   - connections per link, enough to keep the bandwidth-delay product in
//     flight (wan_transport::ConnectionsForBdp, the one BDP formula),
//   - the predicted communication time of the round: how long its compute
//     waits for the WAN, from sync_policies' CU model (cu_model.h: each ring
//     all-reduce of S bytes over M regions moves 2(M-1)/M * S over the
//     bottleneck, its 2(M-1) hops along the ring's measured links; kind sync
//     does one per inner step, diloco one per round, streaming_diloco one per
//     fragment, hidden by tau steps of compute within the round),
// and says why in a human-readable reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/cu_model.h"
#include "longhaul/sync_policies/link_estimate.h"
#include "longhaul/sync_policies/sync_kind.h"

namespace longhaul::orchestrator {

using sync_policies::LinkEstimate;

// Latest estimate per directed link, plus per-region rates as a fallback (a
// job's own: the orchestrator adds them to a copy for that job's rounds).
class LinkTable {
 public:
  // A measurement without a bandwidth or a round trip (a new worker measured
  // only one of them yet) keeps the link's last measured one.
  void SetLink(const std::string& from, const std::string& to, LinkEstimate e);
  void SetRegionRate(const std::string& region, double bytes_per_second) { region_rate_[region] = bytes_per_second; }
  // Direct measurement if any, else the slower of the two regions' rates.
  LinkEstimate Get(const std::string& from, const std::string& to) const;
  // The links measured from `region`, by peer.
  std::map<std::string, LinkEstimate> MeasuredFrom(const std::string& region) const;

 private:
  std::map<std::pair<std::string, std::string>, LinkEstimate> links_;
  std::map<std::string, double> region_rate_;
};

struct ScheduleOptions {
  uint32_t max_connections_per_link = 8;
  // What one ZeroMQ connection keeps in flight (send HWM x chunk size).
  double bytes_in_flight_per_connection = 4.0 * 1024 * 1024;
  double assumed_rtt_seconds = 0.05;  // used when no link reports an RTT
};

struct RoundSchedule {
  std::vector<std::string> ring;  // participants in ring order
  uint32_t connections_per_link = 1;
  double bottleneck_bytes_per_second = 0;  // 0 = unknown
  double rtt_seconds = 0;                  // largest RTT on the ring
  bool rate_includes_latency = false;      // some ring link's rate is a region's exchange rate
  double predicted_comm_seconds = 0;       // 0 = not predictable yet
  // The WAN the prediction used: set once every ring link has an estimate.
  std::optional<sync_policies::WanProfile> wan;
  std::string reason;
};

// What a round exchanges and how long its compute takes.
struct RoundShape {
  uint64_t payload_bytes = 0;  // one region's compressed exchange of the whole vector (0 = unknown)
  sync_policies::SyncKind kind = sync_policies::SyncKind::kDiLoCo;
  uint32_t inner_steps = 1;
  uint32_t fragments = 1, overlap_steps = 0;  // streaming_diloco
  double step_seconds = 0;     // measured compute per inner step of the slowest participant (0 = unknown)
  double fastest_step_seconds = 0;  // of the fastest (0 = all alike): it waits for the slowest in the exchanges
};

// The CU model's schedule for a round of this shape (kind local: as diloco,
// though it exchanges nothing), whole vectors at the step's end.
sync_policies::PlanSchedule PlanScheduleOf(const RoundShape& shape, double bits_per_value);

// The longest any participant waits in the round's exchanges (0 when a region
// is alone or nothing is known, and for kind local): the WAN's stall of the
// slowest region's schedule, plus, for the fastest, the H x (slowest - fastest
// step) it spends waiting for the slowest to reach each exchange (all its steps
// end at the round's end, whatever the overlap).
double PredictRoundCommSeconds(const RoundShape& shape, const sync_policies::WanProfile& wan);
uint32_t ConnectionsForLink(double bytes_per_second, double rtt_seconds, const ScheduleOptions& options);

Result<RoundSchedule> PlanRound(const std::vector<std::string>& participants, const LinkTable& links,
                                const RoundShape& shape, const ScheduleOptions& options = {});

}  // namespace longhaul::orchestrator
