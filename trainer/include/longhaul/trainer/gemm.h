// Gemm: the one matrix-multiply the model needs, behind a small interface.
//
// The byte LM's forward and backward passes are a handful of GEMMs plus cheap
// elementwise loops. Routing every GEMM through this interface keeps one model code
// path with two engines: OpenBLAS cblas_sgemm on the CPU (first-class, tested) and
// cuBLAS when CUDA is compiled in. All matrices are row-major.
//
// Determinism: the CPU engine pins OpenBLAS to one thread, because each worker is
// one process on one core and a multi-threaded sgemm may split (and sum) the K
// dimension differently from run to run.
#pragma once

#include <memory>
#include <string_view>

#include "longhaul/common/status.h"

namespace longhaul::trainer {

class Gemm {
 public:
  virtual ~Gemm() = default;
  // C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, row-major; op(X) is X or
  // X^T. lda/ldb/ldc are the row strides of A, B and C as stored.
  virtual void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                     const float* a, int lda, const float* b, int ldb, float beta,
                     float* c, int ldc) = 0;
  virtual std::string_view name() const = 0;
};

// OpenBLAS, single-threaded (calls openblas_set_num_threads(1)).
std::shared_ptr<Gemm> MakeCpuGemm();

#ifdef LONGHAUL_HAVE_CUDA
// cuBLAS on `device`. Takes host pointers like the CPU engine and stages operands
// through device buffers it keeps between calls, so the same model code runs on
// either engine; a device-resident trainer would call cublasSgemm on its own
// buffers instead. Fails (kUnavailable) when no usable GPU/driver is present.
Result<std::shared_ptr<Gemm>> MakeCublasGemm(int device);
#endif

}  // namespace longhaul::trainer
