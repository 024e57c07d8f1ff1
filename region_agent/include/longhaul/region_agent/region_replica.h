// RegionReplica: one worker's share of the global model state and the round
// that advances it (DESIGN.md "The round").
//
// State: theta (the global parameters, full vector, identical in every worker of
// every region), the local parameters the inner trainer works on, and the
// outer-optimizer state of this worker's pieces (ShardLayout). Run() executes
// one round and leaves its result *pending*: Commit() adopts it once the
// orchestrator's verdict says committed; Rollback() restores theta(t-1), the
// outer state and the inner optimizer exactly (an aborted round leaves no trace).
//
// Kinds (the same machinery, one flag apart):
//  diloco            H inner steps; pseudo-gradient theta - local on each piece,
//                    guard, cross-region AllReduceMean (codec), outer step,
//                    intra-region all-gather; local <- theta(t).
//  streaming_diloco  P fragments synced on SyncSchedule's staggered steps, each
//                    as above for its pieces, then mixed into the local params
//                    with alpha. With overlap tau > 0 the fragment's cross-region
//                    all-reduce runs on a background thread while the next tau
//                    inner steps compute; the outer step and the mix happen at
//                    the apply step (the schedule keeps at most one fragment in
//                    flight, so the link has one user at a time). A fragment
//                    sent at the round's last step applies at the round's end.
//  sync              cross-region sync after EVERY inner step: each region's
//                    update (params before - after the AdamW step) is averaged
//                    and applied with outer SGD lr 1, momentum 0, i.e. all
//                    regions take the mean update. This equals gradient averaging
//                    for SGD; with AdamW each region keeps its own moments.
//  local             no cross-region sync; theta <- local (regions diverge).
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/common/timeouts.h"
#include "longhaul/region_agent/shard_layout.h"
#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/cross_region.h"
#include "longhaul/sync_policies/guard.h"
#include "longhaul/sync_policies/link.h"
#include "longhaul/sync_policies/outer_optimizer.h"
#include "longhaul/sync_policies/schedule.h"
#include "longhaul/trainer/checkpoint.h"
#include "longhaul/trainer/trainer.h"

namespace longhaul::region_agent {

struct ReplicaOptions {
  std::string region;
  sync_policies::ScheduleOptions schedule;
  sync_policies::OuterOptimizerOptions outer;
  sync_policies::CompressionOptions compression;
  sync_policies::GuardOptions guard;
  int validation_batches = 4;       // held-out batches for val_loss (rank 0 only)
  Duration collective_timeout{std::chrono::seconds(60)};
};

struct RoundInputs {
  uint32_t round = 0;
  uint64_t epoch = 0;
  // Bootstrap: when some participant is joining, every participant takes part in
  // a Broadcast from `bootstrap_rank` (ring rank of the live region) first.
  bool any_joining = false;
  bool this_region_joining = false;
  int bootstrap_rank = -1;
};

struct RoundResult {
  std::string param_hash;   // ParameterHash(theta(t))
  double loss = 0;          // mean training loss of the round's inner steps
  double val_loss = 0;      // rank 0 only (0 elsewhere)
  uint64_t tokens = 0;      // examples this worker trained on
  uint64_t wan_bytes_sent = 0;
  double compute_seconds = 0, comm_seconds = 0, wall_seconds = 0;
};

class RegionReplica {
 public:
  // theta(0) is the trainer's current parameters (InitParams(seed) or restored).
  static Result<std::unique_ptr<RegionReplica>> Create(ReplicaOptions options, trainer::InnerTrainer& trainer,
                                                       trainer::IntraRegionGroup& group);

  // One round over `link` (this worker's piece of the cross-region group; unused
  // by "local"). On error nothing changes (state is rolled back before returning).
  Result<RoundResult> Run(const RoundInputs& inputs, sync_policies::CollectiveLink* link);
  bool pending() const { return pending_.has_value(); }
  void Commit();
  void Rollback();

  std::span<const float> theta() const { return theta_; }
  const ShardLayout& layout() const { return layout_; }
  uint32_t committed_round() const { return committed_round_; }

  // Checkpoint tensors of theta and the full (gathered) outer state: a collective,
  // every worker of the region must call it; only rank 0 needs the result.
  Status WriteCheckpoint(const std::filesystem::path& path, std::map<std::string, std::string> metadata);
  // Loads theta (and this worker's pieces of the outer state) from a checkpoint
  // file written by WriteCheckpoint; returns the round it holds.
  Result<uint32_t> RestoreCheckpoint(const std::filesystem::path& path);

 private:
  struct Saved {
    std::vector<float> theta, local, adam_m, adam_v;
    uint64_t adam_step = 0;
    std::vector<std::vector<float>> outer;
  };
  RegionReplica(ReplicaOptions options, trainer::InnerTrainer& trainer, trainer::IntraRegionGroup& group,
                std::unique_ptr<sync_policies::SyncSchedule> schedule);
  Saved Snapshot();
  void Restore(const Saved& s);
  Status Bootstrap(const RoundInputs& in, sync_policies::CollectiveLink& link);
  // A fragment's cross-region exchange between its send and apply steps.
  struct InFlight {
    uint32_t fragment = 0;
    std::vector<float> delta;  // theta - local at send time; the mean after the all-reduce
    sync_policies::CollectiveStats stats;
    std::future<Status> done;
  };
  // Send step: guard fragment f of (theta - local), start its cross-region
  // AllReduceMean on a background thread.
  Status StartFragmentSync(uint32_t f, sync_policies::CollectiveLink& link);
  // Apply step: wait for the all-reduce, outer step, gather; writes theta's
  // fragment and the (mixed) local fragment. Time spent waiting is comm time.
  Status FinishFragmentSync(RoundResult& result, double alpha);
  Status SyncFragment(uint32_t f, sync_policies::CollectiveLink& link, RoundResult& result, double alpha);
  Status SyncStep(const std::vector<float>& before, sync_policies::CollectiveLink& link, RoundResult& result);

  ReplicaOptions options_;
  trainer::InnerTrainer& trainer_;
  trainer::IntraRegionGroup& group_;
  std::unique_ptr<sync_policies::SyncSchedule> schedule_;
  ShardLayout layout_;
  std::vector<float> theta_;                         // global parameters
  std::vector<std::unique_ptr<sync_policies::OuterOptimizer>> outer_;  // one per fragment
  std::vector<sync_policies::PseudoGradientGuard> guards_;
  std::vector<sync_policies::ErrorFeedback> feedback_;
  std::optional<InFlight> in_flight_;                // at most one fragment exchange
  std::optional<Saved> pending_;                     // state before the pending round
  uint32_t committed_round_ = 0;
  uint32_t pending_round_ = 0;
};

}  // namespace longhaul::region_agent
