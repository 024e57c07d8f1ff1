// SlurmLauncher: a launch's workers as one srun step (worker_launcher.h).
#pragma once

#include <memory>
#include <string>

#include "longhaul/region_agent/labelled_output.h"
#include "longhaul/region_agent/worker_launcher.h"

namespace longhaul::region_agent {

class SlurmLauncher final : public WorkerLauncher {
 public:
  explicit SlurmLauncher(SlurmOptions options) : options_(std::move(options)) {}
  ~SlurmLauncher() override {
    Cancel();
    // srun is gone by now (its owner stopped it): keep what it wrote last.
    FinishOutput(DeadlineAfter(std::chrono::milliseconds(500)));
  }
  LauncherKind kind() const override { return LauncherKind::kSlurm; }
  Result<std::vector<LaunchedProcess>> Start(const LaunchRequest& request) override;
  std::string SchedulerState() override;
  void Cancel() override;
  void FinishOutput(Deadline deadline) override;
  std::string ExitReason() const override { return output_ ? output_->SlurmReason() : ""; }

 private:
  // srun's options for a launch (the program follows them).
  std::vector<std::string> SrunArgs(const LaunchRequest& request) const;
  SlurmOptions options_;
  std::string job_name_;  // set once started: what squeue and scancel look for
  bool cancelled_ = false;
  std::unique_ptr<LabelledOutput> output_;  // srun's forwarded output -> worker-<rank>.log, srun.log
};

}  // namespace longhaul::region_agent
