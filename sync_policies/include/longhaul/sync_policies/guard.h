// Guard rail against poisoned pseudo-gradients: one with NaN/Inf, or with a norm
// far above the recent range, is rejected before it reaches the collective, with
// an error naming the region. Accepted norms form a sliding window; the reference
// is the window's median (robust to one earlier outlier that slipped through).
#pragma once

#include <cstddef>
#include <deque>
#include <span>
#include <string_view>

#include "longhaul/common/status.h"

namespace longhaul::sync_policies {

struct GuardOptions {
  double norm_factor = 10.0;  // reject when norm > norm_factor * median(window); > 1
  size_t window = 8;          // accepted norms remembered; >= 1
  Status Validate() const;
};

// Index of the first NaN or Inf in `v`, or v.size() when every value is finite.
size_t FirstNonFinite(std::span<const float> v);

class PseudoGradientGuard {
 public:
  explicit PseudoGradientGuard(GuardOptions options);

  // OK, or kInvalidArgument naming the region and the problem (first non-finite
  // index, or the norm and the limit). Only accepted norms enter the window; the
  // first check of an empty window only tests finiteness.
  Status Check(std::string_view region, std::span<const float> pseudo_gradient);

  // Median of the accepted norms (0 when none yet).
  double ReferenceNorm() const;
  void Reset() { norms_.clear(); }

 private:
  GuardOptions options_;
  std::deque<double> norms_;
};

}  // namespace longhaul::sync_policies
