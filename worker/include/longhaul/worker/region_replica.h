// RegionReplica: one worker's share of the global model state and the round
// that advances it (DESIGN.md "The round"), independent of who trains.
//
// State: theta (the global parameters, full vector, identical in every worker of
// every region), the local parameters the inner optimizer works on (a flat fp32
// buffer the caller owns: the built-in trainer's, or a PyTorch model's), and the
// outer-optimizer state of this worker's pieces (ShardLayout). The caller runs
// the inner steps; the replica is told after each one:
//
//   BeginRound(inputs, link)          bootstrap a joining region, snapshot
//   AfterInnerStep(s) for s = 1..H    the schedule's sync actions of step s
//   EndRound(validation)              drain, hash theta(t): the round is *pending*
//   Commit() / Rollback()             the orchestrator's verdict
//
// Rollback() restores theta(t-1), the outer state, the local parameters and,
// through InnerState, whatever the trainer keeps (AdamW moments): an aborted
// round leaves no trace. A failing AfterInnerStep/EndRound has already rolled back.
//
// Kinds (the same machinery, one flag apart):
//  diloco            pseudo-gradient theta - local after H steps, guard,
//                    cross-region AllReduceMean (codec), outer step,
//                    intra-region all-gather; local <- theta(t).
//  streaming_diloco  P fragments synced on SyncSchedule's staggered steps, each
//                    as above for its pieces, then mixed into the local params
//                    with alpha. With overlap tau > 0 the fragment's cross-region
//                    all-reduce runs on a background thread while the next tau
//                    inner steps compute; the outer step and the mix happen at
//                    the apply step (at most one fragment in flight). A fragment
//                    sent at the round's last step applies at the round's end.
//  sync              synchronous data parallelism: every inner step, between
//                    backward and the optimizer step, the caller hands the
//                    region's mean gradient to AllReduceGradients(), which
//                    averages it across regions (codec as the job asks; fp32 when
//                    none), so every worker of every region takes the same
//                    optimizer step from the same state; theta <- local at the
//                    round's end. A step without it fails the round. A joining
//                    region also receives the inner optimizer's state
//                    (InnerState::SharedState) so its steps stay identical.
//  local             no cross-region sync; theta <- local (regions diverge).
//
// Model buffers (ReplicaOptions::buffers: the vector's last floats, e.g.
// BatchNorm running statistics) are state the inner optimizer does not train.
// They take no outer step and no mixing; at each round's end (the outer step's
// round; every kind but local) they are averaged over every worker of every
// region in fp32 and written to theta and the local copy, so the replicas stay
// identical and the parameter hash covers them.
//
// Inner moments (ReplicaOptions::moment_sync, diloco kinds only): at the end of
// a round whose number is a multiple of a moment's period, the inner state's
// buffer (InnerState::SharedState: 0 = m, 1 = v) is replaced by its mean over
// the round's regions (moment_sync.h); a rollback restores it with the rest.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/worker/shard_layout.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/cross_region.h"
#include "longhaul/sync_policies/guard.h"
#include "longhaul/sync_policies/link.h"
#include "longhaul/sync_policies/moment_sync.h"
#include "longhaul/sync_policies/outer_optimizer.h"
#include "longhaul/sync_policies/schedule.h"
#include "longhaul/trainer/checkpoint.h"
#include "longhaul/trainer/intra_region.h"
#include "longhaul/trainer/model.h"

namespace longhaul::worker {

// The trainer's own state that a rolled-back round must undo (inner optimizer
// moments, step counters). Optional: without it only parameters are restored.
class InnerState {
 public:
  virtual ~InnerState() = default;
  virtual void Save() = 0;     // at the start of each round
  virtual void Restore() = 0;  // the round rolled back: back to the last Save()
  // This region was re-synchronised from a live one at the start of a round
  // whose first inner step is job-wide step `job_step` + 1.
  virtual void Rejoined(uint64_t job_step) = 0;
  // The state every region must hold alike when all take the same inner steps
  // (kind sync: AdamW's moments), as buffers of the parameters' length; a
  // joining region receives them from the bootstrap region. Empty: nothing to
  // share (a joining region then starts from fresh optimizer state). First the
  // first moment, then the second: moment_sync averages them by that order.
  virtual std::vector<std::span<float>> SharedState() { return {}; }
  // The replica wrote into the buffers SharedState returned (a joining region
  // received them, or the regions averaged them): a trainer that keeps them
  // elsewhere (on a GPU) takes them back now.
  virtual void SharedStateWritten() {}
  // The first failure of a copy these calls made (they return nothing), once;
  // the replica fails the round with it (a state kept in host memory has none).
  virtual Status TakeFailure() { return Status::Ok(); }
};

// For a trainer whose parameters live elsewhere (a GPU's memory): the replica's
// `local` span is then their host copy, which the replica brings up to date
// before it reads it and hands back after it wrote it. That happens at the
// round's start and end and at the schedule's sync points, never at the other
// inner steps.
class ParameterMirror {
 public:
  virtual ~ParameterMirror() = default;
  virtual Status ToHost() = 0;    // local <- the trainer's parameters
  virtual Status ToDevice() = 0;  // the trainer's parameters <- local
  // The same for an inner optimizer state given as host buffers (a Session's
  // StartOptions::optimizer_state, FlatInnerState) whose originals live with
  // the parameters. A trainer whose InnerState copies its own (as the built-in
  // device trainer's does) leaves these as they are.
  virtual Status StateToHost() { return Status::Ok(); }
  virtual Status StateToDevice() { return Status::Ok(); }
};

struct ReplicaOptions {
  std::string region;
  sync_policies::ScheduleOptions schedule;
  sync_policies::OuterOptimizerOptions outer;
  sync_policies::CompressionOptions compression;
  sync_policies::GuardOptions guard;
  Duration collective_timeout{std::chrono::seconds(60)};
  // How the flat vector splits into named tensors (checkpoints); empty: one
  // tensor "flat" of all parameters.
  std::vector<trainer::TensorView> tensors;
  // The flat vector's last `buffers` floats are model buffers (see above).
  size_t buffers = 0;
  // Periods of the cross-region averaging of the inner moments (see above).
  sync_policies::MomentSyncOptions moment_sync;
};

struct RoundInputs {
  uint32_t round = 0;
  uint64_t epoch = 0;
  // Bootstrap: when some participant is joining, every participant takes part in
  // a Broadcast from `bootstrap_rank` (ring rank of the live region) first.
  bool any_joining = false;
  bool this_region_joining = false;
  int bootstrap_rank = -1;
  // The round's plan (RoundCommand.plan, sync.adaptive): its inner steps (0 =
  // the job's H) and codec (unset = the job's). Fragments, overlap and mixing
  // stay the job's; a streaming H must stay a multiple of the fragments.
  uint32_t inner_steps = 0;
  std::optional<sync_policies::Codec> codec;
  std::optional<uint32_t> overlap_steps;  // Streaming DiLoCo's tau (unset: the job's)
  // Time-budgeted round (kind diloco): the round ends after the inner step at
  // which this worker's compute is within half a step of the budget (every
  // worker of the region ends at the same step: they agree after each step), or
  // after max_inner_steps (0: inner_steps). The pseudo-gradient is then weighted
  // by the region's tokens over the mean over the regions (exchanged first; by
  // steps when a region reported no tokens).
  double compute_budget_seconds = 0;
  uint32_t max_inner_steps = 0;
  // Job-wide inner steps before this round (a rejoining trainer resumes its
  // schedule there); unset: (round - 1) x the job's H.
  std::optional<uint64_t> first_step;
};

struct RoundResult {
  std::string param_hash;   // ParameterHash(theta(t))
  double loss = 0;          // mean training loss of the round's inner steps
  double val_loss = 0;      // from the validation callback (0 without one)
  uint64_t tokens = 0;      // examples this worker trained on
  uint32_t inner_steps = 0; // steps the round ran
  uint64_t wan_bytes_sent = 0;
  double compute_seconds = 0, comm_seconds = 0, wall_seconds = 0;
};

// Validation loss of theta(t) (the callback may also read the local params).
using ValidationFn = std::function<Result<double>(std::span<const float> theta)>;

class ExchangeThread;

class RegionReplica {
 public:
  // theta(0) is `local`'s current content. `local` and `group` (and `inner`
  // and `mirror`, when given) must outlive the replica. With a mirror, `local`
  // is the host copy of parameters kept elsewhere (see ParameterMirror); a
  // mirror's failure fails the round that needed it, or the next one.
  static Result<std::unique_ptr<RegionReplica>> Create(ReplicaOptions options, std::span<float> local,
                                                       trainer::IntraRegionGroup& group, InnerState* inner = nullptr,
                                                       ParameterMirror* mirror = nullptr);
  ~RegionReplica();  // waits for an exchange in flight (bounded by its deadline)

  // Starts a round over `link` (this worker's piece of the cross-region group;
  // null only for "local"). A pending round without a verdict is rolled back.
  Status BeginRound(const RoundInputs& inputs, sync_policies::CollectiveLink* link);
  bool in_round() const { return round_.has_value(); }
  // Inner step s (1..H) is done: records its figures and runs the schedule's
  // actions for it. True when s was the round's last step (call EndRound): H,
  // or in a time-budgeted round the step that used up the budget (the last
  // step's actions run then).
  Result<bool> AfterInnerStep(float loss, uint64_t tokens, double compute_seconds);
  // Kind sync, between backward and the optimizer step of every inner step:
  // replaces `grad` (the region's mean gradient, the same in each of its
  // workers, as long as the parameters) with the mean over the round's regions;
  // this worker carries its shard over the WAN and the region all-gathers the
  // rest. A no-op for every other kind. On failure the round cannot commit:
  // AfterInnerStep is not to be called; end it with AbandonRound().
  Status AllReduceGradients(std::span<float> grad);
  bool averages_gradients() const { return schedule_->traits().averages_gradients; }
  Result<RoundResult> EndRound(const ValidationFn& validation = {});
  // Ends the current round without a result (restores the round's start).
  void AbandonRound();
  // The round's inner steps (time-budgeted: the most it may run; between
  // rounds: the steps the last committed round ran).
  uint32_t inner_steps() const { return round_ ? round_->steps : last_round_steps_; }
  uint32_t step_in_round() const { return round_ ? round_->step : 0; }

  // A whole round in one call: BeginRound, H x (inner_step(), AfterInnerStep),
  // EndRound. inner_step returns the step's loss and tokens.
  struct StepFigures {
    float loss = 0;
    uint64_t tokens = 0;
  };
  Result<RoundResult> Run(const RoundInputs& inputs, sync_policies::CollectiveLink* link,
                          const std::function<Result<StepFigures>()>& inner_step, const ValidationFn& validation = {});

  bool pending() const { return pending_.has_value(); }
  void Commit();
  void Rollback();

  std::span<const float> theta() const { return theta_; }
  const ShardLayout& layout() const { return layout_; }
  uint32_t committed_round() const { return committed_round_; }
  const ReplicaOptions& options() const { return options_; }

  // This worker's outer-optimizer state, its pieces fragment by fragment.
  std::vector<float> OuterState() const;
  // Replaces theta (and the local parameters) and this worker's outer state (as
  // OuterState returns it) before a round's first inner step. Every region must
  // load the same state, or the next commit's hashes disagree.
  Status LoadState(std::span<const float> theta, std::span<const float> outer_state);

  // Checkpoint tensors of theta and the full (gathered) outer state: a collective,
  // every worker of the region must call it; only rank 0 writes.
  Status WriteCheckpoint(const std::filesystem::path& path, std::map<std::string, std::string> metadata);
  // Loads theta (and this worker's pieces of the outer state) from a checkpoint
  // file written by WriteCheckpoint into theta and local; returns its round.
  Result<uint32_t> RestoreCheckpoint(const std::filesystem::path& path);
  // A start without a checkpoint: every worker of the region takes worker 0's
  // parameters (as DDP broadcasts rank 0's when it wraps a model), so the
  // region starts from one theta(0) whatever each worker built. Only worker
  // 0's count and hash travel when the workers agree. A collective of the
  // region group.
  Status StartFromWorkerZero();

 private:
  struct Saved {
    std::vector<float> theta, local;
    std::vector<std::vector<float>> outer;
  };
  // A fragment's cross-region exchange between its send and apply steps.
  struct InFlight {
    uint32_t fragment = 0;
    std::vector<float> delta;  // theta - local at send time; the mean after the all-reduce
    sync_policies::CollectiveStats stats;
    std::future<Status> done;
  };
  struct Round {
    RoundInputs inputs;
    uint32_t steps = 0;                             // H of this round (time-budgeted: the most it may run)
    double budget = 0;                              // compute seconds of a time-budgeted round (0: none)
    bool ended = false;                             // the last step is done
    sync_policies::CompressionOptions compression;  // its codec
    sync_policies::CollectiveLink* link = nullptr;
    Saved before;
    uint32_t step = 0;
    double loss_sum = 0;
    bool gradients_averaged = false;  // kind sync: AllReduceGradients ran for this step
    RoundResult result;
    std::chrono::steady_clock::time_point start;
  };
  RegionReplica(ReplicaOptions options, std::span<float> local, trainer::IntraRegionGroup& group, InnerState* inner,
                ParameterMirror* mirror, std::unique_ptr<sync_policies::SyncSchedule> schedule);
  // The mirror's copies (no-ops without one). LocalToHost skips a copy the
  // host already holds (no inner step since) and, while a copy back has
  // failed, pushes the host's parameters again instead of reading the device's
  // stale ones; LocalWrittenToDevice copies only after FinishFragmentSync or
  // AverageBuffers wrote local (or a copy back failed). LocalToDevice keeps its
  // failure for the next MirrorFailure() where its caller returns nothing, and
  // forgets it once a copy back succeeds.
  Status LocalToHost();
  Status LocalToDevice();
  Status LocalWrittenToDevice();
  Status MirrorFailure();
  // The inner state's copy failure (InnerState::TakeFailure), naming `when`.
  Status InnerFailure(const char* when);
  // Fills `s` with the state a rollback returns to, into its existing buffers
  // (a released snapshot's, so that a round takes no fresh model-sized memory).
  void Snapshot(Saved& s);
  // Keeps a snapshot no longer needed as the next one's buffers.
  void Release(Saved&& s) { spare_ = std::move(s); }
  void Restore(const Saved& s);
  Status Bootstrap(const RoundInputs& in, sync_policies::CollectiveLink& link);
  // The job-wide inner steps before this round (the trainer of a region that
  // joins or restored a checkpoint goes on from there).
  uint64_t JobStepBefore(const RoundInputs& in) const;
  // Bootstrap of the inner optimizer's shared state (kind sync).
  Status BootstrapInnerState(const RoundInputs& in, sync_policies::CollectiveLink& link, Deadline deadline);
  // The schedule and its actions for a round of `steps` inner steps and `tau`
  // overlap steps.
  Status UseSchedule(uint32_t steps, uint32_t tau);
  Status RunActions(uint32_t step);
  // Send step: guard fragment f of (theta - local), start its cross-region
  // AllReduceMean on a background thread.
  Status StartFragmentSync(uint32_t f, sync_policies::CollectiveLink& link);
  // Time-budgeted round: scales `delta` by the region's tokens (steps, when a
  // region reported none) over the regions' mean (an all-reduce over `link`).
  Status WeightByTokens(Round& r, sync_policies::CollectiveLink& link, std::span<float> delta);
  // Apply step: wait for the all-reduce, outer step, gather; writes theta's
  // fragment and the (mixed) local fragment. Time spent waiting is comm time.
  Status FinishFragmentSync(RoundResult& result, double alpha);
  void DrainInFlight();
  // This worker's piece of a vector every worker of the region holds alike,
  // replaced by its mean over the round's regions (the worker's ring). Counts
  // the time and bytes in the round; fails unless every worker of the region
  // succeeded. `what` names the exchange in errors.
  Status MeanAcrossRegions(Round& r, std::span<float> piece, const sync_policies::CompressionOptions& compression,
                           Deadline deadline, const std::string& what, sync_policies::ErrorFeedback* feedback = nullptr);
  // Round end: the model buffers' mean over every worker of every region.
  Status AverageBuffers(Round& r);
  // Round end: the inner moments due this round, replaced by their mean over the regions.
  Status AverageInnerMoments(Round& r);
  // Where the model buffers start in the flat vector.
  size_t buffers_begin() const { return local_.size() - options_.buffers; }
  std::vector<trainer::TensorView> Tensors() const;

  ReplicaOptions options_;
  std::span<float> local_;
  trainer::IntraRegionGroup& group_;
  InnerState* inner_;
  ParameterMirror* mirror_;
  Status mirror_failure_;  // a LocalToDevice that failed where nobody could return it
  bool host_current_ = false;  // local holds the trainer's parameters (no inner step since the last copy)
  bool host_written_ = false;  // local was written since the last copy to the device
  bool device_stale_ = false;  // a copy back failed: local holds the right parameters, the device does not
  std::unique_ptr<sync_policies::SyncSchedule> schedule_;
  std::vector<std::vector<sync_policies::SyncAction>> actions_;  // by step 1..H (index 0 unused)
  uint32_t actions_steps_ = 0;                       // the H schedule_ and actions_ are for
  uint32_t actions_tau_ = 0;                         // and the overlap
  uint32_t last_round_steps_ = 0;                    // steps the last committed round ran
  uint32_t pending_round_steps_ = 0;                 // and the pending one
  ShardLayout layout_;
  std::vector<float> theta_;                         // global parameters
  std::vector<std::unique_ptr<sync_policies::OuterOptimizer>> outer_;  // one per fragment
  std::vector<sync_policies::PseudoGradientGuard> guards_;
  std::vector<sync_policies::ErrorFeedback> feedback_;
  std::optional<InFlight> in_flight_;                // at most one fragment exchange
  std::optional<Round> round_;                       // the round in progress
  std::optional<Saved> pending_;                     // state before the pending round
  Saved spare_;                                      // a released snapshot's buffers (Release)
  // Scratch kept across rounds and steps, so that the hot path takes no fresh
  // model-sized memory: a fragment's piece of theta, gradient or moments; the
  // intra-region gather's padded pieces; the last pseudo-gradient's buffer.
  // Held between rounds (what a round takes anyway; its peak is unchanged):
  // spare_ 2x the model plus the outer state, piece_ and delta_spare_ one
  // fragment's shard each, gather_scratch_ (W > 1) a fragment x (W+1)/W; with
  // top-k codecs also the error feedback's staged residual (one shard per
  // fragment) and, on the exchange thread, the sparse all-gather's sum and
  // decode scratch (two shards, thread_local).
  std::vector<float> piece_, gather_scratch_, delta_spare_;
  uint32_t committed_round_ = 0;
  bool restored_ = false;  // RestoreCheckpoint ran; the next BeginRound sets the trainer's step
  uint32_t pending_round_ = 0;
  // Started at the first exchange. Last, so that it is destroyed first: it
  // finishes an exchange in flight, which uses the members above, before they
  // go (the round's link is the owner's: Session destroys the replica first).
  std::unique_ptr<ExchangeThread> exchange_;
};

}  // namespace longhaul::worker
