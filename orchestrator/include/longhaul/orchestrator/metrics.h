// OrchestratorMetrics: every Prometheus series the orchestrator exports.
//
// Created on a prometheus::Registry (the MetricsServer's, or a bare one in
// tests). Names follow DESIGN.md: prefix longhaul_, base units in the name,
// counters end in _total, labels job / region / codec.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <string>
#include <cstdint>
#include <string_view>

#include "longhaul/v1/control.pb.h"

namespace longhaul::orchestrator {

class OrchestratorMetrics {
 public:
  explicit OrchestratorMetrics(prometheus::Registry& registry);

  void SetJobsByState(const std::map<std::string, int>& counts);
  void SetRegions(int up, int down);
  void RoundCommitted(const std::string& job, double duration_s, double predicted_comm_s, double actual_comm_s);
  void RoundAborted(const std::string& job, const std::string& reason_kind);
  void RegionReport(const std::string& job, const std::string& region, double loss, double val_loss,
                    double tokens_per_second);
  void WanBytes(const std::string& job, const std::string& codec, double bytes);
  // The collectives a region's workers run among themselves for `job`: 1 for
  // `backend` (NCCL or GLOO), 0 for the other; nothing while it is unset.
  void IntraRegionBackend(const std::string& job, const std::string& region, v1::IntraRegion backend);
  void MessageRejected(const std::string& why);
  // `operation` is one of a fixed set of phrases ("starting a round"): a bounded label.
  void StateWriteFailed(std::string_view operation);
  void StalledFor(const std::string& job, double seconds);
  // A region's measured WAN link towards a peer region (from its LinkReport).
  void LinkMeasured(const std::string& region, const std::string& peer, double bytes_per_second, double rtt_seconds);
  // The plan a round of `job` starts with (sync.adaptive): its inner steps, its
  // predicted CU (0 = not predictable yet), and whether re-planning changed it.
  void RoundPlanned(const std::string& job, uint32_t inner_steps, double predicted_cu, bool replanned);

 private:
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& regions_;
  prometheus::Family<prometheus::Counter>& committed_;
  prometheus::Family<prometheus::Counter>& aborted_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Family<prometheus::Gauge>& val_loss_;
  prometheus::Family<prometheus::Gauge>& tokens_;
  prometheus::Family<prometheus::Counter>& wan_bytes_;
  prometheus::Family<prometheus::Gauge>& predicted_;
  prometheus::Family<prometheus::Gauge>& actual_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Family<prometheus::Gauge>& stall_;
  prometheus::Family<prometheus::Gauge>& link_bandwidth_;
  prometheus::Family<prometheus::Gauge>& link_rtt_;
  prometheus::Family<prometheus::Counter>& write_failures_;
  prometheus::Family<prometheus::Counter>& replans_;
  prometheus::Family<prometheus::Gauge>& plan_inner_steps_;
  prometheus::Family<prometheus::Gauge>& plan_cu_;
  prometheus::Family<prometheus::Gauge>& intra_region_;
};

}  // namespace longhaul::orchestrator
