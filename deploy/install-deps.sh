#!/usr/bin/env bash
# Installs exactly the Debian packages longhaul needs to build, test and run its demo.
# Idempotent: packages already present are skipped and nothing is printed for them.
# CUDA/NCCL are not Debian packages; they are used when /usr/local/cuda exists.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libzmq3-dev cppzmq-dev libsodium-dev
  libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev
  libssl-dev libcrypt-dev openssl
  libcli11-dev catch2
  libgloo-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libopenblas-dev libsqlite3-dev libzstd-dev libxxhash-dev
  iproute2 iperf3 prometheus gnuplot-nox stress-ng
  slurmctld slurmd slurm-client munge  # a real single-host Slurm cluster in the slurm launcher's tests
  python3-dev pybind11-dev python3-torch python3-numpy python3-pytest
  clang-14 libclang-rt-14-dev  # libFuzzer (fuzz/run.sh, run by .ci/run)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root to install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
