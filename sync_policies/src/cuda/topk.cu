// Top-k on the GPU with the CPU codec's exact selection rule: the k entries of
// largest |x|, ties to the lower index, written in increasing index order.
// 1. Radix select (four 8-bit histogram passes) finds the k-th largest magnitude
//    T and how many entries equal to T are needed.
// 2. Per chunk, count entries above T and equal to T; the host turns the counts
//    into each chunk's output offset and tie allowance (ties go to the lowest
//    indices, so to the earliest chunks).
// 3. Each chunk compacts its selected entries in index order (block-wide ballot
//    prefix counts), so the output is deterministic.
// Plain kernels rather than thrust/cub sorts: those cost minutes of nvcc time.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "launch.h"

namespace longhaul::sync_policies::cuda_detail {
namespace {

constexpr int kThreads = 256;    // also the histogram width
constexpr size_t kChunk = 4096;  // elements per compaction block

std::string Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return "";
  return std::string(what) + " failed: error " + std::to_string(static_cast<int>(err)) + " (" +
         cudaGetErrorString(err) + ")";
}

int Grid(size_t items) {
  size_t g = (items + kThreads - 1) / kThreads;
  return static_cast<int>(g < 65535 ? (g == 0 ? 1 : g) : 65535);
}

// Frees a device allocation on every return path.
struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  std::string Allocate(size_t bytes) { return Check(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes), "cudaMalloc"); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

__device__ __forceinline__ uint32_t Key(float x) { return __float_as_uint(x) & 0x7fffffffu; }

__global__ void HistogramKernel(const float* in, size_t n, uint32_t prefix, uint32_t mask, int shift,
                                unsigned int* hist) {
  __shared__ unsigned int local[kThreads];
  local[threadIdx.x] = 0;
  __syncthreads();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t key = Key(in[i]);
    if ((key & mask) == prefix) atomicAdd(&local[(key >> shift) & 0xffu], 1u);
  }
  __syncthreads();
  if (local[threadIdx.x]) atomicAdd(&hist[threadIdx.x], local[threadIdx.x]);
}

__global__ void CountKernel(const float* in, size_t n, uint32_t threshold, unsigned int* above, unsigned int* equal) {
  size_t start = blockIdx.x * kChunk;
  size_t end = start + kChunk < n ? start + kChunk : n;
  unsigned int gt = 0, eq = 0;
  for (size_t t = start; t < end; t += blockDim.x) {
    size_t i = t + threadIdx.x;
    uint32_t key = i < end ? Key(in[i]) : 0u;
    gt += __syncthreads_count(i < end && key > threshold);
    eq += __syncthreads_count(i < end && key == threshold);
  }
  if (threadIdx.x == 0) {
    above[blockIdx.x] = gt;
    equal[blockIdx.x] = eq;
  }
}

// Exclusive count of set flags before this thread in the block; *total = all set.
// Every thread of the block must call it.
__device__ unsigned int BlockPrefix(bool flag, unsigned int* warp_sums, unsigned int* total) {
  unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  unsigned int ballot = __ballot_sync(0xffffffffu, flag);
  unsigned int prefix = __popc(ballot & ((1u << lane) - 1u));
  __syncthreads();  // warp_sums may still be read from the previous call
  if (lane == 0) warp_sums[warp] = __popc(ballot);
  __syncthreads();
  unsigned int before = 0, sum = 0;
  for (unsigned int w = 0; w < blockDim.x / 32u; ++w) {
    if (w < warp) before += warp_sums[w];
    sum += warp_sums[w];
  }
  *total = sum;
  return before + prefix;
}

__global__ void SelectKernel(const float* in, size_t n, uint32_t threshold, const unsigned long long* out_base,
                             const unsigned int* ties_allowed, uint32_t* indices, float* values) {
  __shared__ unsigned int warp_sums[32];
  size_t start = blockIdx.x * kChunk;
  size_t end = start + kChunk < n ? start + kChunk : n;
  unsigned long long base = out_base[blockIdx.x];
  unsigned int allowed = ties_allowed[blockIdx.x];
  unsigned int ties_seen = 0, taken = 0;
  for (size_t t = start; t < end; t += blockDim.x) {
    size_t i = t + threadIdx.x;
    bool valid = i < end;
    uint32_t key = valid ? Key(in[i]) : 0u;
    bool eq = valid && key == threshold;
    unsigned int eq_total = 0, take_total = 0;
    unsigned int tie_rank = ties_seen + BlockPrefix(eq, warp_sums, &eq_total);
    bool take = (valid && key > threshold) || (eq && tie_rank < allowed);
    unsigned int pos = taken + BlockPrefix(take, warp_sums, &take_total);
    if (take) {
      indices[base + pos] = static_cast<uint32_t>(i);
      values[base + pos] = in[i];
    }
    ties_seen += eq_total;
    taken += take_total;
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

// Step 1: the k-th largest key and how many keys equal to it are selected.
std::string RadixSelect(const float* in, size_t n, size_t k, uint32_t* threshold, size_t* ties_needed) {
  DeviceBuffer hist;
  std::string err = hist.Allocate(kThreads * sizeof(unsigned int));
  if (!err.empty()) return err;
  uint32_t prefix = 0, mask = 0;
  size_t remaining = k;  // rank (from the top) still to locate among keys matching prefix
  std::vector<unsigned int> h(kThreads);
  for (int shift = 24; shift >= 0; shift -= 8) {
    err = Check(cudaMemset(hist.ptr, 0, kThreads * sizeof(unsigned int)), "cudaMemset");
    if (!err.empty()) return err;
    HistogramKernel<<<Grid(n), kThreads>>>(in, n, prefix, mask, shift, hist.as<unsigned int>());
    err = Check(cudaMemcpy(h.data(), hist.ptr, kThreads * sizeof(unsigned int), cudaMemcpyDeviceToHost),
                "topk histogram");
    if (!err.empty()) return err;
    size_t above = 0;
    int bin = kThreads - 1;
    for (; bin > 0; --bin) {
      if (above + h[bin] >= remaining) break;
      above += h[bin];
    }
    remaining -= above;
    prefix |= static_cast<uint32_t>(bin) << shift;
    mask |= 0xffu << shift;
  }
  *threshold = prefix;
  *ties_needed = remaining;
  return "";
}

}  // namespace

LaunchResult EncodeTopK(const float* in, size_t n, size_t k, void* out, size_t out_bytes) {
  if (out_bytes != 4 + 8 * k || k > n || n > 0xffffffffull) return LaunchResult::Bad("topk encode: bad sizes");
  uint32_t k32 = static_cast<uint32_t>(k);
  std::string err = Check(cudaMemcpy(out, &k32, 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  if (!err.empty() || k == 0) return LaunchResult::Cuda(err);
  uint32_t threshold = 0;
  size_t ties_left = 0;
  err = RadixSelect(in, n, k, &threshold, &ties_left);
  if (!err.empty()) return LaunchResult::Cuda(err);

  const size_t chunks = (n + kChunk - 1) / kChunk;
  DeviceBuffer above, equal, base, allowed;
  for (auto* b : {&above, &equal, &allowed}) {
    err = b->Allocate(chunks * sizeof(unsigned int));
    if (!err.empty()) return LaunchResult::Cuda(err);
  }
  err = base.Allocate(chunks * sizeof(unsigned long long));
  if (!err.empty()) return LaunchResult::Cuda(err);
  CountKernel<<<static_cast<unsigned int>(chunks), kThreads>>>(in, n, threshold, above.as<unsigned int>(),
                                                               equal.as<unsigned int>());
  std::vector<unsigned int> h_above(chunks), h_equal(chunks), h_allowed(chunks);
  std::vector<unsigned long long> h_base(chunks);
  err = Check(cudaMemcpy(h_above.data(), above.ptr, chunks * sizeof(unsigned int), cudaMemcpyDeviceToHost),
              "topk counts");
  if (err.empty())
    err = Check(cudaMemcpy(h_equal.data(), equal.ptr, chunks * sizeof(unsigned int), cudaMemcpyDeviceToHost),
                "topk counts");
  if (!err.empty()) return LaunchResult::Cuda(err);
  unsigned long long offset = 0;
  for (size_t c = 0; c < chunks; ++c) {
    h_base[c] = offset;
    h_allowed[c] = static_cast<unsigned int>(h_equal[c] < ties_left ? h_equal[c] : ties_left);
    ties_left -= h_allowed[c];
    offset += h_above[c] + h_allowed[c];
  }
  if (offset != k)
    return LaunchResult::Cuda("topk encode: selected " + std::to_string(offset) + " of " + std::to_string(k));
  err = Check(cudaMemcpy(base.ptr, h_base.data(), chunks * sizeof(unsigned long long), cudaMemcpyHostToDevice),
              "cudaMemcpy");
  if (err.empty())
    err = Check(cudaMemcpy(allowed.ptr, h_allowed.data(), chunks * sizeof(unsigned int), cudaMemcpyHostToDevice),
                "cudaMemcpy");
  if (!err.empty()) return LaunchResult::Cuda(err);
  auto* indices = reinterpret_cast<uint32_t*>(static_cast<char*>(out) + 4);
  auto* values = reinterpret_cast<float*>(static_cast<char*>(out) + 4 + 4 * k);
  SelectKernel<<<static_cast<unsigned int>(chunks), kThreads>>>(in, n, threshold, base.as<unsigned long long>(),
                                                                allowed.as<unsigned int>(), indices, values);
  return LaunchResult::Cuda(Check(cudaDeviceSynchronize(), "topk select kernel"));
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
  DeviceBuffer bad;
  err = bad.Allocate(sizeof(int));
  if (err.empty()) err = Check(cudaMemset(bad.ptr, 0, sizeof(int)), "cudaMemset");
  if (!err.empty()) return LaunchResult::Cuda(err);
  if (k > 0) ValidateKernel<<<Grid(k), kThreads>>>(indices, k, n, bad.as<int>());
  int host_bad = 0;
  err = Check(cudaMemcpy(&host_bad, bad.ptr, sizeof(int), cudaMemcpyDeviceToHost), "topk validate");
  if (!err.empty()) return LaunchResult::Cuda(err);
  if (host_bad) return LaunchResult::Bad("topk decode: index out of range or not increasing");
  err = Check(cudaMemset(out, 0, n * sizeof(float)), "cudaMemset");
  if (!err.empty() || k == 0) return LaunchResult::Cuda(err);
  ScatterKernel<<<Grid(k), kThreads>>>(indices, values, k, out);
  return LaunchResult::Cuda(Check(cudaDeviceSynchronize(), "topk decode kernel"));
}

}  // namespace longhaul::sync_policies::cuda_detail
