// Top-k on the GPU with the CPU codec's exact selection rule: the k entries of
// largest |x|, ties to the lower index, written in increasing index order.
// Selection sorts 64-bit keys (|x| bits, then the inverted index) descending,
// so the order is total and the result a pure function of the input.
#include <cuda_runtime.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/sort.h>

#include <cstdint>
#include <exception>
#include <string>

#include "launch.h"

namespace longhaul::sync_policies::cuda_detail {
namespace {

std::string Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return "";
  return std::string(what) + " failed: error " + std::to_string(static_cast<int>(err)) + " (" +
         cudaGetErrorString(err) + ")";
}

constexpr int kThreads = 256;
int Grid(size_t items) {
  size_t g = (items + kThreads - 1) / kThreads;
  return static_cast<int>(g < 65535 ? (g == 0 ? 1 : g) : 65535);
}

struct LowBits {
  __host__ __device__ unsigned long long operator()(unsigned long long key) const { return key & 0xffffffffull; }
};

__global__ void KeysKernel(const float* in, size_t n, unsigned long long* keys) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    unsigned long long mag = __float_as_uint(in[i]) & 0x7fffffffu;
    keys[i] = (mag << 32) | (0xffffffffull - i);  // descending: larger |x|, then lower index
  }
}

__global__ void WriteKernel(const float* in, const unsigned long long* sorted_keys, size_t k, uint32_t* indices,
                            float* values) {
  for (size_t j = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; j < k;
       j += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t i = static_cast<uint32_t>(0xffffffffull - (sorted_keys[j] & 0xffffffffull));
    indices[j] = i;
    values[j] = in[i];
  }
}

__global__ void ValidateKernel(const uint32_t* indices, size_t k, size_t n, int* bad) {
  for (size_t j = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; j < k;
       j += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if (indices[j] >= n || (j > 0 && indices[j] <= indices[j - 1])) atomicExch(bad, 1);
  }
}

__global__ void ScatterKernel(const uint32_t* indices, const float* values, size_t k, float* out) {
  for (size_t j = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; j < k;
       j += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[indices[j]] = values[j];
}

}  // namespace

LaunchResult EncodeTopK(const float* in, size_t n, size_t k, void* out, size_t out_bytes) {
  if (out_bytes != 4 + 8 * k || k > n || n > 0xffffffffull) return LaunchResult::Bad("topk encode: bad sizes");
  uint32_t k32 = static_cast<uint32_t>(k);
  std::string err = Check(cudaMemcpy(out, &k32, 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  if (!err.empty() || k == 0) return LaunchResult::Cuda(err);
  try {
    thrust::device_vector<unsigned long long> keys(n);
    KeysKernel<<<Grid(n), kThreads>>>(in, n, thrust::raw_pointer_cast(keys.data()));
    thrust::sort(thrust::device, keys.begin(), keys.end(), thrust::greater<unsigned long long>());
    // Among the top k, increasing index = decreasing inverted index in the low bits.
    // Keep only the inverted index of the top k and sort it descending: that is
    // increasing index order, and WriteKernel decodes the low bits as before.
    thrust::transform(thrust::device, keys.begin(), keys.begin() + k, keys.begin(), LowBits());
    thrust::sort(thrust::device, keys.begin(), keys.begin() + k, thrust::greater<unsigned long long>());
    auto* indices = reinterpret_cast<uint32_t*>(static_cast<char*>(out) + 4);
    auto* values = reinterpret_cast<float*>(static_cast<char*>(out) + 4 + 4 * k);
    WriteKernel<<<Grid(k), kThreads>>>(in, thrust::raw_pointer_cast(keys.data()), k, indices, values);
    return LaunchResult::Cuda(Check(cudaDeviceSynchronize(), "topk encode kernels"));
  } catch (const std::exception& e) {  // thrust reports allocation/launch failures by throwing
    return LaunchResult::Cuda(std::string("topk encode: ") + e.what());
  }
}

LaunchResult DecodeTopK(const void* in, size_t in_bytes, size_t n, size_t expected_k, float* out) {
  if (in_bytes < 4) return LaunchResult::Bad("topk decode: payload has no count");
  uint32_t k = 0;
  std::string err = Check(cudaMemcpy(&k, in, 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (!err.empty()) return LaunchResult::Cuda(err);
  if (k != expected_k || in_bytes != 4 + 8 * static_cast<size_t>(k))
    return LaunchResult::Bad("topk decode: payload holds " + std::to_string(k) + " entries in " +
                             std::to_string(in_bytes) + " bytes, expected " + std::to_string(expected_k));
  const auto* indices = reinterpret_cast<const uint32_t*>(static_cast<const char*>(in) + 4);
  const auto* values = reinterpret_cast<const float*>(static_cast<const char*>(in) + 4 + 4 * size_t{k});
  int* bad = nullptr;
  err = Check(cudaMalloc(&bad, sizeof(int)), "cudaMalloc");
  if (!err.empty()) return LaunchResult::Cuda(err);
  cudaMemset(bad, 0, sizeof(int));
  if (k > 0) ValidateKernel<<<Grid(k), kThreads>>>(indices, k, n, bad);
  int host_bad = 0;
  err = Check(cudaMemcpy(&host_bad, bad, sizeof(int), cudaMemcpyDeviceToHost), "topk validate");
  cudaFree(bad);
  if (!err.empty()) return LaunchResult::Cuda(err);
  if (host_bad) return LaunchResult::Bad("topk decode: index out of range or not increasing");
  err = Check(cudaMemset(out, 0, n * sizeof(float)), "cudaMemset");
  if (!err.empty() || k == 0) return LaunchResult::Cuda(err);
  ScatterKernel<<<Grid(k), kThreads>>>(indices, values, k, out);
  return LaunchResult::Cuda(Check(cudaDeviceSynchronize(), "topk decode kernel"));
}

}  // namespace longhaul::sync_policies::cuda_detail
