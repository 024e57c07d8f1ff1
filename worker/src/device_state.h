// The built-in worker's state on a GPU, seen by the session (CUDA builds only):
// DeviceParameterMirror gives the replica a host copy of DeviceInnerTrainer's
// parameters, DeviceAdamWState is AdamWState for the moments on the device.
#pragma once

#ifdef LONGHAUL_HAVE_CUDA

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "longhaul/common/log_line.h"
#include "longhaul/trainer/device_trainer.h"
#include "longhaul/worker/region_replica.h"

namespace longhaul::worker {

class DeviceParameterMirror final : public ParameterMirror {
 public:
  // `host` has the model's num_params floats and is what the session gets.
  DeviceParameterMirror(trainer::DeviceInnerTrainer& trainer, std::span<float> host) : trainer_(trainer), host_(host) {}
  Status ToHost() override { return trainer_.DownloadParams(host_); }
  Status ToDevice() override { return trainer_.UploadParams(host_); }

 private:
  trainer::DeviceInnerTrainer& trainer_;
  std::span<float> host_;
};

// As AdamWState: the moments and step are saved at each round's start and
// restored on a rollback; a rejoined region's schedule continues at the job's
// step; a sync job's regions share the moments (through host copies).
class DeviceAdamWState final : public InnerState {
 public:
  explicit DeviceAdamWState(trainer::DeviceInnerTrainer& trainer)
      : trainer_(trainer), m_(trainer.model().num_params()), v_(m_.size()), saved_m_(m_.size()), saved_v_(m_.size()) {}
  void Save() override {
    // After a failed restore the saved moments are still the right ones:
    // push them again rather than save the device's stale ones.
    if (stale_) return Restore();
    const Status saved = trainer_.DownloadMoments(saved_m_, saved_v_);
    Report(saved, "saving");
    if (saved.ok()) saved_step_ = trainer_.optimizer_step();
  }
  void Restore() override {
    const Status restored = trainer_.UploadMoments(saved_m_, saved_v_);
    stale_ = !restored.ok();
    Report(restored, "restoring");
    trainer_.set_optimizer_step(saved_step_);
  }
  void Rejoined(uint64_t job_step) override {
    if (trainer_.optimizer_step() < job_step) trainer_.set_optimizer_step(job_step);
  }
  std::vector<std::span<float>> SharedState() override {
    Report(trainer_.DownloadMoments(m_, v_), "reading");
    return {m_, v_};
  }
  void SharedStateWritten() override { Report(trainer_.UploadMoments(m_, v_), "writing"); }
  // The first failed copy since the last call (InnerState's calls return
  // nothing): the worker fails its step with it.
  Status TakeFailure() override { return std::exchange(failure_, Status::Ok()); }

 private:
  void Report(const Status& s, const char* what) {
    if (s.ok() || !failure_.ok()) return;
    failure_ = s.WithContext(std::string(what) + " adamw's moments on the device");
    LogLine() << failure_.ToString();
  }
  trainer::DeviceInnerTrainer& trainer_;
  std::vector<float> m_, v_, saved_m_, saved_v_;
  uint64_t saved_step_ = 0;
  bool stale_ = false;  // a restore failed: the device's moments are not the saved ones
  Status failure_;
};

}  // namespace longhaul::worker

#endif  // LONGHAUL_HAVE_CUDA
