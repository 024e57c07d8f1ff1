// ByteLM forward and backward by hand: embedding gather, GEMMs through Gemm, exact
// GELU, log-softmax cross-entropy accumulated in double so finite-difference checks
// are meaningful on a float model.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "longhaul/trainer/byte_lm_math.h"
#include "longhaul/trainer/model.h"
#include "split_mix.h"

namespace longhaul::trainer {
namespace {

constexpr int kVocab = 256;

// GELU over n values; with `z_grad`, z is overwritten by GELU'(z).
void GeluInPlace(const float* z_in, float* a, float* z_grad, size_t n) {
  if (z_grad) {
    for (size_t i = 0; i < n; ++i) a[i] = math::Gelu(z_in[i], &z_grad[i]);
  } else {
    for (size_t i = 0; i < n; ++i) a[i] = math::Gelu(z_in[i], nullptr);
  }
}

}  // namespace

std::vector<TensorView> ByteLMLayout(const ModelConfig& config) {
  std::vector<TensorView> tensors;
  size_t offset = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    tensors.push_back({std::move(name), std::move(shape), offset, n});
    offset += n;
  };
  const int E = config.embed_dim, H = config.hidden_dim;
  add("embed.weight", {kVocab, E});
  int in = config.context * E;
  for (int l = 0; l < config.hidden_layers; ++l) {
    add("layers." + std::to_string(l) + ".weight", {in, H});
    add("layers." + std::to_string(l) + ".bias", {H});
    in = H;
  }
  add("head.weight", {H, kVocab});
  add("head.bias", {kVocab});
  return tensors;
}

ByteLM::ByteLM(ModelConfig config, std::shared_ptr<Gemm> gemm)
    : config_(std::move(config)),
      gemm_(gemm ? std::move(gemm) : MakeCpuGemm()),
      tensors_(ByteLMLayout(config_)) {
  params_.assign(tensors_.back().offset + tensors_.back().numel, 0.0f);
}

void InitByteLMParams(const std::vector<TensorView>& layout, uint64_t seed, std::span<float> params) {
  SplitMix rng(seed ^ 0x6c6f6e676861756cULL);  // "longhaul"
  for (const TensorView& t : layout) {
    float* p = params.data() + t.offset;
    if (t.shape.size() == 1) {  // biases
      std::fill(p, p + t.numel, 0.0f);
      continue;
    }
    // Embeddings: unit variance. Linear weights: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    const float bound = t.name == "embed.weight"
                            ? std::sqrt(3.0f)
                            : 1.0f / std::sqrt(static_cast<float>(t.shape[0]));
    for (size_t i = 0; i < t.numel; ++i) p[i] = bound * (2.0f * rng.NextFloat() - 1.0f);
  }
}

void ByteLM::InitParams(uint64_t seed) { InitByteLMParams(tensors_, seed, params_); }

double ByteLM::ForwardGemmFlops(int batch_size) const {
  double macs = 0;
  int in = config_.context * config_.embed_dim;
  for (int l = 0; l < config_.hidden_layers; ++l) {
    macs += static_cast<double>(in) * config_.hidden_dim;
    in = config_.hidden_dim;
  }
  macs += static_cast<double>(in) * kVocab;
  return 2.0 * macs * batch_size;
}

void ByteLM::EnsureWorkspace(int batch_size) const {
  if (batch_size <= workspace_batch_) return;
  const int L = config_.hidden_layers, H = config_.hidden_dim;
  const size_t B = static_cast<size_t>(batch_size);
  a_.resize(L + 1);
  z_.resize(L);
  a_[0].resize(B * config_.context * config_.embed_dim);
  for (int l = 0; l < L; ++l) {
    z_[l].resize(B * H);
    a_[l + 1].resize(B * H);
  }
  probs_.resize(B * kVocab);
  workspace_batch_ = batch_size;
}

float ByteLM::Forward(const float* params, const Batch& batch, bool keep_grad) const {
  const int B = batch.batch_size, C = config_.context, E = config_.embed_dim;
  const int H = config_.hidden_dim, L = config_.hidden_layers;
  EnsureWorkspace(B);
  // Embedding gather; when the batch carries a longer context, the model reads the
  // most recent C bytes of each example.
  const float* embed = params + tensors_[0].offset;
  const int skip = batch.context - C;
  for (int b = 0; b < B; ++b) {
    const uint8_t* in = batch.inputs.data() + static_cast<size_t>(b) * batch.context + skip;
    float* row = a_[0].data() + static_cast<size_t>(b) * C * E;
    for (int c = 0; c < C; ++c) std::memcpy(row + c * E, embed + in[c] * E, E * sizeof(float));
  }
  int in_dim = C * E;
  for (int l = 0; l < L; ++l) {
    const float* w = params + tensors_[1 + 2 * l].offset;
    const float* bias = params + tensors_[2 + 2 * l].offset;
    float* z = z_[l].data();
    for (int b = 0; b < B; ++b) std::memcpy(z + static_cast<size_t>(b) * H, bias, H * sizeof(float));
    gemm_->Sgemm(false, false, B, H, in_dim, 1.0f, a_[l].data(), in_dim, w, H, 1.0f, z, H);
    GeluInPlace(z, a_[l + 1].data(), keep_grad ? z : nullptr, static_cast<size_t>(B) * H);
    in_dim = H;
  }
  const float* wo = params + tensors_[1 + 2 * L].offset;
  const float* bo = params + tensors_[2 + 2 * L].offset;
  float* logits = probs_.data();
  for (int b = 0; b < B; ++b) std::memcpy(logits + static_cast<size_t>(b) * kVocab, bo, kVocab * sizeof(float));
  gemm_->Sgemm(false, false, B, kVocab, H, 1.0f, a_[L].data(), H, wo, kVocab, 1.0f, logits, kVocab);
  // Softmax in place (logits -> probabilities) and the mean cross-entropy.
  double total = 0;
  for (int b = 0; b < B; ++b) {
    float* row = logits + static_cast<size_t>(b) * kVocab;
    const float mx = *std::max_element(row, row + kVocab);
    double sum = 0;
    for (int v = 0; v < kVocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
    const double log_sum = std::log(sum) + mx;
    total += log_sum - row[batch.targets[b]];
    for (int v = 0; v < kVocab; ++v) row[v] = static_cast<float>(std::exp(row[v] - log_sum));
  }
  return static_cast<float>(total / B);
}

void ByteLM::Backward(const Batch& batch, float* grad) {
  const int B = batch.batch_size, C = config_.context, E = config_.embed_dim;
  const int H = config_.hidden_dim, L = config_.hidden_layers;
  const float inv_b = 1.0f / static_cast<float>(B);
  // d(loss)/d(logits) = (softmax - onehot) / B, in place over probs_.
  float* dlogits = probs_.data();
  for (int b = 0; b < B; ++b) {
    float* row = dlogits + static_cast<size_t>(b) * kVocab;
    row[batch.targets[b]] -= 1.0f;
    for (int v = 0; v < kVocab; ++v) row[v] *= inv_b;
  }
  float* g_wo = grad + tensors_[1 + 2 * L].offset;
  float* g_bo = grad + tensors_[2 + 2 * L].offset;
  gemm_->Sgemm(true, false, H, kVocab, B, 1.0f, a_[L].data(), H, dlogits, kVocab, 0.0f, g_wo, kVocab);
  for (int v = 0; v < kVocab; ++v) g_bo[v] = math::ColumnSum(dlogits, B, kVocab, v);
  // delta = d(loss)/d(a_L), then walk the layers down.
  delta_.resize(static_cast<size_t>(B) * std::max(H, C * E));
  delta_prev_.resize(delta_.size());
  const float* wo = params_.data() + tensors_[1 + 2 * L].offset;
  gemm_->Sgemm(false, true, B, H, kVocab, 1.0f, dlogits, kVocab, wo, kVocab, 0.0f, delta_.data(), H);
  for (int l = L - 1; l >= 0; --l) {
    const int in_dim = l == 0 ? C * E : H;
    const float* gelu_grad = z_[l].data();  // Forward stored GELU'(z) here
    for (size_t i = 0, n = static_cast<size_t>(B) * H; i < n; ++i) delta_[i] *= gelu_grad[i];
    float* g_w = grad + tensors_[1 + 2 * l].offset;
    float* g_b = grad + tensors_[2 + 2 * l].offset;
    gemm_->Sgemm(true, false, in_dim, H, B, 1.0f, a_[l].data(), in_dim, delta_.data(), H, 0.0f, g_w, H);
    for (int h = 0; h < H; ++h) g_b[h] = math::ColumnSum(delta_.data(), B, H, h);
    const float* w = params_.data() + tensors_[1 + 2 * l].offset;
    gemm_->Sgemm(false, true, B, in_dim, H, 1.0f, delta_.data(), H, w, H, 0.0f, delta_prev_.data(), in_dim);
    std::swap(delta_, delta_prev_);
  }
  // delta is now d(loss)/d(embedded input) [B, C*E]: scatter-add into the table.
  float* g_embed = grad + tensors_[0].offset;
  std::fill(g_embed, g_embed + tensors_[0].numel, 0.0f);
  const int skip = batch.context - C;
  for (int b = 0; b < B; ++b) {
    const uint8_t* in = batch.inputs.data() + static_cast<size_t>(b) * batch.context + skip;
    const float* d = delta_.data() + static_cast<size_t>(b) * C * E;
    for (int c = 0; c < C; ++c) {
      float* g = g_embed + in[c] * E;
      for (int e = 0; e < E; ++e) g[e] += d[c * E + e];
    }
  }
}

bool BatchFits(const ModelConfig& config, const Batch& batch) {
  const size_t B = batch.batch_size > 0 ? static_cast<size_t>(batch.batch_size) : 0;
  return B > 0 && batch.context >= config.context &&
         batch.inputs.size() == B * static_cast<size_t>(batch.context) && batch.targets.size() == B;
}

float ByteLM::ForwardBackward(const Batch& batch, std::span<float> grad) {
  if (!BatchFits(config_, batch) || grad.size() != params_.size()) {
    std::fill(grad.begin(), grad.end(), 0.0f);
    return std::numeric_limits<float>::quiet_NaN();
  }
  const float loss = Forward(params_.data(), batch, /*keep_grad=*/true);
  Backward(batch, grad.data());
  return loss;
}

float ByteLM::Loss(const Batch& batch) const { return LossWith(params_, batch); }

float ByteLM::LossWith(std::span<const float> params, const Batch& batch) const {
  if (!BatchFits(config_, batch) || params.size() != params_.size()) return std::numeric_limits<float>::quiet_NaN();
  return Forward(params.data(), batch, false);
}

}  // namespace longhaul::trainer
