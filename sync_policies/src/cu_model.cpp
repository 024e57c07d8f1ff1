#include "longhaul/sync_policies/cu_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace longhaul::sync_policies {
namespace {

// One exchange: released `release` seconds after its step starts, needed
// `need` seconds after the start of the step that waits for it; it holds the
// slowest link for `bits` and lands `latency` seconds after leaving it.
struct Message {
  double bits = 0;
  double release = 0;
  double need = 0;
  double latency = 0;
};

// The ring's links: the given ones, or M copies of the slowest link at the worst RTT.
std::vector<LinkEstimate> RingOf(const WanProfile& w) {
  if (!w.ring.empty()) return w.ring;
  return std::vector<LinkEstimate>(w.regions, LinkEstimate{w.bandwidth_bps / 8, w.rtt_seconds});
}

double SlowestBandwidth(const std::vector<LinkEstimate>& ring) {
  double b = ring.front().bits_per_second();
  for (const LinkEstimate& l : ring) b = std::min(b, l.bits_per_second());
  return b;
}

// Seconds from an exchange of `bits` (crossing each link) leaving to its
// landing everywhere. Each of its 2 (M - 1) hops moves bits / (2 (M - 1)) over
// every link; link k (region k -> k + 1) sends hop h once region k received hop
// h - 1 over link k - 1 and once it finished sending hop h - 1 itself, and the
// bytes land half a round trip after they leave.
double ExchangeSeconds(const std::vector<LinkEstimate>& ring, double bits) {
  const size_t m = ring.size(), hops = 2 * (m - 1);
  const double hop_bits = bits / static_cast<double>(hops);
  std::vector<double> sent(m, 0.0), landed(m, 0.0);  // per link, for the previous hop
  for (size_t h = 0; h < hops; ++h) {
    std::vector<double> next_sent(m), next_landed(m);
    for (size_t k = 0; k < m; ++k) {
      const double ready = h == 0 ? 0.0 : std::max(landed[(k + m - 1) % m], sent[k]);
      next_sent[k] = ready + hop_bits / ring[k].bits_per_second();
      next_landed[k] = next_sent[k] + ring[k].rtt_seconds / 2;
    }
    sent = std::move(next_sent);
    landed = std::move(next_landed);
  }
  return *std::max_element(landed.begin(), landed.end());
}

struct Fragment {
  uint32_t send_step = 1;          // sent after this step of the round (1..H)
  std::vector<Message> messages;   // in release order
};

uint32_t StepsPerRound(const PlanSchedule& s) { return s.kind == PlanKind::kDataParallel ? 1 : s.inner_steps; }
uint32_t FragmentsOf(const PlanSchedule& s) { return s.kind == PlanKind::kStreamingDiLoCo ? s.fragments : 1; }

std::vector<Fragment> Fragments(const ComputeProfile& c, const WanProfile& w, const PlanSchedule& s) {
  const uint32_t L = c.layers, H = StepsPerRound(s), P = FragmentsOf(s);
  const double T = c.step_seconds;
  const double u = T / (3.0 * L - 1.0);  // one compute node
  const double ring = 2.0 * (w.regions - 1) / w.regions;
  const std::vector<LinkEstimate> links = RingOf(w);
  const double slowest = SlowestBandwidth(links);
  auto message = [&](double values, double release, double need) {
    const double bits = s.bits_per_value * values * ring;
    return Message{bits, release, need, std::max(0.0, ExchangeSeconds(links, bits) - bits / slowest)};
  };
  std::vector<Fragment> out(P);
  for (uint32_t p = 0; p < P; ++p) {
    out[p].send_step = std::max<uint32_t>(1, static_cast<uint32_t>(uint64_t{p + 1} * H / P));
    if (!s.layerwise) {
      out[p].messages.push_back(message(c.params / P, T, 0.0));
      continue;
    }
    // Layers p+1, p+1+P, ... released from the top down (backward order).
    for (int64_t l = L - (L - 1 - p) % P; l >= 1; l -= P) {
      const double release = l == 1 ? T : u * (3.0 * L + 2.0 - 2.0 * l);
      out[p].messages.push_back(message(c.params / L, release, (l - 1) * u));
    }
  }
  return out;
}

}  // namespace

const char* PlanKindName(PlanKind kind) {
  switch (kind) {
    case PlanKind::kDataParallel: return "data-parallel";
    case PlanKind::kDiLoCo: return "diloco";
    case PlanKind::kStreamingDiLoCo: return "streaming_diloco";
  }
  return "?";
}

Status PlanSchedule::Validate() const {
  if (kind != PlanKind::kDataParallel && inner_steps == 0) return InvalidArgument("inner_steps must be >= 1");
  if (kind == PlanKind::kStreamingDiLoCo) {
    if (fragments == 0 || fragments > inner_steps)
      return InvalidArgument("fragments must be in 1..inner_steps, got " + std::to_string(fragments));
    if (overlap_steps >= inner_steps)
      return InvalidArgument("overlap_steps must be < inner_steps, got " + std::to_string(overlap_steps));
  } else if (overlap_steps != 0) {
    return InvalidArgument(std::string("overlap_steps must be 0 for ") + PlanKindName(kind));
  }
  if (!(bits_per_value > 0 && bits_per_value <= 64))
    return InvalidArgument("bits_per_value must be in (0, 64], got " + std::to_string(bits_per_value));
  return Status::Ok();
}

Result<CuEstimate> PredictRound(const ComputeProfile& c, const WanProfile& w, const PlanSchedule& s) {
  LONGHAUL_RETURN_IF_ERROR(s.Validate());
  if (!(c.params >= 1) || !std::isfinite(c.params)) return InvalidArgument("params must be >= 1");
  if (c.layers == 0) return InvalidArgument("layers must be >= 1");
  if (!(c.step_seconds > 0) || !std::isfinite(c.step_seconds)) return InvalidArgument("step time must be > 0 seconds");
  if (w.regions < 2) return InvalidArgument("a WAN plan needs at least 2 regions, got " + std::to_string(w.regions));
  if (!w.ring.empty() && w.ring.size() != w.regions) {
    return InvalidArgument("a ring of " + std::to_string(w.regions) + " regions has " + std::to_string(w.regions) +
                           " links, got " + std::to_string(w.ring.size()));
  }
  for (const LinkEstimate& l : RingOf(w)) {
    if (!(l.bytes_per_second > 0) || !std::isfinite(l.bytes_per_second)) return InvalidArgument("bandwidth must be > 0");
    if (!(l.rtt_seconds >= 0) || !std::isfinite(l.rtt_seconds)) return InvalidArgument("RTT must be >= 0");
  }
  if (s.layerwise && s.kind == PlanKind::kStreamingDiLoCo && s.fragments > c.layers) {
    return InvalidArgument("layer-wise Streaming DiLoCo needs at least one layer per fragment: " +
                           std::to_string(s.fragments) + " fragments, " + std::to_string(c.layers) + " layers");
  }
  const std::vector<Fragment> fragments = Fragments(c, w, s);
  const uint32_t H = StepsPerRound(s);
  const double T = c.step_seconds;
  const double slowest = SlowestBandwidth(RingOf(w));

  // Three rounds; exchanges in flight at a round's end stall the next one, so
  // the third is in steady state.
  std::multimap<uint64_t, std::pair<double, double>> due;  // global step -> (need offset, arrival)
  double now = 0, link_free = 0;
  CuEstimate e;
  for (uint32_t round = 0; round < 3; ++round) {
    const double round_start = now;
    double stall = 0;
    for (uint32_t step = 1; step <= H; ++step) {
      const uint64_t g = uint64_t{round} * H + step;
      double late = 0;
      auto [first, last] = due.equal_range(g);
      for (auto it = first; it != last; ++it) late = std::max(late, it->second.second - (now + it->second.first));
      due.erase(first, last);
      now += late;
      stall += late;
      for (const Fragment& f : fragments) {
        if (f.send_step != step) continue;
        // longhaul's round ends at an agreed theta: nothing it sent lands later.
        const uint64_t needed = s.layerwise ? g + 1 + s.overlap_steps
                                            : std::min<uint64_t>(g + 1 + s.overlap_steps, uint64_t{round + 1} * H + 1);
        for (const Message& m : f.messages) {
          link_free = std::max(link_free, now + m.release) + m.bits / slowest;
          due.emplace(needed, std::pair{m.need, link_free + m.latency});
        }
      }
      now += T;
    }
    e.stall_seconds = stall;
    e.round_seconds = now - round_start;
  }
  e.compute_seconds = H * T;
  e.cu = e.compute_seconds / e.round_seconds;
  e.wan_bytes_per_step = s.bits_per_value * c.params * 2.0 * (w.regions - 1) / w.regions / 8.0 / H;
  return e;
}

Result<double> BandwidthForCu(const ComputeProfile& c, const WanProfile& w, const PlanSchedule& s, double target_cu) {
  if (!(target_cu > 0 && target_cu <= 1)) return InvalidArgument("target CU must be in (0, 1]");
  auto cu_at = [&](double bps) -> Result<double> {
    WanProfile at = w;
    at.bandwidth_bps = bps;
    at.ring.clear();
    LONGHAUL_ASSIGN_OR_RETURN(CuEstimate e, PredictRound(c, at, s));
    return e.cu;
  };
  double lo = 1.0, hi = 1e18;  // bits per second
  LONGHAUL_ASSIGN_OR_RETURN(double best, cu_at(hi));
  if (best < target_cu) {
    return FailedPrecondition("CU " + std::to_string(target_cu) + " is out of reach: even unlimited bandwidth gives " +
                      std::to_string(best) + " (latency stalls the round)");
  }
  LONGHAUL_ASSIGN_OR_RETURN(double worst, cu_at(lo));
  if (worst >= target_cu) return lo;
  while (hi / lo > 1.001) {
    const double mid = std::sqrt(lo * hi);
    LONGHAUL_ASSIGN_OR_RETURN(double cu, cu_at(mid));
    (cu >= target_cu ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace longhaul::sync_policies
