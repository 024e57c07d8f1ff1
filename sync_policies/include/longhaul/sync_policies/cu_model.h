// Compute-utilisation model: how long a round takes and what fraction of it
// computes, given the model, the per-step compute time, the WAN and a schedule
// (data parallel, DiLoCo, Streaming DiLoCo). Pure functions, no sockets.
//
// The model follows the simulator of Streaming DiLoCo (arXiv 2501.18512, §3.1;
// docs/planning.md): one inner step is a chain of 3L - 1 equal compute nodes
// (forward of layers 1..L, then backward for activations and for parameters of
// layers L..2, then parameters of layer 1). A layer's exchange leaves once its
// parameter-backward node is done, or, with `layerwise` off, the whole vector
// leaves at the step's end (longhaul's DiLoCo: the pseudo-gradient exists only
// after the round's last step). Exchanges share one link first in, first out;
// each is a ring all-reduce over the regions (2 (M - 1) / M of its bits cross
// the bottleneck link, and (M - 1) round trips of latency; given every link of
// the ring, its 2 (M - 1) hops instead take the longest path around it). A layer
// is needed before its forward node of step t + 1 + tau (tau = overlap steps; the
// whole vector before the step, without `layerwise`); compute waits for it.
// Without `layerwise` the model is longhaul's round: a round ends at an agreed
// theta, so whatever it sent must land before it ends (an overlap reaching past
// the round's last step is cut there). CU is compute time over wall time,
// measured on a round in steady state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/link_estimate.h"

namespace longhaul::sync_policies {

enum class PlanKind { kDataParallel, kDiLoCo, kStreamingDiLoCo };

struct ComputeProfile {
  double params = 0;        // N, values exchanged (the whole model)
  uint32_t layers = 1;      // L
  double step_seconds = 0;  // T: one inner step's compute in a region
};

struct WanProfile {
  uint32_t regions = 2;         // M
  double bandwidth_bps = 0;     // the ring's slowest link, bits per second
  double rtt_seconds = 0;       // its round-trip time (or the ring's largest)
  // Optional: the M links in ring order (link k from region k to k + 1). Each
  // of an exchange's 2 (M - 1) hops moves 1/M of it over every link; a region
  // sends a hop once it received the previous one and finished sending its own,
  // so slow links and long round trips anywhere on the ring are counted where
  // they delay the exchange, not all at the slowest link. With links given,
  // bandwidth_bps and rtt_seconds are not used.
  std::vector<LinkEstimate> ring;
};

struct PlanSchedule {
  PlanKind kind = PlanKind::kDiLoCo;
  uint32_t inner_steps = 100;   // H (data parallel: 1)
  uint32_t fragments = 1;       // P: layer l belongs to fragment (l - 1) % P (strided)
  uint32_t overlap_steps = 0;   // tau: a fragment sent after step s is needed by step s + 1 + tau
  double bits_per_value = 16;   // on the wire, scales included
  bool layerwise = true;        // exchanges leave (and are needed) layer by layer; false: the whole vector at
                                // once, drained by the round's end (longhaul)
  Status Validate() const;
};

struct CuEstimate {
  double compute_seconds = 0;   // H x T
  double stall_seconds = 0;     // compute waiting for the WAN, per round
  double round_seconds = 0;     // compute + stall
  double cu = 0;                // compute / round
  double wan_bytes_per_step = 0;  // sent by one region over its link, per inner step
};

// The steady-state round (the third simulated one).
Result<CuEstimate> PredictRound(const ComputeProfile& compute, const WanProfile& wan, const PlanSchedule& schedule);

// The least bandwidth (bits/s, within 0.1%) of every link, each at
// `wan.rtt_seconds`, at which the round reaches `target_cu`;
// kFailedPrecondition when no bandwidth does (latency alone stalls more).
Result<double> BandwidthForCu(const ComputeProfile& compute, const WanProfile& wan, const PlanSchedule& schedule,
                              double target_cu);

const char* PlanKindName(PlanKind kind);

}  // namespace longhaul::sync_policies
