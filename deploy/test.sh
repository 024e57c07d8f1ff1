#!/usr/bin/env bash
# The README's test command: installs missing Debian packages, builds everything
# (warnings are errors) and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGHAUL_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
# In-process tests run in parallel; tests that start processes, shape links and
# check rates or timeouts run one at a time so they do not starve each other.
ctest --test-dir "$BUILD_DIR" --output-on-failure -L unit -j "$(nproc)" "$@"
ctest --test-dir "$BUILD_DIR" --output-on-failure -LE unit "$@"
