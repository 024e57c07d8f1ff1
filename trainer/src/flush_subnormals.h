// FlushSubnormals: subnormal floats flushed to zero on this thread while in
// scope (x86: MXCSR's FTZ and DAZ bits), the caller's mode restored after.
//
// x86 arithmetic on subnormals takes ~100x longer, and training makes them:
// AdamW's second moment is g^2 (gradients under ~1e-19 square to subnormals),
// weights decayed or averaged towards zero reach them. Seen in benchmarks of
// the built-in trainer: past ~600 steps of a small-preset DiLoCo job AdamW::Step
// took 82% of a worker's time and a step 57 ms instead of 7; past ~1500 steps
// of a tiny-preset job OpenBLAS's sgemm took 75% and steps 4-6x longer. A
// no-op where SSE2 is not available.
#pragma once

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace longhaul::trainer {

class FlushSubnormals {
 public:
#if defined(__SSE2__)
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtz | kDaz); }
  ~FlushSubnormals() { _mm_setcsr(saved_); }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  static constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;
  unsigned saved_;
#endif
};

}  // namespace longhaul::trainer
