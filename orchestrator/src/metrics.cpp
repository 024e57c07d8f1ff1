#include "longhaul/orchestrator/metrics.h"

#include "longhaul/orchestrator/job_state.h"
#include "longhaul/proto/wire_enums.h"

namespace longhaul::orchestrator {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

OrchestratorMetrics::OrchestratorMetrics(prometheus::Registry& r)
    : jobs_(BuildGauge().Name("longhaul_jobs").Help("Jobs by lifecycle state").Register(r)),
      regions_(BuildGauge().Name("longhaul_regions").Help("Registered regions by state (up/down)").Register(r)),
      committed_(BuildCounter()
                     .Name("longhaul_rounds_committed_total")
                     .Help("Rounds committed (all participants agreed on the parameter hash)")
                     .Register(r)),
      aborted_(BuildCounter()
                   .Name("longhaul_rounds_aborted_total")
                   .Help("Round attempts aborted, by reason kind")
                   .Register(r)),
      duration_(BuildHistogram()
                    .Name("longhaul_round_duration_seconds")
                    .Help("Wall time from round start to commit")
                    .Register(r)),
      loss_(BuildGauge().Name("longhaul_region_loss").Help("Last training loss reported per region").Register(r)),
      val_loss_(BuildGauge()
                    .Name("longhaul_region_validation_loss")
                    .Help("Last validation loss reported per region")
                    .Register(r)),
      tokens_(BuildGauge().Name("longhaul_tokens_per_second").Help("Training throughput per region").Register(r)),
      wan_bytes_(BuildCounter()
                     .Name("longhaul_wan_bytes_total")
                     .Help("Bytes sent over the WAN as reported by regions, by codec")
                     .Register(r)),
      predicted_(BuildGauge()
                     .Name("longhaul_round_comm_predicted_seconds")
                     .Help("Scheduler's predicted communication time of the last committed round")
                     .Register(r)),
      actual_(BuildGauge()
                  .Name("longhaul_round_comm_actual_seconds")
                  .Help("Measured communication time (slowest region) of the last committed round")
                  .Register(r)),
      rejected_(BuildCounter()
                    .Name("longhaul_control_messages_rejected_total")
                    .Help("Control messages dropped: malformed, stale epoch, wrong job, unknown sender")
                    .Register(r)),
      stall_(BuildGauge()
                 .Name("longhaul_round_stall_seconds")
                 .Help("How long the current round has waited for its slowest participant")
                 .Register(r)),
      link_bandwidth_(BuildGauge()
                          .Name("longhaul_link_bandwidth_bytes_per_second")
                          .Help("Measured WAN goodput from region to peer region, as the scheduler sees it")
                          .Register(r)),
      link_rtt_(BuildGauge()
                    .Name("longhaul_link_rtt_seconds")
                    .Help("Measured WAN round-trip time from region to peer region, as the scheduler sees it")
                    .Register(r)),
      write_failures_(BuildCounter()
                          .Name("longhaul_state_write_failures_total")
                          .Help("State file writes that failed, by the operation they were part of")
                          .Register(r)),
      replans_(BuildCounter()
                   .Name("longhaul_job_replans_total")
                   .Help("Rounds whose plan (inner steps, codec) re-planning changed (sync.adaptive)")
                   .Register(r)),
      plan_inner_steps_(BuildGauge()
                            .Name("longhaul_job_round_inner_steps")
                            .Help("Inner steps (H) of the job's current round plan")
                            .Register(r)),
      plan_cu_(BuildGauge()
                   .Name("longhaul_job_predicted_utilisation")
                   .Help("Compute utilisation the CU model predicts for the job's current round plan (0 = unknown)")
                   .Register(r)),
      intra_region_(BuildGauge()
                        .Name("longhaul_region_intra_region_backend")
                        .Help("1 for the collectives (backend nccl or gloo) a region's workers run among themselves")
                        .Register(r)) {}

void OrchestratorMetrics::SetJobsByState(const std::map<std::string, int>& counts) {
  for (const auto& info : kJobStates) {
    const std::string s(info.name);
    auto it = counts.find(s);
    jobs_.Add({{"state", s}}).Set(it == counts.end() ? 0 : it->second);
  }
}

void OrchestratorMetrics::StateWriteFailed(std::string_view operation) {
  write_failures_.Add({{"operation", std::string(operation)}}).Increment();
}

void OrchestratorMetrics::SetRegions(int up, int down) {
  regions_.Add({{"state", "up"}}).Set(up);
  regions_.Add({{"state", "down"}}).Set(down);
}

void OrchestratorMetrics::RoundCommitted(const std::string& job, double duration_s, double predicted, double actual) {
  committed_.Add({{"job", job}}).Increment();
  static const prometheus::Histogram::BucketBoundaries kBuckets = {0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600};
  duration_.Add({{"job", job}}, kBuckets).Observe(duration_s);
  predicted_.Add({{"job", job}}).Set(predicted);
  actual_.Add({{"job", job}}).Set(actual);
}

void OrchestratorMetrics::RoundAborted(const std::string& job, const std::string& kind) {
  aborted_.Add({{"job", job}, {"reason", kind}}).Increment();
}

void OrchestratorMetrics::RegionReport(const std::string& job, const std::string& region, double loss,
                                       double val_loss, double tps) {
  loss_.Add({{"job", job}, {"region", region}}).Set(loss);
  val_loss_.Add({{"job", job}, {"region", region}}).Set(val_loss);
  tokens_.Add({{"job", job}, {"region", region}}).Set(tps);
}

void OrchestratorMetrics::IntraRegionBackend(const std::string& job, const std::string& region,
                                             v1::IntraRegion backend) {
  if (backend == v1::INTRA_REGION_UNSPECIFIED) return;
  for (v1::IntraRegion known : {v1::INTRA_REGION_NCCL, v1::INTRA_REGION_GLOO}) {
    intra_region_.Add({{"job", job}, {"region", region}, {"backend", std::string(proto::IntraRegionName(known))}})
        .Set(known == backend ? 1 : 0);
  }
}

void OrchestratorMetrics::WanBytes(const std::string& job, const std::string& codec, double bytes) {
  if (bytes > 0) wan_bytes_.Add({{"job", job}, {"codec", codec}}).Increment(bytes);
}

void OrchestratorMetrics::MessageRejected(const std::string& why) { rejected_.Add({{"reason", why}}).Increment(); }

void OrchestratorMetrics::LinkMeasured(const std::string& region, const std::string& peer, double bytes_per_second,
                                       double rtt_seconds) {
  if (bytes_per_second > 0) link_bandwidth_.Add({{"region", region}, {"peer", peer}}).Set(bytes_per_second);
  if (rtt_seconds > 0) link_rtt_.Add({{"region", region}, {"peer", peer}}).Set(rtt_seconds);
}

void OrchestratorMetrics::RoundPlanned(const std::string& job, uint32_t inner_steps, double predicted_cu,
                                       bool replanned) {
  auto& replans = replans_.Add({{"job", job}});  // present (at 0) from the first round
  if (replanned) replans.Increment();
  plan_inner_steps_.Add({{"job", job}}).Set(inner_steps);
  plan_cu_.Add({{"job", job}}).Set(predicted_cu);
}

void OrchestratorMetrics::StalledFor(const std::string& job, double seconds) { stall_.Add({{"job", job}}).Set(seconds); }

}  // namespace longhaul::orchestrator
