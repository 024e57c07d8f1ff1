#include "longhaul/worker/region_replica.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "exchange_thread.h"
#include "longhaul/common/checksum.h"
#include "longhaul/sync_policies/cross_region.h"

namespace longhaul::worker {
namespace {

using SteadyClock = std::chrono::steady_clock;
double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

template <typename T>
std::span<T> Sub(std::vector<T>& v, size_t begin, size_t end) {
  return std::span<T>(v).subspan(begin, end - begin);
}

}  // namespace

Result<std::unique_ptr<RegionReplica>> RegionReplica::Create(ReplicaOptions options, std::span<float> local,
                                                             trainer::IntraRegionGroup& group, InnerState* inner,
                                                             ParameterMirror* mirror) {
  LONGHAUL_RETURN_IF_ERROR(options.schedule.Validate());
  LONGHAUL_RETURN_IF_ERROR(options.compression.Validate());
  LONGHAUL_RETURN_IF_ERROR(options.guard.Validate());
  if (local.empty()) return InvalidArgument("replica of region " + options.region + ": no parameters");
  if (options.buffers >= local.size()) {
    return InvalidArgument("replica of region " + options.region + ": " + std::to_string(options.buffers) +
                           " buffer floats leave none of the " + std::to_string(local.size()) + " for parameters");
  }
  size_t covered = 0;
  for (const auto& t : options.tensors) {
    if (t.offset != covered) {
      return InvalidArgument("tensor '" + t.name + "' starts at " + std::to_string(t.offset) + ", expected " +
                             std::to_string(covered) + " (tensors must tile the flat parameters in order)");
    }
    covered += t.numel;
  }
  if (!options.tensors.empty() && covered != local.size()) {
    return InvalidArgument("tensors cover " + std::to_string(covered) + " floats of " + std::to_string(local.size()));
  }
  auto schedule = sync_policies::SyncSchedule::Create(options.schedule);
  if (!schedule.ok()) return schedule.status();
  LONGHAUL_RETURN_IF_ERROR(options.moment_sync.Validate());
  if (options.moment_sync.enabled()) {
    const sync_policies::SyncKindTraits& kind = (*schedule)->traits();
    if (!kind.uses_outer_optimizer) {
      return InvalidArgument("replica of region " + options.region + ": kind " + std::string(kind.name) +
                             " does not average the inner moments (only the kinds with an outer step do)");
    }
    const size_t held = inner == nullptr ? 0 : inner->SharedState().size();
    if (held < options.moment_sync.buffers_needed()) {
      return InvalidArgument("replica of region " + options.region + ": the job averages the inner optimizer's " +
                             sync_policies::MomentSyncOptions::BufferName(options.moment_sync.buffers_needed() - 1) +
                             " across regions, and the worker gave " + std::to_string(held) +
                             " optimizer state buffer(s)");
    }
  }
  std::unique_ptr<RegionReplica> r(
      new RegionReplica(std::move(options), local, group, inner, mirror, std::move(*schedule)));
  for (uint32_t f = 0; f < r->layout_.fragments(); ++f) {
    sync_policies::OuterOptimizerOptions outer = r->options_.outer;
    // A kind without an outer optimizer takes the plain mean (theta - mean delta).
    if (!r->schedule_->traits().uses_outer_optimizer) outer = {.name = "sgd", .lr = 1.0f, .momentum = 0.0f};
    auto opt = sync_policies::OuterOptimizer::Create(outer, r->layout_.Piece(f).size());
    if (!opt.ok()) return opt.status();
    r->outer_.push_back(std::move(*opt));
    r->guards_.emplace_back(r->options_.guard);
  }
  r->feedback_.resize(r->layout_.fragments());
  LONGHAUL_RETURN_IF_ERROR(r->UseSchedule(r->options_.schedule.inner_steps, r->options_.schedule.overlap_steps));
  r->last_round_steps_ = r->options_.schedule.inner_steps;
  return r;
}

Status RegionReplica::StartFromWorkerZero() {
  if (group_.size() <= 1) return Status::Ok();
  LONGHAUL_RETURN_IF_ERROR(LocalToHost());
  theta_.assign(local_.begin(), local_.end());
  // Worker 0's parameter count and hash first (16 bytes carried bit for bit in
  // four floats: the region group is Gloo's, whose broadcast copies bytes and
  // does no arithmetic): the parameters themselves go over the group only when some
  // worker's differ, and different counts are an error naming them.
  const uint64_t mine[2] = {theta_.size(), Checksum64(theta_.data(), theta_.size() * sizeof(float))};
  std::array<float, 4> zero{};
  std::memcpy(zero.data(), mine, sizeof(mine));
  LONGHAUL_RETURN_IF_ERROR(group_.Broadcast(zero, 0).WithContext("worker 0's parameter count and hash"));
  uint64_t theirs[2];
  std::memcpy(theirs, zero.data(), sizeof(theirs));
  std::array<float, 2> differ = {theirs[0] != mine[0] ? 1.0f : 0.0f, theirs[1] != mine[1] ? 1.0f : 0.0f};
  LONGHAUL_RETURN_IF_ERROR(group_.AllReduceMean(differ).WithContext("comparing the workers' initial parameters"));
  if (differ[0] > 0) {
    const std::string zero_has = "worker 0 holds " + std::to_string(theirs[0]) + " parameters";
    return InvalidArgument(
        "the workers of region " + options_.region + " hold different numbers of parameters: " + zero_has +
        (mine[0] != theirs[0] ? ", worker " + std::to_string(group_.rank()) + " " + std::to_string(mine[0])
                              : ", another worker a different number"));
  }
  if (differ[1] == 0) return Status::Ok();
  LONGHAUL_RETURN_IF_ERROR(group_.Broadcast(theta_, 0).WithContext("taking worker 0's initial parameters"));
  std::copy(theta_.begin(), theta_.end(), local_.begin());
  return LocalToDevice();
}

Status RegionReplica::UseSchedule(uint32_t steps, uint32_t tau) {
  if (steps == actions_steps_ && tau == actions_tau_ && !actions_.empty()) return Status::Ok();
  sync_policies::ScheduleOptions o = options_.schedule;
  o.inner_steps = steps;
  o.overlap_steps = tau;
  auto schedule = sync_policies::SyncSchedule::Create(o);
  if (!schedule.ok()) {
    return schedule.status().WithContext("round plan of " + std::to_string(steps) + " inner steps, overlap " +
                                         std::to_string(tau));
  }
  schedule_ = std::move(*schedule);
  // The schedule's actions by step, asked once: the per-step call must be cheap
  // (a user's step() between two optimizer steps should cost microseconds).
  actions_.assign(steps + 1, {});
  if (schedule_->traits().needs_link) {
    for (uint32_t st = 1; st <= steps; ++st) actions_[st] = schedule_->AfterStep(st);
  }
  actions_steps_ = steps;
  actions_tau_ = tau;
  return Status::Ok();
}

RegionReplica::RegionReplica(ReplicaOptions options, std::span<float> local, trainer::IntraRegionGroup& group,
                             InnerState* inner, ParameterMirror* mirror,
                             std::unique_ptr<sync_policies::SyncSchedule> schedule)
    : options_(std::move(options)),
      local_(local),
      group_(group),
      inner_(inner),
      mirror_(mirror),
      schedule_(std::move(schedule)),
      layout_(local.size(), schedule_->fragments(), group.size(), group.rank()),
      theta_(local.begin(), local.end()) {}

RegionReplica::~RegionReplica() = default;

void RegionReplica::Snapshot(Saved& s) {
  s.theta.assign(theta_.begin(), theta_.end());
  s.local.assign(local_.begin(), local_.end());
  s.outer.resize(outer_.size());
  for (size_t f = 0; f < outer_.size(); ++f) s.outer[f].assign(outer_[f]->state().begin(), outer_[f]->state().end());
  if (inner_ != nullptr) inner_->Save();
}

void RegionReplica::Restore(const Saved& s) {
  theta_ = s.theta;
  std::copy(s.local.begin(), s.local.end(), local_.begin());
  (void)LocalToDevice();  // a failure is kept for the next round
  for (size_t f = 0; f < outer_.size(); ++f) (void)outer_[f]->LoadState(s.outer[f]);
  if (inner_ != nullptr) inner_->Restore();
}

Status RegionReplica::LocalToHost() {
  if (mirror_ == nullptr || host_current_) return Status::Ok();
  // After a failed copy back the host copy is the right one: push it again
  // rather than read back the device's stale parameters.
  if (device_stale_) return LocalToDevice();
  LONGHAUL_RETURN_IF_ERROR(mirror_->ToHost().WithContext("copying the parameters to the host"));
  host_current_ = true;
  return Status::Ok();
}

Status RegionReplica::LocalToDevice() {
  if (mirror_ == nullptr) return Status::Ok();
  Status s = mirror_->ToDevice().WithContext("copying the parameters back from the host");
  if (!s.ok()) {
    device_stale_ = true;
    if (mirror_failure_.ok()) mirror_failure_ = s;
    return s;
  }
  device_stale_ = false;
  mirror_failure_ = Status::Ok();  // the device holds the host's parameters again
  host_current_ = true;
  host_written_ = false;
  return Status::Ok();
}

Status RegionReplica::LocalWrittenToDevice() {
  return host_written_ || device_stale_ ? LocalToDevice() : Status::Ok();
}

Status RegionReplica::InnerFailure(const char* when) {
  if (inner_ == nullptr) return Status::Ok();
  return inner_->TakeFailure().WithContext(when);
}

Status RegionReplica::MirrorFailure() { return std::exchange(mirror_failure_, Status::Ok()); }

void RegionReplica::Commit() {
  if (!pending_) return;
  Release(std::move(*pending_));
  pending_.reset();
  committed_round_ = pending_round_;
  last_round_steps_ = pending_round_steps_;
}

void RegionReplica::Rollback() {
  if (!pending_) return;
  Restore(*pending_);
  Release(std::move(*pending_));
  pending_.reset();
}

Status RegionReplica::Bootstrap(const RoundInputs& in, sync_policies::CollectiveLink& link) {
  if (in.bootstrap_rank < 0 || in.bootstrap_rank >= link.world_size()) {
    return InvalidArgument("bootstrap region rank " + std::to_string(in.bootstrap_rank) + " is not a participant");
  }
  const Deadline deadline = DeadlineAfter(options_.collective_timeout);
  for (uint32_t f = 0; f < layout_.fragments(); ++f) {
    const ShardPiece p = layout_.Piece(f);
    // Live regions relay into scratch copies: only a joining region adopts the data.
    std::vector<float> piece(theta_.begin() + static_cast<std::ptrdiff_t>(p.begin),
                             theta_.begin() + static_cast<std::ptrdiff_t>(p.end));
    LONGHAUL_RETURN_IF_ERROR(sync_policies::Broadcast(link, in.bootstrap_rank, piece, deadline).WithContext("bootstrap theta"));
    std::vector<float> state(outer_[f]->state().begin(), outer_[f]->state().end());
    if (!state.empty()) {
      LONGHAUL_RETURN_IF_ERROR(sync_policies::Broadcast(link, in.bootstrap_rank, state, deadline).WithContext("bootstrap outer state"));
    }
    if (in.this_region_joining) {
      LONGHAUL_RETURN_IF_ERROR(GatherFragment(group_, layout_, f, piece, theta_, gather_scratch_));
      if (!state.empty()) LONGHAUL_RETURN_IF_ERROR(outer_[f]->LoadState(state));
    }
  }
  if (averages_gradients()) LONGHAUL_RETURN_IF_ERROR(BootstrapInnerState(in, link, deadline));
  if (in.this_region_joining) {
    std::copy(theta_.begin(), theta_.end(), local_.begin());
    LONGHAUL_RETURN_IF_ERROR(LocalToDevice());
    if (averages_gradients() && inner_ != nullptr) {
      inner_->SharedStateWritten();
      LONGHAUL_RETURN_IF_ERROR(InnerFailure("writing the inner optimizer state"));
    }
    // The trainer continues where the job is (its learning-rate schedule above
    // all): a relaunched worker that restarted warm-up and decay at step 0
    // trained at the peak rate while the others were near the end of the decay.
    if (inner_ != nullptr) inner_->Rejoined(JobStepBefore(in));
  }
  return Status::Ok();
}

uint64_t RegionReplica::JobStepBefore(const RoundInputs& in) const {
  return in.first_step.value_or(uint64_t{in.round > 0 ? in.round - 1 : 0} * options_.schedule.inner_steps);
}

Status RegionReplica::BootstrapInnerState(const RoundInputs& in, sync_policies::CollectiveLink& link,
                                          Deadline deadline) {
  if (inner_ == nullptr) return Status::Ok();
  const ShardPiece p = layout_.Piece(0);
  const std::vector<std::span<float>> shared = inner_->SharedState();
  LONGHAUL_RETURN_IF_ERROR(InnerFailure("reading the inner optimizer state"));
  for (std::span<float> state : shared) {
    if (state.size() != local_.size()) {
      return Internal("inner optimizer state of " + std::to_string(state.size()) + " floats for " +
                      std::to_string(local_.size()) + " parameters");
    }
    std::vector<float> piece(state.begin() + static_cast<std::ptrdiff_t>(p.begin),
                             state.begin() + static_cast<std::ptrdiff_t>(p.end));
    LONGHAUL_RETURN_IF_ERROR(
        sync_policies::Broadcast(link, in.bootstrap_rank, piece, deadline).WithContext("bootstrap inner optimizer state"));
    if (in.this_region_joining) LONGHAUL_RETURN_IF_ERROR(GatherFragment(group_, layout_, 0, piece, state, gather_scratch_));
  }
  return Status::Ok();
}

Status RegionReplica::AllReduceGradients(std::span<float> grad) {
  if (!averages_gradients()) return Status::Ok();
  if (!round_) return FailedPrecondition("gradient all-reduce outside a round");
  if (grad.size() != local_.size()) {
    return InvalidArgument("gradient of " + std::to_string(grad.size()) + " floats for " +
                           std::to_string(local_.size()) + " parameters");
  }
  Round& r = *round_;
  const uint32_t step = r.step + 1;
  // Buffers are not trained: whatever the caller left there is no gradient.
  std::fill(grad.begin() + static_cast<std::ptrdiff_t>(buffers_begin()), grad.end(), 0.0f);
  const ShardPiece p = layout_.Piece(0);
  std::vector<float>& piece = piece_;
  piece.assign(grad.begin() + static_cast<std::ptrdiff_t>(p.begin), grad.begin() + static_cast<std::ptrdiff_t>(p.end));
  // A non-finite gradient would poison every region's replica: refused before the WAN.
  const size_t bad = sync_policies::FirstNonFinite(piece);
  LONGHAUL_ASSIGN_OR_RETURN(bool all_finite, AllRanksOk(group_, bad == piece.size()));
  if (bad < piece.size()) {
    return InvalidArgument("region " + options_.region + ": gradient value " + std::to_string(p.begin + bad) +
                           " is not finite at inner step " + std::to_string(step));
  }
  if (!all_finite) return Aborted("another worker of region " + options_.region + " has a non-finite gradient");
  LONGHAUL_RETURN_IF_ERROR(MeanAcrossRegions(r, piece, r.compression, DeadlineAfter(options_.collective_timeout),
                                             "gradient all-reduce at inner step " + std::to_string(step), &feedback_[0]));
  LONGHAUL_RETURN_IF_ERROR(GatherFragment(group_, layout_, 0, piece, grad, gather_scratch_));
  r.gradients_averaged = true;
  return Status::Ok();
}

Status RegionReplica::StartFragmentSync(uint32_t f, sync_policies::CollectiveLink& link) {
  if (in_flight_) return Internal("fragment " + std::to_string(f) + " sent while fragment " +
                                  std::to_string(in_flight_->fragment) + " is still in flight");
  const ShardPiece p = layout_.Piece(f);
  InFlight flight;
  flight.fragment = f;
  flight.delta = std::move(delta_spare_);  // the last fragment's buffer: no fresh memory
  flight.delta.resize(p.size());
  for (size_t i = 0; i < flight.delta.size(); ++i) flight.delta[i] = theta_[p.begin + i] - local_[p.begin + i];
  // Buffers take no outer step: a zero pseudo-gradient leaves theta's exactly
  // as it was (AverageBuffers sets them at the round's end).
  for (size_t i = std::max(p.begin, buffers_begin()); i < p.end; ++i) flight.delta[i - p.begin] = 0.0f;
  const Status guard = guards_[f].Check(options_.region, flight.delta);
  LONGHAUL_ASSIGN_OR_RETURN(bool all_guarded, AllRanksOk(group_, guard.ok()));
  if (!guard.ok()) return guard;
  if (!all_guarded) return Aborted("another worker of region " + options_.region + " rejected its pseudo-gradient");
  if (round_ && round_->budget > 0) LONGHAUL_RETURN_IF_ERROR(WeightByTokens(*round_, link, flight.delta));
  in_flight_ = std::move(flight);
  InFlight* job = &*in_flight_;
  const Deadline deadline = DeadlineAfter(options_.collective_timeout);
  if (!exchange_) exchange_ = std::make_unique<ExchangeThread>();  // kinds without exchanges start none
  job->done = exchange_->Run([this, job, &link, deadline, compression = round_->compression] {
    return sync_policies::AllReduceMean(link, job->delta, compression, deadline, &job->stats,
                                        &feedback_[job->fragment]);
  });
  return Status::Ok();
}

Status RegionReplica::WeightByTokens(Round& r, sync_policies::CollectiveLink& link, std::span<float> delta) {
  // [tokens, steps, 1 if no tokens were reported]: first the mean over the
  // region's workers (every worker of a region then holds the same figures),
  // then over the regions; the all-reduce leaves the same bytes everywhere, so
  // every region divides by the same mean and the mean of the weighted deltas
  // is sum(w x delta) / sum(w), identical in every replica. A region that
  // reported no tokens (an SDK step without them) makes every region weigh by
  // steps instead.
  std::vector<float> figures = {static_cast<float>(r.result.tokens), static_cast<float>(r.step),
                                r.result.tokens == 0 ? 1.0f : 0.0f};
  if (group_.size() > 1) {
    LONGHAUL_RETURN_IF_ERROR(group_.AllReduceMean(figures).WithContext("intra-region mean of the round's tokens"));
  }
  std::vector<float> mean = figures;
  const auto t0 = SteadyClock::now();
  const Status reduce = sync_policies::AllReduceMean(link, mean, {.codec = sync_policies::Codec::kFp32},
                                                     DeadlineAfter(options_.collective_timeout));
  r.result.comm_seconds += SecondsSince(t0);
  LONGHAUL_RETURN_IF_ERROR(reduce.WithContext("cross-region mean of the round's tokens"));
  const size_t by = mean[2] > 0 ? 1 : 0;  // steps when some region reported no tokens
  if (!(mean[by] > 0)) return Internal("the regions' mean " + std::string(by ? "step" : "token") + " count is 0");
  const float weight = figures[by] / mean[by];
  for (float& x : delta) x *= weight;
  return Status::Ok();
}

Status RegionReplica::FinishFragmentSync(RoundResult& result, double alpha) {
  if (!in_flight_) return Internal("apply step without a fragment in flight");
  const auto t0 = SteadyClock::now();
  const Status reduce = in_flight_->done.get();
  result.comm_seconds += SecondsSince(t0);
  InFlight flight = std::move(*in_flight_);
  in_flight_.reset();
  const uint32_t f = flight.fragment;
  result.wan_bytes_sent += flight.stats.bytes_sent;
  LONGHAUL_ASSIGN_OR_RETURN(bool all_reduced, AllRanksOk(group_, reduce.ok()));
  if (!reduce.ok()) return reduce.WithContext("cross-region all-reduce of fragment " + std::to_string(f));
  if (!all_reduced) return Aborted("another worker of region " + options_.region + " failed its cross-region all-reduce");

  const ShardPiece p = layout_.Piece(f);
  std::vector<float>& piece = piece_;
  piece.assign(theta_.begin() + static_cast<std::ptrdiff_t>(p.begin), theta_.begin() + static_cast<std::ptrdiff_t>(p.end));
  LONGHAUL_RETURN_IF_ERROR(outer_[f]->TryStep(piece, flight.delta, round_ ? round_->inputs.round : 0));
  delta_spare_ = std::move(flight.delta);
  LONGHAUL_RETURN_IF_ERROR(GatherFragment(group_, layout_, f, piece, theta_, gather_scratch_));
  // The local buffers keep training's running values until the round's end.
  const size_t end = std::min(p.fragment_end, buffers_begin());
  if (p.fragment_begin >= end) return Status::Ok();
  auto global = Sub(theta_, p.fragment_begin, end);
  auto mine = local_.subspan(p.fragment_begin, end - p.fragment_begin);
  host_written_ = true;
  if (alpha == 0.0) {
    std::copy(global.begin(), global.end(), mine.begin());
    return Status::Ok();
  }
  return sync_policies::MixFragment(mine, global, alpha);
}

Status RegionReplica::MeanAcrossRegions(Round& r, std::span<float> piece,
                                        const sync_policies::CompressionOptions& compression, Deadline deadline,
                                        const std::string& what, sync_policies::ErrorFeedback* feedback) {
  const auto t0 = SteadyClock::now();
  sync_policies::CollectiveStats stats;
  const Status reduce = sync_policies::AllReduceMean(*r.link, piece, compression, deadline, &stats, feedback);
  r.result.comm_seconds += SecondsSince(t0);
  r.result.wan_bytes_sent += stats.bytes_sent;
  LONGHAUL_ASSIGN_OR_RETURN(bool all_reduced, AllRanksOk(group_, reduce.ok()));
  if (!reduce.ok()) return reduce.WithContext("cross-region " + what);
  if (!all_reduced) return Aborted("another worker of region " + options_.region + " failed its cross-region " + what);
  return Status::Ok();
}

Status RegionReplica::AverageBuffers(Round& r) {
  if (options_.buffers == 0 || !schedule_->traits().replicas_identical) return Status::Ok();
  std::span<float> mine = local_.subspan(buffers_begin());
  host_written_ = true;
  // Every worker of the region ends with the region's mean, then every worker
  // carries the whole (small) buffer vector over its own ring: identical inputs
  // in a region, identical results everywhere.
  LONGHAUL_RETURN_IF_ERROR(group_.AllReduceMean(mine).WithContext("intra-region mean of the model buffers"));
  LONGHAUL_RETURN_IF_ERROR(MeanAcrossRegions(r, mine, {.codec = sync_policies::Codec::kFp32},
                                             DeadlineAfter(options_.collective_timeout), "mean of the model buffers"));
  std::copy(mine.begin(), mine.end(), theta_.begin() + static_cast<std::ptrdiff_t>(buffers_begin()));
  return Status::Ok();
}

Status RegionReplica::AverageInnerMoments(Round& r) {
  if (!options_.moment_sync.enabled() || inner_ == nullptr) return Status::Ok();
  bool due = false;
  for (size_t b = 0; b < options_.moment_sync.buffers_needed(); ++b) due |= options_.moment_sync.Due(b, r.inputs.round);
  if (!due) return Status::Ok();
  std::vector<std::span<float>> state = inner_->SharedState();
  LONGHAUL_RETURN_IF_ERROR(InnerFailure("reading the inner optimizer state"));
  const Deadline deadline = DeadlineAfter(options_.collective_timeout);
  for (size_t b = 0; b < state.size(); ++b) {
    if (!options_.moment_sync.Due(b, r.inputs.round)) continue;
    const char* name = sync_policies::MomentSyncOptions::BufferName(b);
    if (state[b].size() != local_.size()) {
      return Internal(std::string("inner ") + name + " of " + std::to_string(state[b].size()) + " floats for " +
                      std::to_string(local_.size()) + " parameters");
    }
    // The region's workers hold the same moments: each carries its pieces
    // over its ring, the region all-gathers the means.
    for (uint32_t f = 0; f < layout_.fragments(); ++f) {
      const ShardPiece p = layout_.Piece(f);
      std::vector<float>& piece = piece_;
      piece.assign(state[b].begin() + static_cast<std::ptrdiff_t>(p.begin),
                   state[b].begin() + static_cast<std::ptrdiff_t>(p.end));
      LONGHAUL_RETURN_IF_ERROR(MeanAcrossRegions(r, piece, {.codec = sync_policies::Codec::kBf16}, deadline,
                                                 std::string("mean of the inner ") + name));
      LONGHAUL_RETURN_IF_ERROR(GatherFragment(group_, layout_, f, piece, state[b], gather_scratch_));
    }
  }
  inner_->SharedStateWritten();
  return InnerFailure("writing the inner optimizer state");
}

void RegionReplica::DrainInFlight() {
  if (!in_flight_) return;
  (void)in_flight_->done.get();  // bounded by its deadline
  delta_spare_ = std::move(in_flight_->delta);
  in_flight_.reset();
}

Status RegionReplica::BeginRound(const RoundInputs& in, sync_policies::CollectiveLink* link) {
  if (round_) AbandonRound();
  if (pending_) Rollback();  // a new START without a verdict: the last round did not commit
  const sync_policies::SyncKindTraits& kind = schedule_->traits();
  if (kind.needs_link && link == nullptr)
    return InvalidArgument("round of kind " + std::string(kind.name) + " needs a cross-region link");
  // The round's plan: checked before anything changes, so a bad one fails the
  // round's start and leaves the replica as it was.
  uint32_t steps = in.inner_steps != 0 ? in.inner_steps : options_.schedule.inner_steps;
  if (in.compute_budget_seconds > 0) {
    if (schedule_->traits().kind != sync_policies::SyncKind::kDiLoCo)
      return InvalidArgument("round plan: a time-budgeted round needs kind diloco, the job runs " +
                             std::string(schedule_->traits().name));
    if (!std::isfinite(in.compute_budget_seconds))
      return InvalidArgument("round plan: compute budget is not finite");
    steps = std::max(steps, in.max_inner_steps);
  }
  sync_policies::CompressionOptions compression = options_.compression;
  if (in.codec) compression.codec = *in.codec;
  LONGHAUL_RETURN_IF_ERROR(compression.Validate().WithContext("round plan"));
  LONGHAUL_RETURN_IF_ERROR(UseSchedule(steps, in.overlap_steps.value_or(options_.schedule.overlap_steps)));
  LONGHAUL_RETURN_IF_ERROR(MirrorFailure());
  host_current_ = false;  // whatever the trainer did between rounds
  LONGHAUL_RETURN_IF_ERROR(LocalToHost());
  Round r;
  r.start = SteadyClock::now();
  r.inputs = in;
  r.steps = steps;
  r.budget = in.compute_budget_seconds;
  r.compression = compression;
  r.link = link;
  r.before = std::move(spare_);
  Snapshot(r.before);
  if (Status s = InnerFailure("saving the inner optimizer state"); !s.ok()) {
    Release(std::move(r.before));
    return s;
  }
  if (in.any_joining && link != nullptr) {
    Status s = Bootstrap(in, *link);
    if (!s.ok()) {
      Restore(r.before);
      Release(std::move(r.before));
      return s;
    }
    if (in.this_region_joining) Snapshot(r.before);  // the bootstrapped state is theta(t-1)
  }
  if (restored_) {
    // Restored from a checkpoint: like a joining region, the trainer goes on
    // where the job is (its learning-rate schedule), not from step 0.
    if (inner_ != nullptr) inner_->Rejoined(JobStepBefore(in));
    restored_ = false;
  }
  round_ = std::move(r);
  return Status::Ok();
}

Status RegionReplica::RunActions(uint32_t step) {
  Round& r = *round_;
  for (const auto& action : actions_[step]) {
    if (action.kind == sync_policies::SyncAction::kGradientAllReduce) {
      // The exchange itself ran in AllReduceGradients, before the optimizer step.
      if (!r.gradients_averaged) {
        return FailedPrecondition(
            "kind sync averages the gradients of every inner step across regions, and this step's were not: "
            "call the session's gradient all-reduce between backward and the optimizer step (C: "
            "lh_session_sync_gradients, Python: DiLoCo.sync_gradients())");
      }
      r.gradients_averaged = false;
    } else if (action.kind == sync_policies::SyncAction::kOuterSync) {
      LONGHAUL_RETURN_IF_ERROR(StartFragmentSync(static_cast<uint32_t>(action.fragment), *r.link));
    } else if (action.kind == sync_policies::SyncAction::kApplyFragment) {
      LONGHAUL_RETURN_IF_ERROR(FinishFragmentSync(r.result, schedule_->mixing_alpha()));
    }
  }
  return Status::Ok();
}

Result<bool> RegionReplica::AfterInnerStep(float loss, uint64_t tokens, double compute_seconds) {
  if (!round_) return FailedPrecondition("inner step outside a round");
  Round& r = *round_;
  if (r.ended || r.step >= r.steps) return FailedPrecondition("inner step past the round's last step");
  host_current_ = false;  // the trainer stepped
  ++r.step;
  r.loss_sum += loss;
  r.result.tokens += tokens;
  r.result.compute_seconds += compute_seconds;
  r.ended = r.step == r.steps;
  if (!r.ended && r.budget > 0) {
    // Within half a mean step of the budget: this step was the round's last.
    // The region's workers agree, so they run the same steps.
    const double mean = r.result.compute_seconds / r.step;
    auto go_on = AllRanksOk(group_, r.result.compute_seconds + mean / 2 < r.budget);
    if (!go_on.ok()) {
      AbandonRound();
      return go_on.status().WithContext("inner step " + std::to_string(r.step) + ": agreeing on the round's end");
    }
    r.ended = !*go_on;
  }
  // The schedule's last step's actions (the exchange) run at the round's last step.
  const auto& actions = actions_[r.ended ? r.steps : r.step];
  if (actions.empty()) return r.ended;
  // The exchanges read and write the parameters; the gradient's does not.
  const bool touches_params = std::any_of(actions.begin(), actions.end(), [](const sync_policies::SyncAction& a) {
    return a.kind != sync_policies::SyncAction::kGradientAllReduce;
  });
  Status s = touches_params ? LocalToHost() : Status::Ok();
  if (s.ok()) s = RunActions(r.ended ? r.steps : r.step);
  if (s.ok()) s = LocalWrittenToDevice();
  if (!s.ok()) {
    const uint32_t step = r.step;
    AbandonRound();
    return s.WithContext("inner step " + std::to_string(step));
  }
  return r.ended;
}

void RegionReplica::AbandonRound() {
  if (!round_) return;
  DrainInFlight();
  Restore(round_->before);
  Release(std::move(round_->before));
  round_.reset();
}

Result<RoundResult> RegionReplica::EndRound(const ValidationFn& validation) {
  if (!round_) return FailedPrecondition("no round to end");
  if (!round_->ended) {
    return FailedPrecondition("round ended after " + std::to_string(round_->step) + " of " +
                              std::to_string(round_->steps) + " inner steps");
  }
  Round& r = *round_;
  if (Status s = LocalToHost(); !s.ok()) {
    AbandonRound();
    return s;
  }
  // The fragment sent at the round's last step would apply tau steps into the
  // next round; the round must end at an agreed theta(t), so it applies now.
  if (in_flight_) {
    Status s = FinishFragmentSync(r.result, schedule_->mixing_alpha());
    if (!s.ok()) {
      AbandonRound();
      return s;
    }
  }
  if (Status s = AverageBuffers(r); !s.ok()) {
    AbandonRound();
    return s;
  }
  if (Status s = AverageInnerMoments(r); !s.ok()) {
    AbandonRound();
    return s;
  }
  if (Status s = LocalWrittenToDevice(); !s.ok()) {
    AbandonRound();
    return s;
  }
  // local: each region keeps its own; sync: every region took the same steps.
  if (schedule_->traits().theta_is_local) std::copy(local_.begin(), local_.end(), theta_.begin());
  RoundResult result = r.result;
  result.inner_steps = pending_round_steps_ = r.step;
  result.loss = r.step > 0 ? r.loss_sum / r.step : 0.0;
  result.param_hash = ParameterHash(theta_);
  if (validation) {
    auto v = validation(theta_);
    if (!v.ok()) {
      AbandonRound();
      return v.status().WithContext("validation");
    }
    result.val_loss = *v;
  }
  result.wall_seconds = SecondsSince(r.start);
  pending_ = std::move(r.before);
  pending_round_ = r.inputs.round;
  round_.reset();
  return result;
}

Result<RoundResult> RegionReplica::Run(const RoundInputs& inputs, sync_policies::CollectiveLink* link,
                                       const std::function<Result<StepFigures>()>& inner_step,
                                       const ValidationFn& validation) {
  LONGHAUL_RETURN_IF_ERROR(BeginRound(inputs, link));
  for (;;) {
    const auto t0 = SteadyClock::now();
    auto step = inner_step();
    if (!step.ok()) {
      const uint32_t s = round_->step + 1;
      AbandonRound();
      return step.status().WithContext("inner step " + std::to_string(s));
    }
    LONGHAUL_ASSIGN_OR_RETURN(bool last, AfterInnerStep(step->loss, step->tokens, SecondsSince(t0)));
    if (last) break;
  }
  return EndRound(validation);
}

}  // namespace longhaul::worker
