#!/usr/bin/env bash
# The README's main command: installs missing Debian packages, builds, and runs
# the local multi-region demo (`longhaul demo`) with its embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
exec "$BUILD_DIR/bin/longhaul" demo "$@"
