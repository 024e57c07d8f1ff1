// The sync kinds (job spec `sync.kind`): one enum and one table of what sets
// them apart. Callers ask the table (or SyncSchedule, which carries it), never
// compare names; the name is the job spec's and the wire's spelling.
#pragma once

#include <span>
#include <string_view>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/codec.h"

namespace longhaul::sync_policies {

enum class SyncKind { kDiLoCo, kStreamingDiLoCo, kSync, kLocal };

struct SyncKindTraits {
  SyncKind kind;
  std::string_view name;
  // Regions exchange data every round (a cross-region link is needed).
  bool needs_link;
  // Every region holds the same parameters at a round's end (the commit
  // compares their hashes); false only for local, whose regions diverge.
  bool replicas_identical;
  // The region's gradient is averaged across regions every inner step, between
  // backward and the optimizer step (synchronous data parallelism).
  bool averages_gradients;
  // theta(t) is the local parameters at the round's end (no outer step moved
  // them away: sync took identical steps everywhere, local keeps its own).
  bool theta_is_local;
  // The parameter vector may be split into fragments synced on staggered steps,
  // overlapped with compute and mixed with alpha.
  bool streams_fragments;
  // The outer optimizer the job spec names runs on the pseudo-gradient; false:
  // a plain mean (SGD, lr 1, no momentum) whatever the spec says.
  bool uses_outer_optimizer;
  // What a job that names no codec sends: int8 pseudo-gradients for DiLoCo,
  // fp32 for the data-parallel baseline (local sends nothing).
  Codec default_codec;
};

// Every kind, in the order of the enum.
std::span<const SyncKindTraits> SyncKinds();
const SyncKindTraits& Traits(SyncKind kind);
std::string_view SyncKindName(SyncKind kind);
// kInvalidArgument naming the accepted kinds.
Result<SyncKind> ParseSyncKind(std::string_view name);
// "diloco, streaming_diloco, sync, local".
std::string SyncKindNames();

}  // namespace longhaul::sync_policies
