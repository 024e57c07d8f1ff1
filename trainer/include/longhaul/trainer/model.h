// ByteLM: the built-in model, a byte-level language model trained for real.
//
// Architecture: the last `context` bytes are embedded (a 256 x embed_dim table,
// concatenated into one context*embed_dim vector), passed through `hidden_layers`
// fully connected layers with exact (erf) GELU, and projected to 256 logits; the loss
// is the mean softmax cross-entropy in nats/byte. Forward and backward are written by
// hand on top of Gemm (OpenBLAS or cuBLAS).
//
// All parameters live in ONE contiguous flat float vector, in the order listed by
// tensors(): embed.weight [256, E]; for each layer i: layers.i.weight [in, H],
// layers.i.bias [H]; head.weight [H, 256], head.bias [256]. Weights are stored
// [in, out] row-major (x W), i.e. the transpose of torch.nn.Linear.weight. The
// cross-region sync shards this flat vector, so the layout is part of the contract.
//
// Determinism: InitParams(seed) is bitwise identical across processes, and
// ForwardBackward/Loss are deterministic for the same inputs (single-threaded sgemm).
// A ByteLM owns scratch buffers, so one instance must not be used from two threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/trainer/batch.h"
#include "longhaul/trainer/gemm.h"

namespace longhaul::trainer {

struct ModelConfig {
  std::string preset;      // informational: the preset it came from, or "custom"
  int context = 8;         // input bytes per example; must cover the data's Markov order
  int embed_dim = 16;
  int hidden_dim = 64;
  int hidden_layers = 1;
  // Names the first bad field and its value.
  Status Validate() const;
};

// "tiny": context 8, embed 16, hidden 64 x 1 layer (~30 K params, seconds per round).
// "small": context 16, embed 48, hidden 768 x 3 layers (~2.0 M params).
// Unknown names -> kInvalidArgument listing the valid ones.
Result<ModelConfig> ModelPreset(std::string_view name);
std::vector<std::string> ModelPresetNames();

// One parameter tensor inside the flat vector.
struct TensorView {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // in floats, into params()
  size_t numel = 0;
};

// The tensors of a ByteLM with `config` in the flat vector's order (above).
std::vector<TensorView> ByteLMLayout(const ModelConfig& config);
// ByteLM::InitParams for parameters kept elsewhere (a device model's host copy):
// `params` has the layout's size.
void InitByteLMParams(const std::vector<TensorView>& layout, uint64_t seed, std::span<float> params);
// Whether a model with `config` can read `batch`: not empty, context at least
// the model's, inputs and targets sized for batch_size examples.
bool BatchFits(const ModelConfig& config, const Batch& batch);

class ByteLM {
 public:
  // `config` must be valid (ModelConfig::Validate); parameters start at zero until
  // InitParams. Uses the CPU Gemm unless another is given.
  explicit ByteLM(ModelConfig config, std::shared_ptr<Gemm> gemm = nullptr);

  const ModelConfig& config() const { return config_; }
  size_t num_params() const { return params_.size(); }
  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::vector<TensorView> tensors() const { return tensors_; }

  // Deterministic initialisation from `seed`: weights uniform with PyTorch-like
  // fan-in scaling, embeddings unit variance, biases zero.
  void InitParams(uint64_t seed);

  // Mean cross-entropy (nats/byte) of the batch; writes d(loss)/d(params) into `grad`
  // (same layout as params(), overwritten, must have num_params() floats). A batch
  // that does not fit (empty, context shorter than the model's, sizes inconsistent)
  // or a wrongly sized span gives NaN (and a zero gradient) rather than a bad read.
  float ForwardBackward(const Batch& batch, std::span<float> grad);
  // Forward only.
  float Loss(const Batch& batch) const;
  // Same, with parameters other than params() (e.g. the global ones), same layout.
  float LossWith(std::span<const float> params, const Batch& batch) const;

  // Multiply-add FLOPs (2 per MAC) of the GEMMs of one forward pass on `batch_size`
  // examples; the backward pass costs twice this.
  double ForwardGemmFlops(int batch_size) const;

 private:
  // keep_grad: leave GELU'(z) in z_ for Backward.
  float Forward(const float* params, const Batch& batch, bool keep_grad) const;
  void Backward(const Batch& batch, float* grad);
  void EnsureWorkspace(int batch_size) const;

  ModelConfig config_;
  std::shared_ptr<Gemm> gemm_;
  std::vector<float> params_;
  std::vector<TensorView> tensors_;
  // Scratch, sized for the largest batch seen: pre-activations z[l] (GELU'(z) after a
  // training forward) and activations
  // a[l] (a[0] is the embedded input), the probabilities, and backward buffers.
  mutable int workspace_batch_ = 0;
  mutable std::vector<std::vector<float>> z_;
  mutable std::vector<std::vector<float>> a_;
  mutable std::vector<float> probs_;
  std::vector<float> delta_;
  std::vector<float> delta_prev_;
};

}  // namespace longhaul::trainer
