// AdamWState: the built-in trainer's InnerState. AdamW's moments and step
// counter are restored exactly when a round rolls back; a rejoined region
// continues the job's learning-rate schedule (and, in a sync job, receives the
// moments of a live region).
#pragma once

#include <span>
#include <vector>

#include "longhaul/worker/region_replica.h"
#include "longhaul/trainer/optimizer.h"

namespace longhaul::worker {

class AdamWState final : public InnerState {
 public:
  explicit AdamWState(trainer::AdamW& adam) : adam_(adam) {}
  void Save() override;
  void Restore() override;
  // Its moments start fresh, but its learning-rate schedule continues where
  // the job is: a relaunched worker that restarted warm-up and decay at step 0
  // trained at the peak rate while the others were near the end of the decay.
  // Zero moments under this later step's bias correction ramp the update up
  // over ~10 steps: warm-up enough.
  void Rejoined(uint64_t job_step) override;
  // The moments (kind sync: every region's AdamW must hold the same ones).
  std::vector<std::span<float>> SharedState() override { return {adam_.first_moment(), adam_.second_moment()}; }

 private:
  trainer::AdamW& adam_;
  std::vector<float> m_, v_;
  uint64_t step_ = 0;
};

}  // namespace longhaul::worker
