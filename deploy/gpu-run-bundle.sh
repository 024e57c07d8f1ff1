#!/usr/bin/env bash
# Runs the GPU check from an archive made by deploy/gpu-bundle.sh, on a machine
# with a CUDA GPU that has no longhaul dependencies installed (as root: it
# unpacks the binaries at the build path recorded in the archive). Within a
# time limit: every gpu-labelled suite (each must run, not skip, and pass),
# then the GPU benchmarks, each against its baseline in the same run.
#
#   deploy/gpu-run-bundle.sh ARCHIVE [out-dir]     GPU_CHECK_SECONDS (default 540)
#
# The CUDA libraries come from the machine: its CUDA install and, where cuBLAS
# or NCCL are not there, the nvidia-* Python wheels PyTorch brings.
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: deploy/gpu-run-bundle.sh ARCHIVE [out-dir]" >&2; exit 2; }
ARCHIVE=$(realpath "$1")
mkdir -p "${2:-.}" && OUT=$(realpath "${2:-.}")
LIMIT=${GPU_CHECK_SECONDS:-540}
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }

nvidia-smi -L || { echo "gpu-run-bundle: nvidia-smi lists no GPU" >&2; exit 2; }
unpack=$(mktemp -d "${TMPDIR:-/tmp}/longhaul-gpu-unpack-XXXXXX")
tar -C "$unpack" -xJf "$ARCHIVE" || exit 2
BUILD=$(cat "$unpack/BUILD_DIR")
mapfile -t cuda_libs < "$unpack/CUDA_LIBS"
mkdir -p "$BUILD" && cp -r "$unpack/bin" "$unpack/lib" "$BUILD/" && rm -rf "$unpack" || exit 2

# CUDA's libraries the binaries were linked against (their sonames, recorded
# by gpu-bundle.sh), from wherever this machine has them: its CUDA install
# first, then PyTorch's nvidia-* wheels. cuBLAS and cuBLASLt from one place.
cuda_dirs=()
for so in "${cuda_libs[@]}"; do
  found=""
  for dir in "${cuda_dirs[@]}"; do [[ -e "$dir/$so" ]] && found="$dir/$so" && break; done
  [[ -n "$found" ]] || found=$(find /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu /opt /usr/local/lib -name "$so" 2>/dev/null | sort | head -1)
  [[ -n "$found" ]] || { echo "gpu-run-bundle: $so is not on this machine" >&2; exit 2; }
  echo "== $so: $found"
  cuda_dirs+=("$(dirname "$found")")
done
export LD_LIBRARY_PATH="$BUILD/lib:$(IFS=:; echo "${cuda_dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=$(ldd "$BUILD"/bin/* | awk '/not found/ {print $1}' | sort -u)
[[ -z "$missing" ]] || { echo "gpu-run-bundle: still unresolved: $missing" >&2; exit 2; }

failed=0
run() {  # name, command...: a step bounded by what is left of the limit, its output kept in OUT
  local name=$1; shift
  local budget; budget=$(left)
  if (( budget <= 0 )); then echo "gpu-run-bundle: the ${LIMIT} s limit was spent before $name" >&2; failed=1; return; fi
  echo "== $name"
  timeout -k 10 "$budget" "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  # A suite stopped at the limit leaves its cluster behind: end it before the next step.
  pkill -KILL -f "^$BUILD/bin/longhaul" 2>/dev/null || true
  if (( rc == 77 )); then echo "gpu-run-bundle: $name was skipped (no usable CUDA device)" >&2; failed=1
  elif (( rc != 0 )); then echo "gpu-run-bundle: $name failed (exit $rc)" >&2; failed=1; fi
}
cd "$BUILD"
run trainer_gpu_tests bin/trainer_gpu_tests
run sync_policies_gpu_tests bin/sync_policies_gpu_tests
run orchestrator_gpu_e2e_tests bin/orchestrator_gpu_e2e_tests
run bench_codecs bin/bench_codecs --gpu --mib 256 --reps 5
run bench_trainer_64 bin/bench_trainer --gpu --preset small --batch 64 --seconds 3
run bench_trainer_1024 bin/bench_trainer --gpu --preset small --batch 1024 --seconds 3
echo "== gpu-run-bundle: $( ((failed)) && echo FAILED || echo passed ) after $(( $(date +%s) - start )) s"
exit "$failed"
