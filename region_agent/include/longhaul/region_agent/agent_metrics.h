// The agent's /metrics: region up, workers running, rounds done, last losses,
// throughput and WAN bytes, labelled by region (and job where it applies).
#pragma once

#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "longhaul/v1/control.pb.h"

namespace longhaul::region_agent {

class AgentMetrics {
 public:
  AgentMetrics(prometheus::Registry& registry, const std::string& region);

  void SetUp(bool up) { up_.Set(up ? 1 : 0); }
  void SetWorkersRunning(int n) { workers_running_.Set(n); }
  void OnWorkerCrash() { worker_crashes_.Increment(); }
  void OnJobRejected() { jobs_rejected_.Increment(); }
  // A region report sent to the orchestrator.
  void OnRoundReport(const v1::RoundReport& report);

 private:
  prometheus::Registry& registry_;
  std::string region_;
  prometheus::Family<prometheus::Gauge>& gauge_loss_;
  prometheus::Family<prometheus::Gauge>& gauge_val_loss_;
  prometheus::Family<prometheus::Gauge>& gauge_tokens_per_second_;
  prometheus::Family<prometheus::Counter>& rounds_;
  prometheus::Family<prometheus::Counter>& rounds_failed_;
  prometheus::Family<prometheus::Counter>& wan_bytes_;
  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Gauge& up_;
  prometheus::Gauge& workers_running_;
  prometheus::Counter& worker_crashes_;
  prometheus::Counter& jobs_rejected_;
};

}  // namespace longhaul::region_agent
