#include "longhaul/region_agent/region_replica.h"

#include <algorithm>
#include <chrono>

#include "longhaul/common/checksum.h"
#include "longhaul/sync_policies/cross_region.h"

namespace longhaul::region_agent {
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

Result<std::unique_ptr<RegionReplica>> RegionReplica::Create(ReplicaOptions options, trainer::InnerTrainer& trainer,
                                                             trainer::IntraRegionGroup& group) {
  LONGHAUL_RETURN_IF_ERROR(options.schedule.Validate());
  LONGHAUL_RETURN_IF_ERROR(options.compression.Validate());
  LONGHAUL_RETURN_IF_ERROR(options.guard.Validate());
  auto schedule = sync_policies::SyncSchedule::Create(options.schedule);
  if (!schedule.ok()) return schedule.status();
  std::unique_ptr<RegionReplica> r(new RegionReplica(std::move(options), trainer, group, std::move(*schedule)));
  for (uint32_t f = 0; f < r->layout_.fragments(); ++f) {
    sync_policies::OuterOptimizerOptions outer = r->options_.outer;
    if (r->options_.schedule.kind == "sync") outer = {.name = "sgd", .lr = 1.0f, .momentum = 0.0f};
    auto opt = sync_policies::OuterOptimizer::Create(outer, r->layout_.Piece(f).size());
    if (!opt.ok()) return opt.status();
    r->outer_.push_back(std::move(*opt));
    r->guards_.emplace_back(r->options_.guard);
  }
  r->feedback_.resize(r->layout_.fragments());
  return r;
}

RegionReplica::RegionReplica(ReplicaOptions options, trainer::InnerTrainer& trainer, trainer::IntraRegionGroup& group,
                             std::unique_ptr<sync_policies::SyncSchedule> schedule)
    : options_(std::move(options)),
      trainer_(trainer),
      group_(group),
      schedule_(std::move(schedule)),
      layout_(trainer.model().num_params(), schedule_->fragments(), group.size(), group.rank()),
      theta_(trainer.model().params().begin(), trainer.model().params().end()) {}

RegionReplica::Saved RegionReplica::Snapshot() {
  Saved s;
  s.theta = theta_;
  auto params = trainer_.model().params();
  s.local.assign(params.begin(), params.end());
  auto& adam = trainer_.optimizer();
  s.adam_m.assign(adam.first_moment().begin(), adam.first_moment().end());
  s.adam_v.assign(adam.second_moment().begin(), adam.second_moment().end());
  s.adam_step = adam.step();
  for (auto& o : outer_) s.outer.emplace_back(o->state().begin(), o->state().end());
  return s;
}

void RegionReplica::Restore(const Saved& s) {
  theta_ = s.theta;
  std::copy(s.local.begin(), s.local.end(), trainer_.model().params().begin());
  auto& adam = trainer_.optimizer();
  std::copy(s.adam_m.begin(), s.adam_m.end(), adam.first_moment().begin());
  std::copy(s.adam_v.begin(), s.adam_v.end(), adam.second_moment().begin());
  adam.set_step(s.adam_step);
  for (size_t f = 0; f < outer_.size(); ++f) (void)outer_[f]->LoadState(s.outer[f]);
}

void RegionReplica::Commit() {
  if (!pending_) return;
  pending_.reset();
  committed_round_ = pending_round_;
}

void RegionReplica::Rollback() {
  if (!pending_) return;
  Restore(*pending_);
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
      LONGHAUL_RETURN_IF_ERROR(GatherFragment(group_, layout_, f, piece, theta_));
      if (!state.empty()) LONGHAUL_RETURN_IF_ERROR(outer_[f]->LoadState(state));
    }
  }
  if (in.this_region_joining) {
    std::copy(theta_.begin(), theta_.end(), trainer_.model().params().begin());
    // Its inner moments start fresh, but its learning-rate schedule continues
    // where the job is: a relaunched worker restarted warm-up and cosine decay
    // at step 0, so it trained at the peak rate while the others were near the
    // end of the decay (in the chaos tests that left the final loss 0.4-1.0
    // points further from an undisturbed run). Zero moments under this later
    // step's bias correction ramp the update up over ~10 steps: warm-up enough.
    auto& adam = trainer_.optimizer();
    const uint64_t job_step = uint64_t{in.round > 0 ? in.round - 1 : 0} * options_.schedule.inner_steps;
    if (adam.step() < job_step) adam.set_step(job_step);
  }
  return Status::Ok();
}

Status RegionReplica::StartFragmentSync(uint32_t f, sync_policies::CollectiveLink& link) {
  if (in_flight_) return Internal("fragment " + std::to_string(f) + " sent while fragment " +
                                  std::to_string(in_flight_->fragment) + " is still in flight");
  const ShardPiece p = layout_.Piece(f);
  auto local = trainer_.model().params();
  InFlight flight;
  flight.fragment = f;
  flight.delta.resize(p.size());
  for (size_t i = 0; i < flight.delta.size(); ++i) flight.delta[i] = theta_[p.begin + i] - local[p.begin + i];
  const Status guard = guards_[f].Check(options_.region, flight.delta);
  LONGHAUL_ASSIGN_OR_RETURN(bool all_guarded, AllRanksOk(group_, guard.ok()));
  if (!guard.ok()) return guard;
  if (!all_guarded) return Aborted("another worker of region " + options_.region + " rejected its pseudo-gradient");
  in_flight_ = std::move(flight);
  InFlight* job = &*in_flight_;
  const Deadline deadline = DeadlineAfter(options_.collective_timeout);
  job->done = std::async(std::launch::async, [this, job, &link, deadline] {
    return sync_policies::AllReduceMean(link, job->delta, options_.compression, deadline, &job->stats,
                                        &feedback_[job->fragment]);
  });
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
  std::vector<float> piece(theta_.begin() + static_cast<std::ptrdiff_t>(p.begin),
                           theta_.begin() + static_cast<std::ptrdiff_t>(p.end));
  LONGHAUL_RETURN_IF_ERROR(outer_[f]->TryStep(piece, flight.delta));
  LONGHAUL_RETURN_IF_ERROR(GatherFragment(group_, layout_, f, piece, theta_));
  auto global = Sub(theta_, p.fragment_begin, p.fragment_end);
  auto mine = trainer_.model().params().subspan(p.fragment_begin, p.fragment_end - p.fragment_begin);
  if (alpha == 0.0) {
    std::copy(global.begin(), global.end(), mine.begin());
    return Status::Ok();
  }
  return sync_policies::MixFragment(mine, global, alpha);
}

Status RegionReplica::SyncFragment(uint32_t f, sync_policies::CollectiveLink& link, RoundResult& result, double alpha) {
  LONGHAUL_RETURN_IF_ERROR(StartFragmentSync(f, link));
  return FinishFragmentSync(result, alpha);
}

Status RegionReplica::SyncStep(const std::vector<float>& before, sync_policies::CollectiveLink& link,
                               RoundResult& result) {
  // "sync": theta <- the parameters before the step; averaging (before - after)
  // and an SGD lr 1 outer step gives the mean of the regions' updated params.
  std::copy(before.begin(), before.end(), theta_.begin());
  return SyncFragment(0, link, result, 0.0);
}

Result<RoundResult> RegionReplica::Run(const RoundInputs& in, sync_policies::CollectiveLink* link) {
  if (pending_) Rollback();  // a new START without a verdict: the last round did not commit
  const std::string kind(schedule_->kind());
  if (kind != "local" && link == nullptr) return InvalidArgument("round of kind " + kind + " needs a cross-region link");
  const auto wall0 = SteadyClock::now();
  Saved before = Snapshot();
  RoundResult result;
  Status status = [&]() -> Status {
    if (in.any_joining && link != nullptr) LONGHAUL_RETURN_IF_ERROR(Bootstrap(in, *link));
    if (in.this_region_joining) before = Snapshot();  // the bootstrapped state is theta(t-1)
    const uint64_t tokens0 = trainer_.tokens();
    const uint32_t h = options_.schedule.inner_steps;
    double loss_sum = 0;
    std::vector<float> step_start;
    for (uint32_t s = 1; s <= h; ++s) {
      if (kind == "sync") step_start.assign(trainer_.model().params().begin(), trainer_.model().params().end());
      const auto t0 = SteadyClock::now();
      auto loss = trainer_.Step();
      result.compute_seconds += SecondsSince(t0);
      if (!loss.ok()) return loss.status().WithContext("inner step " + std::to_string(s));
      loss_sum += *loss;
      if (kind == "local") continue;
      for (const auto& action : schedule_->AfterStep(s)) {
        if (action.kind == sync_policies::SyncAction::kGradientAllReduce) {
          LONGHAUL_RETURN_IF_ERROR(SyncStep(step_start, *link, result));
        } else if (action.kind == sync_policies::SyncAction::kOuterSync) {
          LONGHAUL_RETURN_IF_ERROR(StartFragmentSync(static_cast<uint32_t>(action.fragment), *link));
        } else if (action.kind == sync_policies::SyncAction::kApplyFragment) {
          LONGHAUL_RETURN_IF_ERROR(FinishFragmentSync(result, schedule_->mixing_alpha()));
        }
      }
    }
    // The fragment sent at the round's last step would apply tau steps into the
    // next round; the round must end at an agreed theta(t), so it applies now.
    if (in_flight_) LONGHAUL_RETURN_IF_ERROR(FinishFragmentSync(result, schedule_->mixing_alpha()));
    if (kind == "local") std::copy(trainer_.model().params().begin(), trainer_.model().params().end(), theta_.begin());
    result.loss = h > 0 ? loss_sum / h : 0.0;
    result.tokens = trainer_.tokens() - tokens0;
    return Status::Ok();
  }();
  if (in_flight_) {  // a failure between send and apply: let the exchange end (bounded by its deadline)
    (void)in_flight_->done.get();
    in_flight_.reset();
    if (status.ok()) status = Internal("round ended with a fragment exchange still in flight");
  }
  if (!status.ok()) {
    Restore(before);
    return status;
  }
  result.param_hash = ParameterHash(theta_);
  if (group_.rank() == 0 && options_.validation_batches > 0) {
    result.val_loss = trainer_.ValidationLoss(theta_, options_.validation_batches);
  }
  result.wall_seconds = SecondsSince(wall0);
  pending_ = std::move(before);
  pending_round_ = in.round;
  return result;
}

}  // namespace longhaul::region_agent
