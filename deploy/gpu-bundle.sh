#!/usr/bin/env bash
# Packs what the GPU check runs into one archive, for a GPU machine that cannot
# install packages (the device machines reach no registry): the gpu-labelled
# test suites, the binaries their end-to-end cases start, the GPU benchmarks,
# the shared libraries they load that such a machine lacks (ZeroMQ, protobuf,
# Gloo, OpenBLAS, ...), and deploy/gpu-run-bundle.sh. Left out: the C library
# family and libstdc++ (a newer distribution has its own), and the CUDA
# libraries (cudart, cuBLAS, NCCL: the GPU machine's CUDA install or its
# PyTorch wheels provide them; gpu-run-bundle.sh finds them).
#
#   deploy/gpu-bundle.sh [build-dir] [archive]   default build/ and gpu-bundle/longhaul-gpu.tar.xz
#
# The build must have CUDA (LONGHAUL_HAVE_CUDA) and code for the target GPU
# (cmake/LonghaulCuda.cmake builds sm_80 and sm_90 by default: A100, H100, H200).
# The archive records the build directory: the test binaries find their
# siblings there, so gpu-run-bundle.sh unpacks it at that path.
set -euo pipefail
ROOT=$(realpath "$(dirname "$0")/..")
BUILD=$(realpath "${1:-$ROOT/build}")
ARCHIVE=$(realpath -m "${2:-$ROOT/gpu-bundle/longhaul-gpu.tar.xz}")
cd "$ROOT"

BINARIES=(trainer_gpu_tests sync_policies_gpu_tests orchestrator_gpu_e2e_tests
          longhaul longhaul-orchestrator longhaul-agent longhaul-worker bench_codecs bench_trainer)
for b in "${BINARIES[@]}"; do
  [[ -x "$BUILD/bin/$b" ]] || { echo "gpu-bundle: $BUILD/bin/$b is missing (a build with CUDA builds it)" >&2; exit 2; }
done

stage=$(mktemp -d "${TMPDIR:-/tmp}/longhaul-gpu-bundle-XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for b in "${BINARIES[@]}"; do cp "$BUILD/bin/$b" "$stage/bin/"; done
cp deploy/gpu-run-bundle.sh "$stage/"
echo "$BUILD" > "$stage/BUILD_DIR"

# Every shared library the binaries load, but the C library family, the C++
# runtime and CUDA's own.
system='^(libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libnss_[a-z]+|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'
cuda='^(libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'
ldd "${BINARIES[@]/#/$BUILD/bin/}" | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ "$name" =~ $system ]] && continue
  if [[ "$name" =~ $cuda ]]; then  # the GPU machine's own: gpu-run-bundle.sh looks for these sonames
    [[ "$name" == libcuda.so* ]] || echo "$name" >> "$stage/CUDA_LIBS"
    continue
  fi
  cp -L "$lib" "$stage/lib/$name"
done
missing=$(ldd "${BINARIES[@]/#/$BUILD/bin/}" | awk '/not found/ {print $1}' | sort -u)
[[ -z "$missing" ]] || { echo "gpu-bundle: unresolved libraries here: $missing" >&2; exit 2; }

mkdir -p "$(dirname "$ARCHIVE")"
tar -C "$stage" -cJf "$ARCHIVE" .
echo "gpu-bundle: $ARCHIVE, $(du -h "$ARCHIVE" | cut -f1) ($(ls "$stage/lib" | wc -l) libraries, build dir $BUILD)"
