#include "longhaul/region_agent/agent_metrics.h"

namespace longhaul::region_agent {

AgentMetrics::AgentMetrics(prometheus::Registry& registry, const std::string& region)
    : registry_(registry),
      region_(region),
      gauge_loss_(prometheus::BuildGauge().Name("longhaul_region_train_loss").Help("Mean training loss of the last round (nats/byte)").Register(registry)),
      gauge_val_loss_(prometheus::BuildGauge().Name("longhaul_region_val_loss").Help("Validation loss of theta(t) after the last round (nats/byte)").Register(registry)),
      gauge_tokens_per_second_(prometheus::BuildGauge().Name("longhaul_region_tokens_per_second").Help("Training tokens per second of the last round, all workers").Register(registry)),
      rounds_(prometheus::BuildCounter().Name("longhaul_region_rounds_total").Help("Rounds this region finished and reported ok").Register(registry)),
      rounds_failed_(prometheus::BuildCounter().Name("longhaul_region_rounds_failed_total").Help("Rounds this region reported as failed").Register(registry)),
      wan_bytes_(prometheus::BuildCounter().Name("longhaul_region_wan_sent_bytes_total").Help("Payload bytes this region's workers sent over the WAN").Register(registry)),
      tokens_(prometheus::BuildCounter().Name("longhaul_region_tokens_total").Help("Training tokens (bytes) processed").Register(registry)),
      up_(prometheus::BuildGauge().Name("longhaul_region_up").Help("1 while the agent runs and is registered").Register(registry).Add({{"region", region}})),
      workers_running_(prometheus::BuildGauge().Name("longhaul_region_workers_running").Help("Worker processes alive").Register(registry).Add({{"region", region}})),
      worker_crashes_(prometheus::BuildCounter().Name("longhaul_region_worker_crashes_total").Help("Workers that exited unexpectedly").Register(registry).Add({{"region", region}})),
      jobs_rejected_(prometheus::BuildCounter().Name("longhaul_region_jobs_rejected_total").Help("Assignments this region refused").Register(registry).Add({{"region", region}})) {}

void AgentMetrics::OnRoundReport(const v1::RoundReport& r) {
  const prometheus::Labels labels{{"region", region_}, {"job", r.job_id()}};
  if (!r.ok()) {
    rounds_failed_.Add(labels).Increment();
    return;
  }
  rounds_.Add(labels).Increment();
  gauge_loss_.Add(labels).Set(r.loss());
  gauge_val_loss_.Add(labels).Set(r.val_loss());
  if (r.wall_seconds() > 0) gauge_tokens_per_second_.Add(labels).Set(static_cast<double>(r.tokens()) / r.wall_seconds());
  wan_bytes_.Add(labels).Increment(static_cast<double>(r.wan_bytes_sent()));
  tokens_.Add(labels).Increment(static_cast<double>(r.tokens()));
}

}  // namespace longhaul::region_agent
