// DeviceByteLM: ByteLM's forward and backward (model.cpp) on device buffers,
// cuBLAS for the GEMMs and cuda/byte_lm_kernels.cu for the rest.
#include "longhaul/trainer/device_model.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>

#include "cublas_sgemm.h"
#include "cuda/byte_lm_kernels.h"
#include "device_buffer.h"

namespace longhaul::trainer {
namespace {

constexpr int kVocab = 256;

}  // namespace

struct DeviceByteLM::Impl {
  ModelConfig config;
  std::vector<TensorView> tensors;
  size_t n = 0;
  int device = 0;
  cublasHandle_t handle = nullptr;
  DeviceArray<float> params, grad, scratch_params, scratch_loss;
  // Workspace for the largest batch seen (as ByteLM's): z holds each layer's
  // pre-activations (GELU'(z) after a training forward), a the embedded input
  // then each layer's activations, probs the logits then probabilities.
  DeviceArray<float> z, a, probs, delta, delta_prev;
  DeviceArray<double> row_loss;
  DeviceArray<uint8_t> inputs, targets;

  ~Impl() {
    // On this model's device, whatever the destroying thread's current one is.
    (void)cudaSetDevice(device);
    if (handle) cublasDestroy(handle);
  }
  // Every public call runs on this model's device, whatever the thread's current one.
  Status Use() const { return CudaStatus(cudaSetDevice(device), "set device " + std::to_string(device)); }
  const float* at(const float* p, size_t tensor) const { return p + tensors[tensor].offset; }
  float* at(float* p, size_t tensor) const { return p + tensors[tensor].offset; }
  size_t ActivationOffset(int layer, int B) const {  // a[layer] inside `a`
    const size_t b = static_cast<size_t>(B);
    return layer == 0 ? 0 : b * config.context * config.embed_dim + (layer - 1) * b * config.hidden_dim;
  }

  Status Gemm(const char* what, bool ta, bool tb, int m, int n_, int k, const float* A, int lda, const float* Bm,
              int ldb, float beta, float* C, int ldc) const {
    const cublasStatus_t st = RowMajorSgemm(handle, ta, tb, m, n_, k, 1.0f, A, lda, Bm, ldb, beta, C, ldc);
    if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
    return Unavailable(std::string("cublasSgemm (") + what + ") failed with status " +
                       std::to_string(static_cast<int>(st)));
  }

  Status Prepare(const Batch& batch) {
    if (!BatchFits(config, batch))
      return InvalidArgument("device model: a batch of " + std::to_string(batch.batch_size) + " examples of " +
                             std::to_string(batch.context) + " bytes does not fit a model with context " +
                             std::to_string(config.context));
    const size_t B = static_cast<size_t>(batch.batch_size), H = config.hidden_dim, L = config.hidden_layers;
    const size_t in0 = static_cast<size_t>(config.context) * config.embed_dim;
    LONGHAUL_RETURN_IF_ERROR(z.Reserve(std::max<size_t>(1, L * B * H), "pre-activations"));
    LONGHAUL_RETURN_IF_ERROR(a.Reserve(B * in0 + L * B * H, "activations"));
    LONGHAUL_RETURN_IF_ERROR(probs.Reserve(B * kVocab, "probabilities"));
    LONGHAUL_RETURN_IF_ERROR(delta.Reserve(B * std::max(H, in0), "backward buffer"));
    LONGHAUL_RETURN_IF_ERROR(delta_prev.Reserve(B * std::max(H, in0), "backward buffer"));
    LONGHAUL_RETURN_IF_ERROR(row_loss.Reserve(B, "row losses"));
    LONGHAUL_RETURN_IF_ERROR(inputs.Reserve(batch.inputs.size(), "batch inputs"));
    LONGHAUL_RETURN_IF_ERROR(targets.Reserve(B, "batch targets"));
    LONGHAUL_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpy(inputs.data(), batch.inputs.data(), batch.inputs.size(), cudaMemcpyHostToDevice), "batch upload"));
    return CudaStatus(cudaMemcpy(targets.data(), batch.targets.data(), B, cudaMemcpyHostToDevice), "batch upload");
  }

  // ByteLM::Forward on device parameters `p`; the mean loss goes to *loss (device).
  Status Forward(const float* p, const Batch& batch, bool keep_grad, float* loss) {
    const int B = batch.batch_size, C = config.context, E = config.embed_dim;
    const int H = config.hidden_dim, L = config.hidden_layers;
    LONGHAUL_RETURN_IF_ERROR(
        KernelStatus(cuda_detail::EmbedGather(at(p, 0), inputs.data(), B, batch.context, C, E, a.data())));
    int in_dim = C * E;
    for (int l = 0; l < L; ++l) {
      float* zl = z.data() + static_cast<size_t>(l) * B * H;
      LONGHAUL_RETURN_IF_ERROR(KernelStatus(cuda_detail::BroadcastRows(at(p, 2 + 2 * l), B, H, zl)));
      LONGHAUL_RETURN_IF_ERROR(Gemm("layer forward", false, false, B, H, in_dim, a.data() + ActivationOffset(l, B),
                                    in_dim, at(p, 1 + 2 * l), H, 1.0f, zl, H));
      LONGHAUL_RETURN_IF_ERROR(KernelStatus(cuda_detail::Gelu(zl, a.data() + ActivationOffset(l + 1, B),
                                                        static_cast<size_t>(B) * H, keep_grad)));
      in_dim = H;
    }
    LONGHAUL_RETURN_IF_ERROR(KernelStatus(cuda_detail::BroadcastRows(at(p, 2 + 2 * L), B, kVocab, probs.data())));
    LONGHAUL_RETURN_IF_ERROR(Gemm("head forward", false, false, B, kVocab, H, a.data() + ActivationOffset(L, B), H,
                                  at(p, 1 + 2 * L), kVocab, 1.0f, probs.data(), kVocab));
    LONGHAUL_RETURN_IF_ERROR(
        KernelStatus(cuda_detail::SoftmaxCrossEntropy(probs.data(), targets.data(), B, row_loss.data())));
    return KernelStatus(cuda_detail::MeanLoss(row_loss.data(), B, loss));
  }

  // ByteLM::Backward into grad, after a training Forward on params.
  Status Backward(const Batch& batch) {
    const int B = batch.batch_size, C = config.context, E = config.embed_dim;
    const int H = config.hidden_dim, L = config.hidden_layers;
    float* g = grad.data();
    const float* p = params.data();
    float* dlogits = probs.data();
    LONGHAUL_RETURN_IF_ERROR(KernelStatus(cuda_detail::SoftmaxGradient(dlogits, targets.data(), B)));
    const float* a_last = a.data() + ActivationOffset(L, B);
    LONGHAUL_RETURN_IF_ERROR(
        Gemm("head weight gradient", true, false, H, kVocab, B, a_last, H, dlogits, kVocab, 0.0f, at(g, 1 + 2 * L),
             kVocab));
    LONGHAUL_RETURN_IF_ERROR(KernelStatus(cuda_detail::ColumnSums(dlogits, B, kVocab, at(g, 2 + 2 * L))));
    float* d = delta.data();
    float* d_prev = delta_prev.data();
    LONGHAUL_RETURN_IF_ERROR(
        Gemm("head input gradient", false, true, B, H, kVocab, dlogits, kVocab, at(p, 1 + 2 * L), kVocab, 0.0f, d, H));
    for (int l = L - 1; l >= 0; --l) {
      const int in_dim = l == 0 ? C * E : H;
      LONGHAUL_RETURN_IF_ERROR(KernelStatus(cuda_detail::MultiplyInPlace(d, z.data() + static_cast<size_t>(l) * B * H,
                                                                   static_cast<size_t>(B) * H)));
      LONGHAUL_RETURN_IF_ERROR(Gemm("layer weight gradient", true, false, in_dim, H, B,
                                    a.data() + ActivationOffset(l, B), in_dim, d, H, 0.0f, at(g, 1 + 2 * l), H));
      LONGHAUL_RETURN_IF_ERROR(KernelStatus(cuda_detail::ColumnSums(d, B, H, at(g, 2 + 2 * l))));
      LONGHAUL_RETURN_IF_ERROR(Gemm("layer input gradient", false, true, B, in_dim, H, d, H, at(p, 1 + 2 * l), H,
                                    0.0f, d_prev, in_dim));
      std::swap(d, d_prev);
    }
    return KernelStatus(cuda_detail::EmbedGradient(d, inputs.data(), B, batch.context, C, E, at(g, 0)));
  }
};

Result<std::unique_ptr<DeviceByteLM>> DeviceByteLM::Create(const ModelConfig& config, int device) {
  LONGHAUL_RETURN_IF_ERROR(config.Validate());
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->tensors = ByteLMLayout(config);
  impl->n = impl->tensors.back().offset + impl->tensors.back().numel;
  impl->device = device;
  LONGHAUL_ASSIGN_OR_RETURN(impl->handle, NewDeterministicCublas(device));
  LONGHAUL_RETURN_IF_ERROR(impl->params.Reserve(impl->n, "parameters"));
  LONGHAUL_RETURN_IF_ERROR(impl->grad.Reserve(impl->n + 1, "gradient"));
  LONGHAUL_RETURN_IF_ERROR(impl->scratch_params.Reserve(impl->n, "evaluated parameters"));
  LONGHAUL_RETURN_IF_ERROR(impl->scratch_loss.Reserve(1, "evaluated loss"));
  LONGHAUL_RETURN_IF_ERROR(
      CudaStatus(cudaMemset(impl->params.data(), 0, impl->n * sizeof(float)), "clearing the parameters"));
  LONGHAUL_RETURN_IF_ERROR(
      CudaStatus(cudaMemset(impl->grad.data(), 0, (impl->n + 1) * sizeof(float)), "clearing the gradient"));
  return std::unique_ptr<DeviceByteLM>(new DeviceByteLM(std::move(impl)));
}

DeviceByteLM::DeviceByteLM(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceByteLM::~DeviceByteLM() = default;

const ModelConfig& DeviceByteLM::config() const { return impl_->config; }
const std::vector<TensorView>& DeviceByteLM::tensors() const { return impl_->tensors; }
size_t DeviceByteLM::num_params() const { return impl_->n; }
int DeviceByteLM::device() const { return impl_->device; }
float* DeviceByteLM::params() { return impl_->params.data(); }
float* DeviceByteLM::gradient_and_loss() { return impl_->grad.data(); }

Status DeviceByteLM::Upload(std::span<const float> host) {
  LONGHAUL_RETURN_IF_ERROR(impl_->Use());
  return CopyToDevice(impl_->params.data(), host, impl_->n, "device model parameter upload");
}

Status DeviceByteLM::Download(std::span<float> host) const {
  LONGHAUL_RETURN_IF_ERROR(impl_->Use());
  return CopyToHost(host, impl_->params.data(), impl_->n, "device model parameter download");
}

Status DeviceByteLM::ForwardBackward(const Batch& batch) {
  LONGHAUL_RETURN_IF_ERROR(impl_->Use());
  LONGHAUL_RETURN_IF_ERROR(impl_->Prepare(batch));
  LONGHAUL_RETURN_IF_ERROR(impl_->Forward(impl_->params.data(), batch, /*keep_grad=*/true, impl_->grad.data() + impl_->n));
  LONGHAUL_RETURN_IF_ERROR(impl_->Backward(batch));
  // A kernel that faulted says so here, under its own name, not at the next copy.
  return CudaStatus(cudaStreamSynchronize(cudaStreamLegacy), "forward/backward kernels");
}

Result<float> DeviceByteLM::MeanLossWith(std::span<const float> host_params, std::span<const Batch> batches) {
  if (host_params.size() != impl_->n)
    return InvalidArgument("device model loss: " + std::to_string(host_params.size()) + " parameters, want " +
                           std::to_string(impl_->n));
  if (batches.empty()) return 0.0f;
  LONGHAUL_RETURN_IF_ERROR(impl_->Use());
  LONGHAUL_RETURN_IF_ERROR(CudaStatus(cudaMemcpy(impl_->scratch_params.data(), host_params.data(),
                                                 host_params.size_bytes(), cudaMemcpyHostToDevice),
                                      "evaluated parameter upload"));
  double total = 0;
  for (const Batch& batch : batches) {
    LONGHAUL_RETURN_IF_ERROR(impl_->Prepare(batch));
    LONGHAUL_RETURN_IF_ERROR(impl_->Forward(impl_->scratch_params.data(), batch, false, impl_->scratch_loss.data()));
    float loss = 0;
    LONGHAUL_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpy(&loss, impl_->scratch_loss.data(), sizeof(float), cudaMemcpyDeviceToHost), "loss download"));
    total += loss;
  }
  return static_cast<float>(total / static_cast<double>(batches.size()));
}

}  // namespace longhaul::trainer
