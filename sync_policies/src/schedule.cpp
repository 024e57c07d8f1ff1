// The sync schedules behind SyncSchedule::Create.
#include "longhaul/sync_policies/schedule.h"

#include <cmath>
#include <string>

namespace longhaul::sync_policies {

Status ScheduleOptions::Validate() const {
  auto bad = [](const std::string& m) { return InvalidArgument("schedule." + m); };
  if (Traits(kind).kind != kind)  // a value outside the enum has no row (Traits falls back to the first)
    return bad("kind: unknown value " + std::to_string(static_cast<int>(kind)));
  if (inner_steps == 0) return bad("inner_steps must be > 0, got 0");
  if (!traits().streams_fragments) {
    if (fragments != 1)
      return bad("fragments must be 1 for " + std::string(SyncKindName(kind)) + ", got " + std::to_string(fragments) +
                 " (use streaming_diloco)");
    if (overlap_steps != 0)
      return bad("overlap_steps must be 0 for " + std::string(SyncKindName(kind)) + ", got " +
                 std::to_string(overlap_steps) + " (use streaming_diloco)");
    return Status::Ok();
  }
  if (fragments == 0) return bad("fragments must be > 0, got 0");
  if (inner_steps % fragments != 0)
    return bad("fragments (" + std::to_string(fragments) + ") must divide inner_steps (" + std::to_string(inner_steps) +
               ")");
  uint32_t stagger = inner_steps / fragments;
  if (overlap_steps >= stagger)
    return bad("overlap_steps must be < inner_steps / fragments = " + std::to_string(stagger) + ", got " +
               std::to_string(overlap_steps));
  if (!(mixing_alpha >= 0.0 && mixing_alpha <= 1.0) || !std::isfinite(mixing_alpha))
    return bad("mixing_alpha must be in [0, 1], got " + std::to_string(mixing_alpha));
  return Status::Ok();
}

namespace {

class SynchronousSchedule final : public SyncSchedule {
 public:
  std::vector<SyncAction> AfterStep(uint64_t step) const override {
    if (step == 0) return {};
    return {{SyncAction::kGradientAllReduce, -1}};
  }
  const SyncKindTraits& traits() const override { return Traits(SyncKind::kSync); }
};

class LocalSchedule final : public SyncSchedule {
 public:
  std::vector<SyncAction> AfterStep(uint64_t) const override { return {}; }
  const SyncKindTraits& traits() const override { return Traits(SyncKind::kLocal); }
};

// DiLoCo is streaming DiLoCo with one fragment, no overlap and no mixing.
class StreamingSchedule final : public SyncSchedule {
 public:
  StreamingSchedule(SyncKind kind, uint32_t h, uint32_t p, uint32_t tau, double alpha)
      : traits_(Traits(kind)), h_(h), p_(p), tau_(tau), alpha_(alpha) {}

  std::vector<SyncAction> AfterStep(uint64_t step) const override {
    std::vector<SyncAction> actions;
    if (step == 0) return actions;
    // Overlap ended: the fragment sent tau steps ago is applied before anything
    // new is sent (tau < H/P keeps at most one fragment in flight).
    if (tau_ > 0 && step > tau_) {
      int p = SentAt(step - tau_);
      if (p >= 0) actions.push_back({SyncAction::kApplyFragment, p});
    }
    int p = SentAt(step);
    if (p >= 0) {
      actions.push_back({SyncAction::kOuterSync, p});
      if (tau_ == 0) actions.push_back({SyncAction::kApplyFragment, p});
    }
    return actions;
  }
  const SyncKindTraits& traits() const override { return traits_; }
  uint32_t fragments() const override { return p_; }
  double mixing_alpha() const override { return alpha_; }

 private:
  // The fragment whose outer sync happens after `step`, or -1.
  int SentAt(uint64_t step) const {
    uint64_t stagger = h_ / p_;
    uint64_t phase = step % h_;  // fragment p at phase ((p + 1) * stagger) % H
    if (phase % stagger != 0) return -1;
    uint64_t slot = phase / stagger;  // 0 means the last fragment
    return static_cast<int>(slot == 0 ? p_ - 1 : slot - 1);
  }

  const SyncKindTraits& traits_;
  uint32_t h_, p_, tau_;
  double alpha_;
};

}  // namespace

Result<std::unique_ptr<SyncSchedule>> SyncSchedule::Create(const ScheduleOptions& options) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  switch (options.kind) {
    case SyncKind::kSync:
      return std::unique_ptr<SyncSchedule>(new SynchronousSchedule());
    case SyncKind::kLocal:
      return std::unique_ptr<SyncSchedule>(new LocalSchedule());
    case SyncKind::kDiLoCo:
      return std::unique_ptr<SyncSchedule>(new StreamingSchedule(SyncKind::kDiLoCo, options.inner_steps, 1, 0, 0.0));
    case SyncKind::kStreamingDiLoCo:
      break;
  }
  return std::unique_ptr<SyncSchedule>(new StreamingSchedule(SyncKind::kStreamingDiLoCo, options.inner_steps,
                                                             options.fragments, options.overlap_steps,
                                                             options.mixing_alpha));
}

std::pair<size_t, size_t> FragmentRange(size_t n, uint32_t fragments, uint32_t p) {
  if (fragments == 0 || p >= fragments) return {n, n};  // documented precondition; empty, never out of range
  size_t base = n / fragments, extra = n % fragments;
  size_t begin = p * base + std::min<size_t>(p, extra);
  return {begin, begin + base + (p < extra ? 1 : 0)};
}

Status MixFragment(std::span<float> local, std::span<const float> global, double alpha) {
  if (local.size() != global.size())
    return InvalidArgument("mixing a local fragment of " + std::to_string(local.size()) +
                           " floats with a global one of " + std::to_string(global.size()));
  if (!(alpha >= 0.0 && alpha <= 1.0))
    return InvalidArgument("mixing_alpha must be in [0, 1], got " + std::to_string(alpha));
  const float a = static_cast<float>(alpha), b = static_cast<float>(1.0 - alpha);
  for (size_t i = 0; i < local.size(); ++i) local[i] = a * local[i] + b * global[i];
  return Status::Ok();
}

}  // namespace longhaul::sync_policies
