#!/usr/bin/env bash
# Regenerates docs/results/convergence.{md,tsv,png}: builds, runs
# bench_convergence through the real processes (about 15 minutes on 2 cores),
# and plots loss against WAN bytes. Extra arguments go to bench_convergence.
set -euo pipefail
cd "$(dirname "$0")/../.."
./deploy/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target bench_convergence
"$BUILD_DIR/bin/bench_convergence" --out docs/results "$@"
bench/convergence/plot.sh docs/results
