// The device ByteLM's elementwise and reduction kernels. The per-element
// arithmetic is byte_lm_math.h's, shared with the CPU model; every reduction
// sums in a fixed order (no atomics), so a step is deterministic on one GPU.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "byte_lm_kernels.h"

namespace longhaul::trainer::cuda_detail {
namespace {

constexpr int kThreads = 256;
constexpr int kVocab = 256;

// Forgets an earlier call's error (a cudaMalloc that failed, say), so that
// Launched reports this launch's own; a faulted kernel's error is sticky and
// still shows.
void Clear() { (void)cudaGetLastError(); }

std::string Launched(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return "";
  return std::string("kernel ") + what + ": " + cudaGetErrorString(err);
}

unsigned Blocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

#define LONGHAUL_GRID_LOOP(i, n)                                                         \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void EmbedGatherKernel(const float* embed, const uint8_t* inputs, int B, int batch_context, int C, int E,
                                  float* out) {
  const size_t row = static_cast<size_t>(C) * E;
  LONGHAUL_GRID_LOOP(i, static_cast<size_t>(B) * row) {
    out[i] = math::EmbedElement(embed, inputs, batch_context, C, E, static_cast<int>(i / row),
                                static_cast<int>(i % row));
  }
}

__global__ void BroadcastRowsKernel(const float* bias, int rows, int cols, float* out) {
  LONGHAUL_GRID_LOOP(i, static_cast<size_t>(rows) * cols) { out[i] = bias[i % cols]; }
}

__global__ void GeluKernel(float* z, float* a, size_t n, bool keep_grad) {
  LONGHAUL_GRID_LOOP(i, n) {
    float grad = 0.0f;
    a[i] = math::Gelu(z[i], keep_grad ? &grad : nullptr);
    if (keep_grad) z[i] = grad;
  }
}

// One block of kVocab threads per row.
__global__ void SoftmaxCrossEntropyKernel(float* logits, const uint8_t* targets, double* row_loss) {
  __shared__ float max_part[kVocab];
  __shared__ double exps[kVocab];
  __shared__ double log_sum;
  float* row = logits + static_cast<size_t>(blockIdx.x) * kVocab;
  const int v = threadIdx.x;
  const float x = row[v];
  max_part[v] = x;
  __syncthreads();
  for (int stride = kVocab / 2; stride > 0; stride /= 2) {
    if (v < stride && max_part[v + stride] > max_part[v]) max_part[v] = max_part[v + stride];
    __syncthreads();
  }
  const float mx = max_part[0];
  exps[v] = exp(static_cast<double>(x) - mx);
  __syncthreads();
  if (v == 0) {  // in order, as the CPU sums
    double sum = 0;
    for (int i = 0; i < kVocab; ++i) sum += exps[i];
    log_sum = log(sum) + mx;
    row_loss[blockIdx.x] = log_sum - row[targets[blockIdx.x]];
  }
  __syncthreads();
  row[v] = static_cast<float>(exp(x - log_sum));
}

__global__ void MeanLossKernel(const double* row_loss, int B, float* out) {
  double total = 0;
  for (int b = 0; b < B; ++b) total += row_loss[b];
  *out = static_cast<float>(total / B);
}

__global__ void SoftmaxGradientKernel(float* probs, const uint8_t* targets, int B, float inv_b) {
  LONGHAUL_GRID_LOOP(i, static_cast<size_t>(B) * kVocab) {
    const size_t b = i / kVocab;
    float p = probs[i];
    if (static_cast<int>(i % kVocab) == targets[b]) p -= 1.0f;
    probs[i] = p * inv_b;
  }
}

__global__ void ColumnSumsKernel(const float* m, int rows, int cols, float* out) {
  LONGHAUL_GRID_LOOP(c, static_cast<size_t>(cols)) { out[c] = math::ColumnSum(m, rows, cols, static_cast<int>(c)); }
}

__global__ void MultiplyInPlaceKernel(float* a, const float* b, size_t n) {
  LONGHAUL_GRID_LOOP(i, n) { a[i] *= b[i]; }
}

__global__ void EmbedGradientKernel(const float* delta, const uint8_t* inputs, int B, int batch_context, int C, int E,
                                    float* g_embed) {
  LONGHAUL_GRID_LOOP(i, static_cast<size_t>(kVocab) * E) {
    g_embed[i] = math::EmbedGradElement(delta, inputs, B, batch_context, C, E, static_cast<int>(i / E),
                                        static_cast<int>(i % E));
  }
}

__global__ void AdamWKernel(float* p, const float* g, float* m, float* v, size_t n, math::AdamWScalars s) {
  LONGHAUL_GRID_LOOP(i, n) { math::AdamWUpdate(p[i], g[i], m[i], v[i], s); }
}

}  // namespace

std::string EmbedGather(const float* embed, const uint8_t* inputs, int B, int batch_context, int C, int E,
                        float* out) {
  Clear();
  EmbedGatherKernel<<<Blocks(static_cast<size_t>(B) * C * E), kThreads>>>(embed, inputs, B, batch_context, C, E, out);
  return Launched("embed gather");
}

std::string BroadcastRows(const float* bias, int rows, int cols, float* out) {
  Clear();
  BroadcastRowsKernel<<<Blocks(static_cast<size_t>(rows) * cols), kThreads>>>(bias, rows, cols, out);
  return Launched("broadcast rows");
}

std::string Gelu(float* z, float* a, size_t n, bool keep_grad) {
  Clear();
  GeluKernel<<<Blocks(n), kThreads>>>(z, a, n, keep_grad);
  return Launched("gelu");
}

std::string SoftmaxCrossEntropy(float* logits, const uint8_t* targets, int B, double* row_loss) {
  Clear();
  SoftmaxCrossEntropyKernel<<<static_cast<unsigned>(B), kVocab>>>(logits, targets, row_loss);
  return Launched("softmax cross-entropy");
}

std::string MeanLoss(const double* row_loss, int B, float* out) {
  Clear();
  MeanLossKernel<<<1, 1>>>(row_loss, B, out);
  return Launched("mean loss");
}

std::string SoftmaxGradient(float* probs, const uint8_t* targets, int B) {
  Clear();
  SoftmaxGradientKernel<<<Blocks(static_cast<size_t>(B) * kVocab), kThreads>>>(probs, targets, B,
                                                                                1.0f / static_cast<float>(B));
  return Launched("softmax gradient");
}

std::string ColumnSums(const float* m, int rows, int cols, float* out) {
  Clear();
  ColumnSumsKernel<<<Blocks(static_cast<size_t>(cols)), kThreads>>>(m, rows, cols, out);
  return Launched("column sums");
}

std::string MultiplyInPlace(float* a, const float* b, size_t n) {
  Clear();
  MultiplyInPlaceKernel<<<Blocks(n), kThreads>>>(a, b, n);
  return Launched("multiply");
}

std::string EmbedGradient(const float* delta, const uint8_t* inputs, int B, int batch_context, int C, int E,
                          float* g_embed) {
  Clear();
  EmbedGradientKernel<<<Blocks(static_cast<size_t>(kVocab) * E), kThreads>>>(delta, inputs, B, batch_context, C, E,
                                                                             g_embed);
  return Launched("embedding gradient");
}

std::string AdamWStep(float* params, const float* grad, float* m, float* v, size_t n, math::AdamWScalars s) {
  Clear();
  AdamWKernel<<<Blocks(n), kThreads>>>(params, grad, m, v, n, s);
  return Launched("adamw");
}

}  // namespace longhaul::trainer::cuda_detail
