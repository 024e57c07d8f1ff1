#!/usr/bin/env bash
# Regenerates docs/results/convergence.{md,tsv,png} and convergence_sweep.tsv:
# builds, runs bench_convergence's full plan through the real processes (about
# 40 minutes on 2 cores: every policy's grid at 3 seeds, 5000 inner steps per
# run), and plots loss against WAN bytes. Extra arguments go to
# bench_convergence (e.g. --only H, --seeds 5).
set -euo pipefail
cd "$(dirname "$0")/../.."
./deploy/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target bench_convergence
"$BUILD_DIR/bin/bench_convergence" --out docs/results "$@"
bench/convergence/plot.sh docs/results
