// DeviceInnerTrainer: the inner step on the device (see device_trainer.h).
#include "longhaul/trainer/device_trainer.h"

#include <cuda_runtime.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cuda/byte_lm_kernels.h"
#include "device_buffer.h"
#include "loss_check.h"

namespace longhaul::trainer {

struct DeviceInnerTrainer::Moments {
  DeviceArray<float> m, v;
};

Result<std::unique_ptr<DeviceInnerTrainer>> DeviceInnerTrainer::Create(TrainerOptions options, DataSource& data,
                                                                       IntraRegionGroup& group, int device) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  LONGHAUL_ASSIGN_OR_RETURN(std::unique_ptr<DeviceByteLM> model, DeviceByteLM::Create(options.model, device));
  const size_t n = model->num_params();
  std::vector<float> init(n);
  InitByteLMParams(model->tensors(), options.seed, init);
  LONGHAUL_RETURN_IF_ERROR(model->Upload(init));
  auto moments = std::make_unique<Moments>();
  LONGHAUL_RETURN_IF_ERROR(moments->m.Reserve(n, "adamw first moment"));
  LONGHAUL_RETURN_IF_ERROR(moments->v.Reserve(n, "adamw second moment"));
  LONGHAUL_RETURN_IF_ERROR(CudaStatus(cudaMemset(moments->m.data(), 0, n * sizeof(float)), "clearing adamw state"));
  LONGHAUL_RETURN_IF_ERROR(CudaStatus(cudaMemset(moments->v.data(), 0, n * sizeof(float)), "clearing adamw state"));
  return std::unique_ptr<DeviceInnerTrainer>(
      new DeviceInnerTrainer(std::move(options), data, group, std::move(model), std::move(moments)));
}

DeviceInnerTrainer::DeviceInnerTrainer(TrainerOptions options, DataSource& data, IntraRegionGroup& group,
                                       std::unique_ptr<DeviceByteLM> model, std::unique_ptr<Moments> moments)
    : options_(std::move(options)),
      data_(data),
      group_(group),
      model_(std::move(model)),
      moments_(std::move(moments)) {}

DeviceInnerTrainer::~DeviceInnerTrainer() = default;

Result<float> DeviceInnerTrainer::Step() {
  LONGHAUL_ASSIGN_OR_RETURN(float loss, ComputeGradients());
  LONGHAUL_RETURN_IF_ERROR(ApplyGradients());
  return loss;
}

Result<float> DeviceInnerTrainer::ComputeGradients() {
  const Batch batch = data_.NextTrain(options_.batch_size, options_.model.context);
  const size_t n = model_->num_params();
  float* grad = model_->gradient_and_loss();
  if (Status computed = model_->ForwardBackward(batch); !computed.ok()) {
    // The other ranks wait in the all-reduce (NCCL has no timeout of its own):
    // join it with a NaN loss, so every rank's step fails alike, then say why.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (cudaMemcpy(grad + n, &nan, sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess)
      (void)group_.AllReduceMean({grad, n + 1});
    return computed.WithContext("forward/backward");
  }
  // Gradient and loss in one all-reduce, on device memory.
  LONGHAUL_RETURN_IF_ERROR(group_.AllReduceMean({grad, n + 1}).WithContext("gradient all-reduce"));
  float loss = 0;
  LONGHAUL_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpy(&loss, grad + n, sizeof(float), cudaMemcpyDeviceToHost), "loss download"));
  // Checked after the all-reduce: every rank sees the same mean and fails alike.
  LONGHAUL_RETURN_IF_ERROR(CheckTrainingLoss(loss, step_ + 1));
  tokens_ += static_cast<uint64_t>(options_.batch_size);
  return loss;
}

float* DeviceInnerTrainer::device_gradient() { return model_->gradient_and_loss(); }

Status DeviceInnerTrainer::DownloadGradient(std::span<float> host) const {
  return CopyToHost(host, model_->gradient_and_loss(), model_->num_params(), "gradient download");
}

Status DeviceInnerTrainer::UploadGradient(std::span<const float> host) {
  return CopyToDevice(model_->gradient_and_loss(), host, model_->num_params(), "gradient upload");
}

Status DeviceInnerTrainer::ApplyGradients() {
  const math::AdamWScalars s = AdamWStepScalars(options_.adamw, step_ + 1);
  LONGHAUL_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(model_->device()), "set device"));
  LONGHAUL_RETURN_IF_ERROR(KernelStatus(cuda_detail::AdamWStep(model_->params(), model_->gradient_and_loss(),
                                                              moments_->m.data(), moments_->v.data(),
                                                              model_->num_params(), s)));
  LONGHAUL_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(cudaStreamLegacy), "adamw kernel"));
  ++step_;
  return Status::Ok();
}

Status DeviceInnerTrainer::DownloadParams(std::span<float> host) const { return model_->Download(host); }
Status DeviceInnerTrainer::UploadParams(std::span<const float> host) { return model_->Upload(host); }

Status DeviceInnerTrainer::DownloadMoments(std::span<float> m, std::span<float> v) const {
  const size_t n = model_->num_params();
  LONGHAUL_RETURN_IF_ERROR(CopyToHost(m, moments_->m.data(), n, "adamw first moment download"));
  return CopyToHost(v, moments_->v.data(), n, "adamw second moment download");
}

Status DeviceInnerTrainer::UploadMoments(std::span<const float> m, std::span<const float> v) {
  const size_t n = model_->num_params();
  LONGHAUL_RETURN_IF_ERROR(CopyToDevice(moments_->m.data(), m, n, "adamw first moment upload"));
  return CopyToDevice(moments_->v.data(), v, n, "adamw second moment upload");
}

Result<float> DeviceInnerTrainer::ValidationLoss(std::span<const float> host_params, int batches) {
  std::vector<Batch> held_out;
  for (int i = 0; i < batches; ++i)
    held_out.push_back(data_.Validation(options_.batch_size, options_.model.context, i));
  return model_->MeanLossWith(host_params, held_out);
}

}  // namespace longhaul::trainer
