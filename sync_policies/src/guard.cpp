#include "longhaul/sync_policies/guard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace longhaul::sync_policies {

Status GuardOptions::Validate() const {
  if (!(norm_factor > 1.0) || !std::isfinite(norm_factor))
    return InvalidArgument("guard.norm_factor must be a finite value > 1, got " + std::to_string(norm_factor));
  if (window == 0) return InvalidArgument("guard.window must be >= 1, got 0");
  return Status::Ok();
}

PseudoGradientGuard::PseudoGradientGuard(GuardOptions options) : options_(options) {}

double PseudoGradientGuard::ReferenceNorm() const {
  if (norms_.empty()) return 0.0;
  std::vector<double> sorted(norms_.begin(), norms_.end());
  std::sort(sorted.begin(), sorted.end());
  size_t m = sorted.size();
  return m % 2 ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
}

size_t FirstNonFinite(std::span<const float> v) {
  size_t i = 0;
  while (i < v.size() && std::isfinite(v[i])) ++i;
  return i;
}

Status PseudoGradientGuard::Check(std::string_view region, std::span<const float> g) {
  LONGHAUL_RETURN_IF_ERROR(options_.Validate());
  // Finite check and squared norm in one pass; double accumulation so the norm
  // of a large shard does not overflow or lose the small entries.
  double sum = 0.0;
  bool finite = true;
  for (float x : g) {
    finite &= std::isfinite(x);
    sum += static_cast<double>(x) * static_cast<double>(x);
  }
  if (!finite) {
    const size_t i = FirstNonFinite(g);
    return InvalidArgument("pseudo-gradient from region " + std::string(region) +
                           " rejected: " + (std::isnan(g[i]) ? "NaN" : "Inf") + " at index " + std::to_string(i) +
                           " of " + std::to_string(g.size()));
  }
  double norm = std::sqrt(sum);
  double reference = ReferenceNorm();
  if (reference > 0.0 && norm > options_.norm_factor * reference) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "norm %.6g exceeds %.6g (%.3g x median %.6g of the last %zu accepted)", norm,
                  options_.norm_factor * reference, options_.norm_factor, reference, norms_.size());
    return InvalidArgument("pseudo-gradient from region " + std::string(region) + " rejected: " + buf);
  }
  norms_.push_back(norm);
  while (norms_.size() > options_.window) norms_.pop_front();
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
