#!/usr/bin/env bash
# The README's test command: installs missing Debian packages, builds everything
# (warnings are errors) and runs the whole test suite with ctest. Prints the
# time of each phase. Every ctest run ends with the suite's own check that no
# process and no /tmp/longhaul-* folder was left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
phase_start=$(date +%s)
phase() { echo "== phase: $1 took $(( $(date +%s) - phase_start )) s"; phase_start=$(date +%s); }
./deploy/install-deps.sh
phase "install dependencies"
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGHAUL_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
phase "build"
# In-process tests run in parallel; tests that start processes, shape links and
# check rates or timeouts run one at a time so they do not starve each other.
ctest --test-dir "$BUILD_DIR" --output-on-failure -L unit -j "$(nproc)" "$@"
phase "unit tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure -LE unit "$@"
phase "integration tests"
