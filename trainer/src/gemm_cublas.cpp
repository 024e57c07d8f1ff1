// cuBLAS engine for Gemm: row-major host operands staged through device buffers.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cublas_sgemm.h"
#include "device_buffer.h"
#include "longhaul/trainer/gemm.h"

namespace longhaul::trainer {
namespace {

class CublasGemm final : public Gemm {
 public:
  explicit CublasGemm(cublasHandle_t handle) : handle_(handle) {}
  ~CublasGemm() override { cublasDestroy(handle_); }

  void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
             int ldb, float beta, float* c, int ldc) override {
    const size_t a_rows = trans_a ? k : m, b_rows = trans_b ? n : k;
    const size_t a_n = a_rows * lda, b_n = b_rows * ldb, c_n = static_cast<size_t>(m) * ldc;
    for (Status s : {a_.Reserve(a_n, "gemm operand a"), b_.Reserve(b_n, "gemm operand b"),
                     c_.Reserve(c_n, "gemm result")})
      if (!s.ok()) throw std::runtime_error("cublas gemm: " + s.message());
    cudaMemcpy(a_.data(), a, a_n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(b_.data(), b, b_n * sizeof(float), cudaMemcpyHostToDevice);
    if (beta != 0.0f) cudaMemcpy(c_.data(), c, c_n * sizeof(float), cudaMemcpyHostToDevice);
    const cublasStatus_t st =
        RowMajorSgemm(handle_, trans_a, trans_b, m, n, k, alpha, a_.data(), lda, b_.data(), ldb, beta, c_.data(), ldc);
    if (st != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("cublasSgemm failed with status " + std::to_string(static_cast<int>(st)));
    cudaMemcpy(c, c_.data(), c_n * sizeof(float), cudaMemcpyDeviceToHost);
  }
  std::string_view name() const override { return "cublas"; }

 private:
  cublasHandle_t handle_;
  DeviceArray<float> a_, b_, c_;
};

}  // namespace

Result<cublasHandle_t> NewDeterministicCublas(int device) {
  LONGHAUL_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "set device " + std::to_string(device)));
  cublasHandle_t handle = nullptr;
  const cublasStatus_t st = cublasCreate(&handle);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Unavailable("cublasCreate failed with status " + std::to_string(static_cast<int>(st)));
  cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
  return handle;
}

Result<std::shared_ptr<Gemm>> MakeCublasGemm(int device) {
  LONGHAUL_ASSIGN_OR_RETURN(cublasHandle_t handle, NewDeterministicCublas(device));
  return std::shared_ptr<Gemm>(new CublasGemm(handle));
}

}  // namespace longhaul::trainer
