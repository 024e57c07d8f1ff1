// DeviceByteLM: the built-in ByteLM (model.h) with its parameters, gradient and
// activations in one GPU's memory, for workers whose region syncs over NCCL.
//
// Same flat layout, initialisation and arithmetic as ByteLM: the GEMMs are
// cuBLAS calls on device buffers, everything else is a kernel applying
// byte_lm_math.h's per-element functions. Per step only the batch's bytes go to
// the device; the parameters and gradient never leave it. Results agree with
// ByteLM to float rounding, not bit for bit (cuBLAS sums in another order), and
// are deterministic on one GPU: no reduction uses atomics. Compiled only with
// CUDA (LONGHAUL_HAVE_CUDA). Use one instance from the thread that created it.
#pragma once

#ifdef LONGHAUL_HAVE_CUDA

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/trainer/batch.h"
#include "longhaul/trainer/model.h"

namespace longhaul::trainer {

class DeviceByteLM {
 public:
  // kInvalidArgument for a bad config; kUnavailable without a usable device
  // `device` or its memory. Parameters start at zero.
  static Result<std::unique_ptr<DeviceByteLM>> Create(const ModelConfig& config, int device);
  ~DeviceByteLM();

  const ModelConfig& config() const;
  const std::vector<TensorView>& tensors() const;
  size_t num_params() const;
  int device() const;
  // Device pointers: the parameters (num_params floats), and the last
  // ForwardBackward's gradient followed by its loss (num_params + 1 floats, so
  // one all-reduce averages both).
  float* params();
  float* gradient_and_loss();

  // params <- host / host <- params; `host` has num_params floats.
  Status Upload(std::span<const float> host);
  Status Download(std::span<float> host) const;

  // Mean cross-entropy of the batch and its gradient, into gradient_and_loss().
  // kInvalidArgument for a batch that does not fit (empty, context shorter
  // than the model's, sizes inconsistent); kUnavailable for a CUDA failure.
  Status ForwardBackward(const Batch& batch);
  // The mean loss of `host_params` (model layout, e.g. the global parameters)
  // over `batches` (summed in double, in order, as ByteLM's callers do; 0 for
  // none), computed on the device without touching params().
  Result<float> MeanLossWith(std::span<const float> host_params, std::span<const Batch> batches);

 private:
  struct Impl;
  explicit DeviceByteLM(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace longhaul::trainer

#endif  // LONGHAUL_HAVE_CUDA
