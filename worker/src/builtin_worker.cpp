#include "longhaul/worker/builtin_worker.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "device_state.h"
#include "longhaul/common/log_line.h"
#include "longhaul/worker/adamw_state.h"
#include "longhaul/session/session.h"
#include "longhaul/trainer/data.h"
#include "longhaul/trainer/trainer.h"

namespace longhaul::worker {
namespace {

// The session's round loop around one inner step each time round: `step`
// returns the region's loss, or the step's failure (the round then fails). A
// failure that `fatal` says this worker cannot go on from ends it (exit 1): the
// agent then relaunches the region's workers.
template <typename InnerStep, typename Fatal>
int RunSteps(session::Session& s, const session::SessionOptions& options, InnerStep step, Fatal fatal) {
  while (!s.finished()) {
    uint64_t tokens = 0;
    auto loss = step(&tokens);
    if (!loss.ok() && fatal(loss.status())) {
      LogLine() << "worker " << options.rank << " of region " << options.region
                << " cannot go on: " << loss.status().ToString();
      return 1;
    }
    auto event = loss.ok() ? s.Step(*loss, tokens) : s.FailRound(loss.status());
    if (!event.ok()) {
      LogLine() << "worker " << options.rank << " of region " << options.region << ": " << event.status().ToString();
      return 1;
    }
  }
  return 0;
}

Result<double> AsLoss(float loss) { return static_cast<double>(loss); }
Result<double> AsLoss(Result<float> loss) {
  LONGHAUL_ASSIGN_OR_RETURN(float l, std::move(loss));
  return static_cast<double>(l);
}

// What the session needs from either trainer (host or device): its tensors, the
// inner state a rollback restores, and the validation of theta.
template <typename Trainer>
session::StartOptions StartFor(Trainer& trainer, session::Session& s, const session::SessionOptions& options,
                               InnerState& inner, double loss_floor) {
  session::StartOptions start;
  start.tensors = trainer.model().tensors();
  start.inner = &inner;
  start.loss_floor = loss_floor;
  const int batches = options.validation_batches;
  if (batches > 0) {
    // The job's last round gives its headline figure: a larger held-out set.
    start.validation = [&trainer, &s, batches, last = s.config().rounds](std::span<const float> theta) {
      return AsLoss(trainer.ValidationLoss(theta, s.round() >= last ? batches * kFinalValidationFactor : batches));
    };
  }
  return start;
}

#ifdef LONGHAUL_HAVE_CUDA
// The region agreed on NCCL: parameters, gradient and AdamW's state on this
// worker's GPU, the gradient all-reduce over the NCCL group; the session works
// on a host copy around the outer step.
int RunOnDevice(session::Session& s, const session::SessionOptions& options, const trainer::TrainerOptions& topts,
                trainer::DataSource& data, double loss_floor) {
  auto created = trainer::DeviceInnerTrainer::Create(topts, data, *s.device_group(), s.device());
  if (!created.ok()) {
    s.ReportStartFailure(created.status().WithContext("device trainer"));
    return 2;
  }
  trainer::DeviceInnerTrainer& trainer = **created;
  std::vector<float> params(trainer.model().num_params());
  if (Status got = trainer.DownloadParams(params); !got.ok()) {
    s.ReportStartFailure(got.WithContext("device trainer"));
    return 2;
  }
  DeviceParameterMirror mirror(trainer, params);
  DeviceAdamWState adam(trainer);
  session::StartOptions start = StartFor(trainer, s, options, adam, loss_floor);
  start.mirror = &mirror;
  if (Status started = s.Start(params, std::move(start)); !started.ok()) return 2;
  std::vector<float> grad(s.syncs_gradients() ? params.size() : 0);
  // A non-finite loss fails every rank's step alike (it is checked after the
  // all-reduce), and the round is retried. Any other failure (a copy, a kernel,
  // the NCCL group timing out) is this rank's alone: its peers go on to the next
  // all-reduce without it, and an aborted NCCL group is not formed again, so
  // the worker ends and the agent relaunches the region.
  auto fatal = [](const Status& why) { return why.code() != StatusCode::kDataLoss; };
  return RunSteps(
      s, options,
      [&](uint64_t* tokens) -> Result<float> {
        const uint64_t tokens0 = trainer.tokens();
        LONGHAUL_ASSIGN_OR_RETURN(float loss, trainer.ComputeGradients());
        if (s.syncs_gradients()) {  // kind sync: the mean over regions goes through the host
          // The whole region takes part in the mean: a rank whose gradient did
          // not come down joins with NaN (every rank's round then fails), then says why.
          const Status down = trainer.DownloadGradient(grad);
          if (!down.ok()) std::fill(grad.begin(), grad.end(), std::numeric_limits<float>::quiet_NaN());
          (void)s.SyncGradients(grad);  // a failure ends the round at Step()
          LONGHAUL_RETURN_IF_ERROR(down);
          LONGHAUL_RETURN_IF_ERROR(trainer.UploadGradient(grad));
        }
        LONGHAUL_RETURN_IF_ERROR(trainer.ApplyGradients());
        LONGHAUL_RETURN_IF_ERROR(adam.TakeFailure());
        *tokens = trainer.tokens() - tokens0;
        return loss;
      },
      fatal);
}
#endif

}  // namespace

int RunBuiltinWorker(session::SessionOptions options) {
#ifdef LONGHAUL_HAVE_CUDA
  options.parameters_on_device = true;  // the built-in trainer can run on a GPU
#endif
  auto opened = session::Session::Open(options);
  if (!opened.ok()) {
    LogLine() << "worker " << options.rank << " of region " << options.region
              << " cannot start: " << opened.status().ToString();
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
#ifdef LONGHAUL_HAVE_CUDA
  if (s.device_group() != nullptr) return RunOnDevice(s, options, topts, **data, (*data)->LossFloor());
#endif
  trainer::InnerTrainer trainer(topts, **data, s.group());
  AdamWState adam(trainer.optimizer());
  if (Status started = s.Start(trainer.model().params(), StartFor(trainer, s, options, adam, (*data)->LossFloor()));
      !started.ok())
    return 2;
  // Every failure of a host step is the region's alike (InnerTrainer joins the
  // all-reduce before it checks): the round fails and is retried.
  return RunSteps(
      s, options,
      [&](uint64_t* tokens) -> Result<float> {
        const uint64_t tokens0 = trainer.tokens();
        LONGHAUL_ASSIGN_OR_RETURN(float loss, trainer.ComputeGradients());
        (void)s.SyncGradients(trainer.gradient());  // kind sync; a failure ends the round at Step()
        trainer.ApplyGradients();
        *tokens = trainer.tokens() - tokens0;
        return loss;
      },
      [](const Status&) { return false; });
}

}  // namespace longhaul::worker
