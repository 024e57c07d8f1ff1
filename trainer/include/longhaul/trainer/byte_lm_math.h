// The built-in trainer's per-element arithmetic, one definition for the CPU
// loops (src/model.cpp, src/optimizer.cpp) and the CUDA kernels
// (src/cuda/byte_lm_kernels.cu).
//
// Plain C++17 (nvcc compiles .cu files as C++17 here) and no longhaul headers.
// Each function computes one output element exactly as the CPU loop it came
// from, in the same order of operations, so CPU-side tests of these functions
// cover what the kernels compute. The kernels are compiled without FMA
// contraction and with subnormals flushed, as the host runs them, so the
// elementwise results match (AdamW bit for bit); the model's GEMMs still differ
// in the last bits (cuBLAS sums in another order), and so do erff and expf.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define LONGHAUL_HD __host__ __device__ __forceinline__
#else
#define LONGHAUL_HD inline
#endif

namespace longhaul::trainer::math {

// Exact GELU x * Phi(x); *grad (when not null) gets GELU'(x) = Phi + x * phi,
// from the same erf, so the backward pass needs no transcendental calls.
LONGHAUL_HD float Gelu(float x, float* grad) {
  const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
  if (grad) *grad = cdf + x * 0.39894228040143268f * expf(-0.5f * x * x);
  return x * cdf;
}

// What one AdamW step applies to every element (optimizer.h has the schedule).
struct AdamWScalars {
  float beta1 = 0;
  float beta2 = 0;
  float eps = 0;
  float step_size = 0;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2 = 0;  // 1 / sqrt(1 - beta2^t)
  float decay = 0;         // 1 - lr * weight_decay
};

LONGHAUL_HD void AdamWUpdate(float& p, float g, float& m, float& v, const AdamWScalars& s) {
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  const float denom = sqrtf(v) * s.inv_sqrt_bc2 + s.eps;
  p = p * s.decay - s.step_size * m / denom;
}

// The embedded input's element (b, j) of a [B, C*E] matrix: example b's byte at
// context position c = j / E (the most recent C of its batch_context bytes), row
// of the [256, E] table, column e = j % E.
LONGHAUL_HD float EmbedElement(const float* embed, const uint8_t* inputs, int batch_context, int C, int E, int b,
                               int j) {
  const int c = j / E, e = j % E;
  const uint8_t byte = inputs[static_cast<size_t>(b) * batch_context + (batch_context - C) + c];
  return embed[static_cast<size_t>(byte) * E + e];
}

// d(loss)/d(embed[v][e]): the sum, over examples b then positions c in that
// order, of delta[b][c*E + e] where example b's byte at c is v (0 elsewhere).
LONGHAUL_HD float EmbedGradElement(const float* delta, const uint8_t* inputs, int B, int batch_context, int C,
                                   int E, int v, int e) {
  float sum = 0.0f;
  for (int b = 0; b < B; ++b) {
    const uint8_t* in = inputs + static_cast<size_t>(b) * batch_context + (batch_context - C);
    const float* d = delta + static_cast<size_t>(b) * C * E;
    for (int c = 0; c < C; ++c)
      if (in[c] == v) sum += d[c * E + e];
  }
  return sum;
}

// Column `col` of a row-major [rows, cols] matrix summed over rows in order
// (a bias gradient).
LONGHAUL_HD float ColumnSum(const float* m, int rows, int cols, int col) {
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum += m[static_cast<size_t>(r) * cols + col];
  return sum;
}

}  // namespace longhaul::trainer::math
