#!/usr/bin/env bash
# On a machine with a CUDA GPU: builds with CUDA and NCCL and runs every test
# that needs a GPU (ctest label gpu), within a time limit. Fails when the build
# has no CUDA, or when a GPU test was skipped (no usable device) or failed:
# here a skip is a failure, since the point is to run them.
#
#   deploy/gpu-check.sh [build-dir]      default build-gpu/ (ignored by git)
#   GPU_CHECK_SECONDS (default 900), GPU_CHECK_CUDA_ARCHS (default native: the GPUs present)
#
# The gpu label covers the kernels and groups, the device-resident trainer
# against the host one, and a 2-region job whose regions train on NCCL
# (tests/orchestrator/e2e_gpu_test.cpp). Then the GPU benchmarks, each against
# its baseline in the same run: the CUDA codecs against a device-to-device
# copy, the device trainer against cublasSgemm on the same GEMM shapes.
# It installs the Debian dependencies first. A GPU machine that reaches no
# package registry takes the archive of deploy/gpu-bundle.sh instead (built
# here, with nvcc) and runs deploy/gpu-run-bundle.sh: the same suites and
# benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
LIMIT=${GPU_CHECK_SECONDS:-900}
start=$(date +%s)
# Seconds left of the limit; fails naming the step when none are.
left() {
  local n=$(( LIMIT - ($(date +%s) - start) ))
  if (( n <= 0 )); then echo "gpu-check: the ${LIMIT} s limit was spent before $1" >&2; return 1; fi
  echo "$n"
}

nvidia-smi -L || { echo "gpu-check: nvidia-smi lists no GPU" >&2; exit 2; }
./deploy/install-deps.sh
configure=$(cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGHAUL_CUDA=ON -DLONGHAUL_WERROR=ON \
                  -DCMAKE_CUDA_ARCHITECTURES="${GPU_CHECK_CUDA_ARCHS:-native}" 2>&1) || { echo "$configure" >&2; exit 2; }
# cmake/LonghaulCuda.cmake says "longhaul: CUDA <version>, archs ..., NCCL ..." when both are found.
if ! grep -q "longhaul: CUDA" <<<"$configure"; then
  grep "longhaul:" <<<"$configure" >&2 || true
  echo "gpu-check: this build has no CUDA and NCCL" >&2
  exit 2
fi
budget=$(left "the build") || exit 1
timeout "$budget" cmake --build "$BUILD" -j "$(nproc)" || { echo "gpu-check: the build failed or ran out of time" >&2; exit 1; }
echo "== build took $(( $(date +%s) - start )) s"

log=$(mktemp "${TMPDIR:-/tmp}/longhaul-gpu-check-XXXXXX")
trap 'rm -f "$log"' EXIT
budget=$(left "the GPU tests") || exit 1
set +e
timeout "$budget" ctest --test-dir "$BUILD" -L gpu --output-on-failure --no-tests=error | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if grep -q "(Skipped)" "$log"; then
  # ctest prints no output for a skipped test: the suites' main says why.
  grep -h "SKIPPED:" "$BUILD/Testing/Temporary/LastTest.log" | sort -u >&2 || true
  echo "gpu-check: GPU tests were skipped (no usable CUDA device to this process)" >&2
  exit 1
fi
[[ $rc -eq 0 ]] || { echo "gpu-check: GPU tests failed (ctest exit $rc)" >&2; exit "$rc"; }
echo "== GPU tests passed after $(( $(date +%s) - start )) s"

budget=$(left "the GPU benchmarks") || exit 1
timeout "$budget" "$BUILD/bin/bench_codecs" --gpu --mib 256 --reps 5 || { echo "gpu-check: bench_codecs --gpu failed" >&2; exit 1; }
for batch in 64 1024; do
  budget=$(left "bench_trainer --gpu --batch $batch") || exit 1
  timeout "$budget" "$BUILD/bin/bench_trainer" --gpu --preset small --batch "$batch" --seconds 3 ||
    { echo "gpu-check: bench_trainer --gpu --batch $batch failed" >&2; exit 1; }
done
echo "== GPU check passed; it took $(( $(date +%s) - start )) s"
