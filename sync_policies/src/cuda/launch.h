// Plain C++17 boundary between the C++20 library and the .cu translation units
// (nvcc compiles .cu as C++17 here, so no std::span or longhaul headers cross).
#pragma once

#include <cstddef>
#include <string>
#include <utility>

namespace longhaul::sync_policies::cuda_detail {

// Codec numbering of the dense launchers.
enum DenseCodec : int { kFp32 = 0, kBf16 = 1, kInt8 = 2, kInt4 = 3, kFp4 = 4 };

struct LaunchResult {
  enum Kind { kOk, kCudaError, kBadInput } kind = kOk;
  std::string message;  // names the failing CUDA call or the bad size/index
  static LaunchResult Ok() { return {}; }
  static LaunchResult Cuda(std::string m) { return {m.empty() ? kOk : kCudaError, std::move(m)}; }
  static LaunchResult Bad(std::string m) { return {kBadInput, std::move(m)}; }
};

LaunchResult DeviceCheck();
LaunchResult Encode(int codec, const float* in, size_t n, size_t block, void* out, size_t out_bytes);
LaunchResult Decode(int codec, const void* in, size_t in_bytes, size_t n, size_t block, float* out);
// Top-k with k entries (the caller computes k exactly as the CPU codec does).
LaunchResult EncodeTopK(const float* in, size_t n, size_t k, void* out, size_t out_bytes);
LaunchResult DecodeTopK(const void* in, size_t in_bytes, size_t n, size_t expected_k, float* out);
// Plain copies between host and device memory, for the codecs without kernels.
LaunchResult CopyToHost(void* host, const void* device, size_t bytes);
LaunchResult CopyToDevice(void* device, const void* host, size_t bytes);

}  // namespace longhaul::sync_policies::cuda_detail
