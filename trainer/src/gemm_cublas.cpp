// cuBLAS engine for Gemm: row-major host operands staged through device buffers.
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so the operands
// are passed to cublasSgemm swapped, with no transposition copies.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "longhaul/trainer/gemm.h"

namespace longhaul::trainer {
namespace {

class DeviceBuffer {
 public:
  ~DeviceBuffer() { cudaFree(ptr_); }
  float* Reserve(size_t n) {
    if (n > capacity_) {
      cudaFree(ptr_);
      ptr_ = nullptr;
      capacity_ = 0;
      if (cudaMalloc(&ptr_, n * sizeof(float)) != cudaSuccess) return nullptr;
      capacity_ = n;
    }
    return ptr_;
  }
 private:
  float* ptr_ = nullptr;
  size_t capacity_ = 0;
};

class CublasGemm final : public Gemm {
 public:
  explicit CublasGemm(cublasHandle_t handle) : handle_(handle) {}
  ~CublasGemm() override { cublasDestroy(handle_); }

  void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
             int lda, const float* b, int ldb, float beta, float* c, int ldc) override {
    const size_t a_rows = trans_a ? k : m, b_rows = trans_b ? n : k;
    const size_t a_n = a_rows * lda, b_n = b_rows * ldb, c_n = static_cast<size_t>(m) * ldc;
    float* da = a_.Reserve(a_n);
    float* db = b_.Reserve(b_n);
    float* dc = c_.Reserve(c_n);
    if (!da || !db || !dc) throw std::runtime_error("cublas gemm: device allocation failed");
    cudaMemcpy(da, a, a_n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, b_n * sizeof(float), cudaMemcpyHostToDevice);
    if (beta != 0.0f) cudaMemcpy(dc, c, c_n * sizeof(float), cudaMemcpyHostToDevice);
    const cublasStatus_t st =
        cublasSgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                    n, m, k, &alpha, db, ldb, da, lda, &beta, dc, ldc);
    if (st != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("cublasSgemm failed with status " + std::to_string(static_cast<int>(st)));
    cudaMemcpy(c, dc, c_n * sizeof(float), cudaMemcpyDeviceToHost);
  }
  std::string_view name() const override { return "cublas"; }

 private:
  cublasHandle_t handle_;
  DeviceBuffer a_, b_, c_;
};

}  // namespace

Result<std::shared_ptr<Gemm>> MakeCublasGemm(int device) {
  const cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess)
    return Unavailable(std::string("cuda set device ") + std::to_string(device) + ": " + cudaGetErrorString(e));
  cublasHandle_t handle = nullptr;
  const cublasStatus_t st = cublasCreate(&handle);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Unavailable("cublasCreate failed with status " + std::to_string(static_cast<int>(st)));
  // Deterministic results: no split-K atomics, no TF32.
  cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
  return std::shared_ptr<Gemm>(new CublasGemm(handle));
}

}  // namespace longhaul::trainer
