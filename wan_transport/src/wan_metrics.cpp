#include "wan_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

namespace longhaul::wan_transport {

WanMetrics::WanMetrics(prometheus::Registry* r) {
  if (r == nullptr) return;
  try {
    bytes_sent_ = &prometheus::BuildCounter().Name("longhaul_wan_bytes_sent_total")
                      .Help("Payload bytes sent over the WAN data plane, per peer").Register(*r);
    bandwidth_ = &prometheus::BuildGauge().Name("longhaul_wan_link_bandwidth_bytes_per_second")
                      .Help("Estimated bandwidth to a peer (probe or passive)").Register(*r);
    rtt_ = &prometheus::BuildGauge().Name("longhaul_wan_rtt_seconds")
                .Help("Estimated round-trip time to a peer").Register(*r);
    dropped_ = &prometheus::BuildCounter().Name("longhaul_wan_frames_dropped_total")
                    .Help("Data-plane frames dropped, by reason").Register(*r);
    connections_ = &prometheus::BuildGauge().Name("longhaul_wan_connections")
                        .Help("Parallel data-plane connections open to a peer").Register(*r);
    duration_ = &prometheus::BuildHistogram().Name("longhaul_wan_transfer_duration_seconds")
                     .Help("Send-to-ack time of one WAN transfer").Register(*r)
                     .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 100});
  } catch (const std::exception& e) {
    spdlog::error("wan metrics disabled: {}", e.what());
    bytes_sent_ = nullptr;
    bandwidth_ = rtt_ = nullptr;
    dropped_ = nullptr;
    connections_ = nullptr;
    duration_ = nullptr;
  }
}

void WanMetrics::BytesSent(const std::string& peer, double bytes) {
  if (bytes_sent_ == nullptr) return;
  std::lock_guard lock(mu_);
  bytes_sent_->Add({{"peer", peer}}).Increment(bytes);
}

void WanMetrics::Link(const std::string& peer, double bw, double rtt) {
  if (bandwidth_ == nullptr) return;
  std::lock_guard lock(mu_);
  if (bw > 0) bandwidth_->Add({{"peer", peer}}).Set(bw);
  if (rtt > 0) rtt_->Add({{"peer", peer}}).Set(rtt);
}

void WanMetrics::TransferDone(double seconds) {
  if (duration_ == nullptr) return;
  std::lock_guard lock(mu_);
  duration_->Observe(seconds);
}

void WanMetrics::FrameDropped(const std::string& reason) {
  if (dropped_ == nullptr) return;
  std::lock_guard lock(mu_);
  dropped_->Add({{"reason", reason}}).Increment();
}

void WanMetrics::Connections(const std::string& peer, size_t open) {
  if (connections_ == nullptr) return;
  std::lock_guard lock(mu_);
  connections_->Add({{"peer", peer}}).Set(static_cast<double>(open));
}

}  // namespace longhaul::wan_transport
