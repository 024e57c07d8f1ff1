// Row-major SGEMM on device operands through cuBLAS, shared by the staged Gemm
// engine (gemm_cublas.cpp) and the device-resident model (device_model.cpp).
#pragma once

#include <cublas_v2.h>

#include "longhaul/common/status.h"

namespace longhaul::trainer {

// A cuBLAS handle on `device` with deterministic math (no split-K atomics, no
// TF32), on the legacy default stream; kUnavailable without a usable GPU.
Result<cublasHandle_t> NewDeterministicCublas(int device);

// Row-major C = alpha op(A) op(B) + beta C on device pointers, as Gemm::Sgemm.
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so cuBLAS
// gets the operands swapped, with no transposition copies.
inline cublasStatus_t RowMajorSgemm(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                                    float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                                    float* c, int ldc) {
  return cublasSgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                     &alpha, b, ldb, a, lda, &beta, c, ldc);
}

}  // namespace longhaul::trainer
