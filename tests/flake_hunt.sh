#!/usr/bin/env bash
# flake_hunt.sh [IDLE_RUNS] [STRESS_RUNS]: the integration suite (ctest -LE unit)
# IDLE_RUNS times in a row, then STRESS_RUNS times while stress-ng keeps every
# core busy (bounded: stress-ng stops itself, each run is under `timeout`).
# Folders of failing tests are kept (LONGHAUL_KEEP_TEST_DIRS) under
# $HUNT_DIR/<kind>-<n>/; a summary line per run goes to stdout, each run's
# ctest output to $HUNT_DIR/<kind>-<n>.log. Expects a built ./build. Nothing
# else may run a test suite meanwhile (one suite at a time on these machines).
set -uo pipefail
cd "$(dirname "$0")/.."
command -v stress-ng >/dev/null || { echo "flake_hunt: needs stress-ng (apt-get install -y stress-ng)"; exit 2; }
idle=${1:-5}
stress=${2:-3}
HUNT_DIR=${HUNT_DIR:-/tmp/lh-flake-hunt}
mkdir -p "$HUNT_DIR"
run() {  # kind n
  local log=$HUNT_DIR/$1-$2.log start rc
  start=$(date +%s)
  LONGHAUL_KEEP_TEST_DIRS=1 timeout 1800 ctest --test-dir build -LE unit --output-on-failure >"$log" 2>&1
  rc=$?
  echo "$1 run $2: exit $rc in $(( $(date +%s) - start )) s; $(grep -h 'tests passed' "$log")"
  grep -h '\*\*\*Failed\|\*\*\*Timeout' "$log" | sed 's/^/    /'
  if [ $rc -ne 0 ]; then mkdir -p "$HUNT_DIR/$1-$2" && mv /tmp/longhaul-test-* "$HUNT_DIR/$1-$2/" 2>/dev/null; fi
  rm -rf /tmp/longhaul-test-*
}
for i in $(seq 1 "$idle"); do run idle "$i"; done
for i in $(seq 1 "$stress"); do
  stress-ng --cpu "$(nproc)" --timeout 1500s >/dev/null 2>&1 &
  hog=$!
  run stress "$i"
  kill "$hog" 2>/dev/null
  wait "$hog" 2>/dev/null
done
