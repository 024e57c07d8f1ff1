// The one table of job defaults (LevelDB's options.h style): every field a job
// spec may leave out, and the value it then has. The orchestrator fills them
// once, when it admits a job (and the YAML reader, so `longhaul submit` shows
// what will run); the spec it stores and assigns is complete, and agents,
// workers and the SDK read it as it is: nobody re-defaults downstream, so a
// value of 0 means 0. Fields where 0 is legal are proto3 `optional` (unset =
// the default); every other numeric field is invalid at 0, so 0 there = unset.
#pragma once

#include <cstdint>

#include "longhaul/sync_policies/sync_kind.h"
#include "longhaul/v1/control.pb.h"

namespace longhaul::proto::job_defaults {

inline constexpr char kName[] = "job";
inline constexpr char kModelPreset[] = "tiny";  // built-in trainer only
inline constexpr uint64_t kSeed = 1;
// `rounds` has no default: a job says how long it runs (0 is refused).
inline constexpr uint32_t kRegionCount = 3;       // without an explicit region list
inline constexpr uint32_t kMinRegions = 2;        // capped at the region count
inline constexpr uint32_t kWorkersPerRegion = 1;
inline constexpr uint32_t kCheckpointInterval = 0;  // never
inline constexpr uint32_t kWorkerExitGraceS = 60;   // after the job ends, before SIGTERM
inline constexpr v1::IntraRegion kIntraRegion = v1::INTRA_REGION_AUTO;  // NCCL where every worker can, else Gloo

// Data (the built-in trainer's default source; a command worker brings its own).
inline constexpr uint64_t kSyntheticSeed = 1234;
inline constexpr uint32_t kSyntheticBranching = 4;
inline constexpr uint32_t kSyntheticOrder = 1;
inline constexpr double kTextValidationFraction = 0.05;

// Inner optimizer (AdamW).
inline constexpr char kInnerName[] = "adamw";
inline constexpr double kInnerLr = 1e-2;
inline constexpr double kInnerWeightDecay = 0.0;
inline constexpr double kInnerBeta1 = 0.9;
inline constexpr double kInnerBeta2 = 0.95;
inline constexpr uint32_t kInnerWarmupSteps = 0;
inline constexpr uint32_t kInnerBatchSize = 8;
inline constexpr uint32_t kInnerFirstMomentSyncRounds = 0;   // never: each region keeps its own m
inline constexpr uint32_t kInnerSecondMomentSyncRounds = 0;  // never: each region keeps its own v

// Outer optimizer: DiLoCo's Nesterov lr 0.7, momentum 0.9.
inline constexpr char kOuterName[] = "nesterov";
inline constexpr double kOuterLr = 0.7;
inline constexpr double kOuterMomentum = 0.9;
// Its schedule over the rounds: none unless asked for.
inline constexpr uint32_t kOuterWarmupRounds = 0;
inline constexpr char kOuterLrDecay[] = "none";
inline constexpr double kOuterFinalLrFraction = 0.1;
inline constexpr uint32_t kOuterMomentumWarmupRounds = 0;
inline constexpr uint32_t kOuterMomentumRestartRounds = 0;

// Synchronisation.
inline constexpr sync_policies::SyncKind kSyncKind = sync_policies::SyncKind::kDiLoCo;
inline constexpr uint32_t kInnerSteps = 20;  // H
inline constexpr uint32_t kFragments = 1;
inline constexpr uint32_t kOverlapSteps = 0;
inline constexpr double kMixingAlpha = 0.5;

// Compression: the codec is the sync kind's default (sync_kind.h's table: int8
// for DiLoCo's pseudo-gradients, fp32 for `sync`, whose baseline is plain data
// parallelism, and for `local`, which sends nothing).
inline constexpr uint32_t kBlockSize = 256;
inline constexpr double kTopkFraction = 0.01;

}  // namespace longhaul::proto::job_defaults

namespace longhaul::proto {

// Fills every field `spec` leaves out from the table above; idempotent.
void FillJobDefaults(v1::JobSpec* spec);

}  // namespace longhaul::proto
