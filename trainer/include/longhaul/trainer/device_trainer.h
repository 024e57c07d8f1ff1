// DeviceInnerTrainer: InnerTrainer (trainer.h) with the model, its gradient and
// AdamW's moments resident on one GPU, for a region whose workers sync over NCCL.
//
// One inner step: the batch's bytes go to the device, forward and backward run
// there (DeviceByteLM), the gradient and loss are averaged over the region in
// one all-reduce on device memory, and AdamW updates the parameters with a
// kernel. The only host traffic per step is the batch and the 4-byte loss (to
// check it is finite and report it). The outer step still works on a host copy
// (DownloadParams / UploadParams once per round). Same initialisation, data
// order and learning-rate schedule as InnerTrainer, so the two agree to float
// rounding. Compiled only with CUDA (LONGHAUL_HAVE_CUDA).
#pragma once

#ifdef LONGHAUL_HAVE_CUDA

#include <cstdint>
#include <memory>
#include <span>

#include "longhaul/common/status.h"
#include "longhaul/trainer/data.h"
#include "longhaul/trainer/device_model.h"
#include "longhaul/trainer/intra_region.h"
#include "longhaul/trainer/trainer.h"

namespace longhaul::trainer {

class DeviceInnerTrainer {
 public:
  // kInvalidArgument for bad options; kUnavailable without a usable `device`.
  // `group`'s collectives must take memory on `device` (MakeNcclGroup); `data`
  // and `group` must outlive the trainer. Parameters start at
  // InitParams(options.seed), as on the host.
  static Result<std::unique_ptr<DeviceInnerTrainer>> Create(TrainerOptions options, DataSource& data,
                                                            IntraRegionGroup& group, int device);
  ~DeviceInnerTrainer();

  // As InnerTrainer's: the region's mean loss; kDataLoss when it is not finite,
  // the all-reduce's error when it fails (parameters then unchanged).
  Result<float> Step();
  Result<float> ComputeGradients();
  // The region's mean gradient after ComputeGradients (device, num_params floats).
  float* device_gradient();
  // It to and from host memory (num_params floats): kind sync averages it
  // across regions on the host between ComputeGradients and ApplyGradients.
  Status DownloadGradient(std::span<float> host) const;
  Status UploadGradient(std::span<const float> host);
  Status ApplyGradients();

  // The parameters to and from host memory (num_params floats), for the outer
  // step and checkpoints.
  Status DownloadParams(std::span<float> host) const;
  Status UploadParams(std::span<const float> host);
  // AdamW's moments to and from host memory (num_params floats each).
  Status DownloadMoments(std::span<float> m, std::span<float> v) const;
  Status UploadMoments(std::span<const float> m, std::span<const float> v);
  uint64_t optimizer_step() const { return step_; }
  void set_optimizer_step(uint64_t step) { step_ = step; }

  // InnerTrainer::ValidationLoss on the device.
  Result<float> ValidationLoss(std::span<const float> host_params, int batches);

  DeviceByteLM& model() { return *model_; }
  const TrainerOptions& options() const { return options_; }
  uint64_t tokens() const { return tokens_; }

 private:
  struct Moments;
  DeviceInnerTrainer(TrainerOptions options, DataSource& data, IntraRegionGroup& group,
                     std::unique_ptr<DeviceByteLM> model, std::unique_ptr<Moments> moments);

  TrainerOptions options_;
  DataSource& data_;
  IntraRegionGroup& group_;
  std::unique_ptr<DeviceByteLM> model_;
  std::unique_ptr<Moments> moments_;  // AdamW's m and v on the device
  uint64_t step_ = 0;                 // AdamW steps taken
  uint64_t tokens_ = 0;
};

}  // namespace longhaul::trainer

#endif  // LONGHAUL_HAVE_CUDA
