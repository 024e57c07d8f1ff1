// SplitMix64: a tiny, fully specified PRNG. Used instead of <random> distributions,
// whose outputs are implementation-defined, so every process and platform draws the
// same numbers from the same seed (bitwise-identical replicas depend on it).
#pragma once

#include <cstdint>

namespace longhaul::trainer {

class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 bits, exactly representable as float.
  float NextFloat() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [0, 1) with 53 bits.
  double NextDouble() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform in [0, n), n > 0 (Lemire-free modulo; the bias is < n / 2^64).
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

// Mixes several integers into one seed.
inline uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  SplitMix m(a ^ 0x243f6a8885a308d3ULL);
  uint64_t s = m.Next() ^ b;
  SplitMix m2(s);
  s = m2.Next() ^ c;
  SplitMix m3(s);
  s = m3.Next() ^ d;
  SplitMix m4(s);
  return m4.Next();
}

}  // namespace longhaul::trainer
