#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/README.md) with Debian's clang 14 in their own
# build folder and runs each for a bounded time over a copy of its seed corpus.
# That build instruments everything with ASan + UBSan, so with FUZZ_UNIT_TESTS=1
# it also builds the unit tests and runs them first: CI's sanitizer pass is this
# one build, not a second one of its own.
#
#   fuzz/run.sh [build-dir]            default build dir: build-fuzz/ in the tree (ignored by git; kept for reuse)
#
# Environment:
#   FUZZ_SECONDS   seconds of fuzzing per target (default 20; 0 = only replay the seeds)
#   FUZZ_UNIT_TESTS  1 = also build the unit tests and run them (ctest -L unit) before fuzzing
#   FUZZ_TARGETS   space-separated subset (default: all six)
#   FUZZ_JOBS      build parallelism (default: nproc)
#   FUZZ_ARGS      extra libFuzzer flags (e.g. "-max_len=16384")
#   CC, CXX        compilers (default clang-14, clang++-14)
#
# Exits non-zero when a target fails to build, crashes, leaks, times out or runs out
# of memory. The reproducing input is kept in <build-dir>/fuzz-artifacts/<target>/;
# nothing is written to the source tree (the in-tree corpus is only read).
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$SRC/build-fuzz}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}
TARGETS=${FUZZ_TARGETS:-"frame_fuzz job_spec_fuzz codec_fuzz safetensors_fuzz control_fuzz agent_control_fuzz"}
JOBS=${FUZZ_JOBS:-$(nproc)}
UNIT_TESTS=${FUZZ_UNIT_TESTS:-0}
CC=${CC:-clang-14}
CXX=${CXX:-clang++-14}

if ! grep -q LONGHAUL_FUZZ "$SRC/CMakeLists.txt"; then
  echo "run.sh: the top-level CMakeLists.txt has no LONGHAUL_FUZZ option" >&2
  exit 2
fi
command -v "$CXX" >/dev/null || { echo "run.sh: $CXX not found (apt-get install clang-14)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/longhaul-fuzz-run-XXXXXX")
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

phase_start=$(date +%s)
phase() { echo "== phase: $1 took $(( $(date +%s) - phase_start )) s"; phase_start=$(date +%s); }
# -O1 without NDEBUG: asserts stay on; line tables keep stacks readable (file:line).
# Full -g made the same build (with the unit tests) take 598-645 s on 2 cores, not 481.
# The tests' own code is built at -O0 (the code under test stays at -O1): an
# instrumented test file took 11.4 s at -O1, 4.5 s at -O0.
cmake -S "$SRC" -B "$BUILD" -G Ninja \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DLONGHAUL_FUZZ=ON \
  -DLONGHAUL_TEST_OPTIMISATION=-O0 \
  -DLONGHAUL_CUDA=OFF -DLONGHAUL_TESTS="$([[ "$UNIT_TESTS" == 1 ]] && echo ON || echo OFF)" \
  -DLONGHAUL_BENCH=OFF -DLONGHAUL_WERROR=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON \
  >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log" >&2; echo "run.sh: configure failed" >&2; exit 2; }
# shellcheck disable=SC2086
cmake --build "$BUILD" --parallel "$JOBS" --target $TARGETS $([[ "$UNIT_TESTS" == 1 ]] && echo unit-tests)
phase "sanitizer build (clang)"

if [[ "$UNIT_TESTS" == 1 ]]; then
  # Leaks are the fuzz targets' check; the unit tests' processes may exit holding memory.
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$BUILD" -L unit --no-tests=error --output-on-failure -j "$JOBS"
  phase "unit tests under sanitizers"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

if [[ "$SECONDS_PER_TARGET" == 0 ]]; then
  MODE=(-runs=0)
else
  MODE=(-max_total_time="$SECONDS_PER_TARGET")
fi

failed=0
summary=()
for target in $TARGETS; do
  name=${target%_fuzz}
  seeds="$SRC/fuzz/corpus/$name"
  run="$WORK/$target"
  artifacts="$BUILD/fuzz-artifacts/$target"
  mkdir -p "$run/corpus" "$run/tmp" "$artifacts"
  [[ -d "$seeds" ]] && cp -r "$seeds/." "$run/corpus/"
  before=$(find "$artifacts" -type f | wc -l)
  echo "=== $target (${SECONDS_PER_TARGET}s)"
  set +e
  # shellcheck disable=SC2086
  (cd "$run" && TMPDIR="$run/tmp" "$BUILD/bin/$target" "${MODE[@]}" -timeout=5 -rss_limit_mb=2048 \
     -print_final_stats=1 -artifact_prefix="$artifacts/" ${FUZZ_ARGS:-} corpus) >"$run/log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -1)
  after=$(find "$artifacts" -type f | wc -l)
  crashes=$((after - before))
  if [[ $rc -ne 0 || $crashes -ne 0 ]]; then
    failed=1
    [[ $crashes -eq 0 ]] && crashes=1  # failed without an artifact (e.g. an abort in the harness)
    grep -E "ERROR|SUMMARY|invariant|runtime error|==[0-9]+==" "$run/log" | head -20 >&2 || true
    tail -40 "$run/log" >&2
    echo "$target: exit $rc; reproducers in $artifacts/" >&2
  fi
  summary+=("$(printf '%-20s executions %-10s crashes %s' "$target" "${execs:-?}" "$crashes")")
done

echo
echo "=== libFuzzer summary (build: $BUILD)"
printf '%s\n' "${summary[@]}"
phase "fuzzing"
exit $failed
