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
// the bottleneck link, and (M - 1) round trips of latency). A layer is needed
// before its forward node of step t + 1 + tau (tau = overlap steps; the whole
// vector before the step, without `layerwise`); compute waits for it. CU is
// compute time over wall time, measured on a round in steady state.
#pragma once

#include <cstdint>
#include <string>

#include "longhaul/common/status.h"

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
  double rtt_seconds = 0;       // its round-trip time
};

struct PlanSchedule {
  PlanKind kind = PlanKind::kDiLoCo;
  uint32_t inner_steps = 100;   // H (data parallel: 1)
  uint32_t fragments = 1;       // P: layer l belongs to fragment (l - 1) % P (strided)
  uint32_t overlap_steps = 0;   // tau: a fragment sent after step s is needed by step s + 1 + tau
  double bits_per_value = 16;   // on the wire, scales included
  bool layerwise = true;        // exchanges leave (and are needed) layer by layer; false: the whole vector at once
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

// The least bandwidth (bits/s, within 0.1%) at which the round reaches
// `target_cu`; kFailedPrecondition when no bandwidth does (latency alone
// stalls more).
Result<double> BandwidthForCu(const ComputeProfile& compute, const WanProfile& wan, const PlanSchedule& schedule,
                              double target_cu);

const char* PlanKindName(PlanKind kind);

}  // namespace longhaul::sync_policies
