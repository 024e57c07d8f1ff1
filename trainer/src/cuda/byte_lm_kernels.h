// Launchers of the device ByteLM's kernels (byte_lm_kernels.cu): a plain C++17
// boundary, since nvcc compiles .cu files as C++17 here. Every pointer is device
// memory; kernels go on the legacy default stream, in order with cuBLAS calls
// on a handle that uses it. Each launcher returns "" or the failing launch named
// with CUDA's error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "longhaul/trainer/byte_lm_math.h"

namespace longhaul::trainer::cuda_detail {

// out[B, C*E]: each example's last C bytes embedded (math::EmbedElement).
std::string EmbedGather(const float* embed, const uint8_t* inputs, int B, int batch_context, int C, int E,
                        float* out);
// out[rows, cols] = bias broadcast to every row.
std::string BroadcastRows(const float* bias, int rows, int cols, float* out);
// a = GELU(z); with keep_grad, z <- GELU'(z) (math::Gelu).
std::string Gelu(float* z, float* a, size_t n, bool keep_grad);
// Row b of logits[B, 256] becomes its softmax; row_loss[b] = its cross-entropy
// against targets[b] (nats), from a double sum as on the CPU.
std::string SoftmaxCrossEntropy(float* logits, const uint8_t* targets, int B, double* row_loss);
// *out = (sum of row_loss[0..B) in order) / B, as float.
std::string MeanLoss(const double* row_loss, int B, float* out);
// probs[B, 256] <- (probs - onehot(targets)) / B: d(loss)/d(logits).
std::string SoftmaxGradient(float* probs, const uint8_t* targets, int B);
// out[col] = math::ColumnSum(m, rows, cols, col).
std::string ColumnSums(const float* m, int rows, int cols, float* out);
// a[i] *= b[i].
std::string MultiplyInPlace(float* a, const float* b, size_t n);
// g_embed[256, E] = math::EmbedGradElement for every (v, e).
std::string EmbedGradient(const float* delta, const uint8_t* inputs, int B, int batch_context, int C, int E,
                          float* g_embed);
// math::AdamWUpdate over n elements.
std::string AdamWStep(float* params, const float* grad, float* m, float* v, size_t n, math::AdamWScalars s);

}  // namespace longhaul::trainer::cuda_detail
