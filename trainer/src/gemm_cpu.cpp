// OpenBLAS engine for Gemm, pinned to one thread for determinism.
#include <cblas.h>

#include "longhaul/trainer/gemm.h"

namespace longhaul::trainer {
namespace {

class CpuGemm final : public Gemm {
 public:
  CpuGemm() { openblas_set_num_threads(1); }
  void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
             int lda, const float* b, int ldb, float beta, float* c, int ldc) override {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  std::string_view name() const override { return "openblas"; }
};

}  // namespace

std::shared_ptr<Gemm> MakeCpuGemm() { return std::make_shared<CpuGemm>(); }

}  // namespace longhaul::trainer
