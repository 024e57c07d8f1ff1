// Gaussian test inputs for the codec and collective tests: the same seed gives
// the same vector.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace longhaul::sync_policies::testing {

inline std::vector<float> RandomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace longhaul::sync_policies::testing
