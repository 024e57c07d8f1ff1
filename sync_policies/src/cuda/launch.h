// Plain C++17 boundary between the C++20 library and the .cu translation unit
// (nvcc compiles .cu as C++17 here, so no std::span or longhaul headers cross).
#pragma once

#include <cstddef>
#include <string>

namespace longhaul::sync_policies::cuda_detail {

// Codec numbering of the launchers.
enum DenseCodec : int { kFp32 = 0, kBf16 = 1, kInt8 = 2, kInt4 = 3, kFp4 = 4 };

// Each returns "" on success, else a message naming the failing CUDA call.
std::string DeviceCheck();
std::string Encode(int codec, const float* in, size_t n, size_t block, void* out, size_t out_bytes);
std::string Decode(int codec, const void* in, size_t in_bytes, size_t n, size_t block, float* out);

}  // namespace longhaul::sync_policies::cuda_detail
