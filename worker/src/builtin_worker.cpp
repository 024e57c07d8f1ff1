#include "longhaul/worker/builtin_worker.h"

#include <iostream>

#include "longhaul/worker/adamw_state.h"
#include "longhaul/session/session.h"
#include "longhaul/trainer/data.h"
#include "longhaul/trainer/trainer.h"

namespace longhaul::worker {
int RunBuiltinWorker(const session::SessionOptions& options) {
  auto opened = session::Session::Open(options);
  if (!opened.ok()) {
    std::cerr << "worker " << options.rank << " of region " << options.region
              << " cannot start: " << opened.status().ToString() << "\n";
    return 2;
  }
  session::Session& s = **opened;
  const JobConfig& config = s.config();
  if (config.command) {
    s.ReportStartFailure(InvalidArgument("job " + config.job_id + " runs a command worker, not the built-in trainer"));
    return 2;
  }
  auto data = trainer::MakeDataSource(config.data, config.region_index, config.region_count,
                                      static_cast<uint32_t>(options.rank), config.workers);
  if (!data.ok()) {
    s.ReportStartFailure(data.status().WithContext("data"));
    return 2;
  }
  trainer::TrainerOptions topts;
  topts.model = config.model;
  topts.adamw = config.inner;
  topts.batch_size = config.batch_size;
  topts.seed = config.seed;
  if (Status v = topts.Validate(); !v.ok()) {
    s.ReportStartFailure(v.WithContext("trainer options"));
    return 2;
  }
  trainer::InnerTrainer trainer(topts, **data, s.group());
  AdamWState adam(trainer.optimizer());
  session::StartOptions start;
  start.tensors = trainer.model().tensors();
  start.inner = &adam;
  start.loss_floor = (*data)->LossFloor();
  const int batches = options.validation_batches;
  if (batches > 0) {
    // The job's last round gives its headline figure: a larger held-out set.
    start.validation = [&trainer, &s, batches, last = config.rounds](std::span<const float> theta) -> Result<double> {
      return trainer.ValidationLoss(theta, s.round() >= last ? batches * kFinalValidationFactor : batches);
    };
  }
  if (Status started = s.Start(trainer.model().params(), std::move(start)); !started.ok()) return 2;
  while (!s.finished()) {
    const uint64_t tokens0 = trainer.tokens();
    auto loss = trainer.ComputeGradients();
    if (loss.ok()) {
      (void)s.SyncGradients(trainer.gradient());  // kind sync; a failure ends the round at Step()
      trainer.ApplyGradients();
    }
    auto event = loss.ok() ? s.Step(*loss, trainer.tokens() - tokens0) : s.FailRound(loss.status());
    if (!event.ok()) {
      std::cerr << "worker " << options.rank << " of region " << options.region << ": " << event.status().ToString()
                << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace longhaul::worker
