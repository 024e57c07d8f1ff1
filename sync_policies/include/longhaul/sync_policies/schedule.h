// Sync schedules: the one question the trainer asks after each inner step,
// "what do I synchronise now?".
//
// Steps are counted from 1: AfterStep(s) is asked once s inner steps are done.
//  "sync"             kGradientAllReduce every step: the step's gradients are
//                     averaged across regions before the optimizer update (baseline).
//  "diloco"           every H steps: kOuterSync(0) then kApplyFragment(0) (the whole
//                     vector is fragment 0; the outer step is applied at once).
//  "streaming_diloco" P fragments, fragment p sent at steps s with
//                     s % H == ((p+1) * H/P) % H (staggered), and applied (received,
//                     outer step, mixed with factor alpha) tau steps later.
//  "local"            never synchronises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/sync_kind.h"

namespace longhaul::sync_policies {

struct SyncAction {
  enum Kind {
    kGradientAllReduce,  // average this step's gradients across regions
    kOuterSync,          // compute fragment's pseudo-gradient and start its all-reduce
    kApplyFragment,      // finish that all-reduce, outer step, mix into local params
  };
  Kind kind;
  int fragment;  // -1 for kGradientAllReduce
  bool operator==(const SyncAction&) const = default;
};

struct ScheduleOptions {
  SyncKind kind = SyncKind::kDiLoCo;
  uint32_t inner_steps = 50;    // H
  uint32_t fragments = 1;       // P (streaming_diloco; must divide H)
  uint32_t overlap_steps = 0;   // tau (streaming_diloco; tau < H/P)
  double mixing_alpha = 0.5;    // alpha in [0, 1] (streaming_diloco)
  Status Validate() const;
  const SyncKindTraits& traits() const { return Traits(kind); }
};

class SyncSchedule {
 public:
  virtual ~SyncSchedule() = default;
  static Result<std::unique_ptr<SyncSchedule>> Create(const ScheduleOptions& options);

  virtual std::vector<SyncAction> AfterStep(uint64_t step) const = 0;
  // What sets the schedule's kind apart (the sync-kind table's row).
  virtual const SyncKindTraits& traits() const = 0;
  SyncKind kind() const { return traits().kind; }
  // Number of fragments the parameter vector is split into (1 unless streaming).
  virtual uint32_t fragments() const { return 1; }
  // Weight of the local fragment when mixing (0: take the global one as is).
  virtual double mixing_alpha() const { return 0.0; }
};

// Fragment p of a flat vector of n floats, as the half-open range {begin, end}:
// contiguous, in order, sizes differing by at most one. fragments must be > 0
// and p < fragments.
std::pair<size_t, size_t> FragmentRange(size_t n, uint32_t fragments, uint32_t p);

// Streaming DiLoCo mixing: local <- alpha * local + (1 - alpha) * global.
// Sizes must match (InvalidArgument otherwise).
Status MixFragment(std::span<float> local, std::span<const float> global, double alpha);

}  // namespace longhaul::sync_policies
