// CUDA twins of codec_kernels.cpp. Every float op is the IEEE-rounded intrinsic
// of the CPU op (__fmul_rn, __fdiv_rn, __float2int_rn), never contracted, so the
// encodings are bit-identical to the CPU ones.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "launch.h"

namespace longhaul::sync_policies::cuda_detail {
namespace {

constexpr int kThreads = 256;

std::string Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return "";
  return std::string(what) + " failed: error " + std::to_string(static_cast<int>(err)) + " (" +
         cudaGetErrorString(err) + ")";
}

__device__ __forceinline__ float InverseScale(float absmax, float levels) {
  return (absmax > 0.0f && absmax <= 3.4028234663852886e38f) ? __fdiv_rn(levels, absmax) : 0.0f;
}

// One CUDA block per quantisation block: absmax via the bit patterns (as the CPU).
__global__ void ScalesKernel(const float* in, size_t n, size_t block, float levels, float scale_div, float* scales,
                             float* inverses) {
  __shared__ unsigned int partial[kThreads];
  size_t start = static_cast<size_t>(blockIdx.x) * block;
  size_t end = start + block < n ? start + block : n;
  unsigned int m = 0;
  for (size_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    unsigned int a = __float_as_uint(in[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  partial[threadIdx.x] = m;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      unsigned int o = partial[threadIdx.x + stride];
      if (o > partial[threadIdx.x]) partial[threadIdx.x] = o;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float absmax = __uint_as_float(partial[0]);
    scales[blockIdx.x] = scale_div == 1.0f ? absmax : __fdiv_rn(absmax, scale_div);
    inverses[blockIdx.x] = InverseScale(absmax, levels);
  }
}

// x * inv, non-finite products replaced by 0 (as ScaledFinite on the CPU). The
// product of a finite x is within levels * (1 + 2^-22): no clamp needed.
__device__ __forceinline__ float ScaledFinite(float x, float inv) {
  float v = __fmul_rn(x, inv);
  return isfinite(v) ? v : 0.0f;
}

__device__ __forceinline__ int Quantise(float x, float inv) { return __float2int_rn(ScaledFinite(x, inv)); }

__device__ __forceinline__ unsigned int Fp4Code(float x, float inv) {
  float r = ScaledFinite(x, inv);
  unsigned int rounded = (__float_as_uint(r) & 0x7fffffffu) + 0x00400000u;
  int e = static_cast<int>(rounded >> 23) - 120;
  e = e < 0 ? 0 : e;
  e = e > 7 ? 7 : e;
  e = (e == 0 && r >= 0.0078125f) ? 1 : e;
  return ((__float_as_uint(x) >> 28) & 0x8u) | static_cast<unsigned int>(e);
}

__global__ void EncodeInt8Kernel(const float* in, size_t n, size_t block, const float* inv, int8_t* q) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    q[i] = static_cast<int8_t>(Quantise(in[i], inv[i / block]));
}

__global__ void EncodeNibbleKernel(const float* in, size_t n, size_t block, const float* inv, bool fp4,
                                   uint8_t* packed) {
  size_t bytes = (n + 1) / 2;
  for (size_t j = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; j < bytes;
       j += static_cast<size_t>(gridDim.x) * blockDim.x) {
    unsigned int code[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      size_t i = 2 * j + k;
      if (i >= n) break;
      code[k] =
          fp4 ? Fp4Code(in[i], inv[i / block]) : static_cast<unsigned int>(Quantise(in[i], inv[i / block])) & 0xfu;
    }
    packed[j] = static_cast<uint8_t>(code[0] | (code[1] << 4));
  }
}

__global__ void EncodeBf16Kernel(const float* in, size_t n, uint16_t* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    unsigned int u = __float_as_uint(in[i]);
    unsigned int rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    unsigned int nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    out[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

__global__ void DecodeBf16Kernel(const uint16_t* in, size_t n, float* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = __uint_as_float(static_cast<unsigned int>(in[i]) << 16);
}

__device__ __forceinline__ float NibbleValue(unsigned int nibble, bool fp4) {
  if (!fp4) return static_cast<float>(static_cast<int>(nibble << 28) >> 28);
  unsigned int e = nibble & 7u;
  float mag = e == 0 ? 0.0f : __uint_as_float((e + 120u) << 23);
  return (nibble & 8u) ? -mag : mag;
}

// codec: kInt8, kInt4 or kFp4. Scales are read byte-wise-safe as floats (the
// buffer comes from cudaMalloc and scales sit at offset 0).
__global__ void DecodeBlockKernel(const float* scales, const uint8_t* body, size_t n, size_t block, int codec,
                                  float* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float s = scales[i / block];
    float v;
    if (codec == kInt8) {
      v = static_cast<float>(static_cast<int8_t>(body[i]));
    } else {
      unsigned int byte = body[i / 2];
      v = NibbleValue((i & 1) ? (byte >> 4) : (byte & 0xfu), codec == kFp4);
    }
    out[i] = __fmul_rn(s, v);
  }
}

int Grid(size_t items) {
  size_t g = (items + kThreads - 1) / kThreads;
  return static_cast<int>(g < 65535 ? (g == 0 ? 1 : g) : 65535);
}

size_t NumBlocks(size_t n, size_t block) { return (n + block - 1) / block; }

size_t EncodedSize(int codec, size_t n, size_t block) {
  switch (codec) {
    case kFp32:
      return 4 * n;
    case kBf16:
      return 2 * n;
    case kInt8:
      return 4 * NumBlocks(n, block) + n;
    default:
      return 4 * NumBlocks(n, block) + (n + 1) / 2;
  }
}

}  // namespace

LaunchResult DeviceCheck() {
  int count = 0;
  std::string err = Check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (!err.empty()) return LaunchResult::Cuda(err);
  if (count == 0) return LaunchResult::Cuda("no CUDA device");
  return LaunchResult::Ok();
}

LaunchResult Encode(int codec, const float* in, size_t n, size_t block, void* out, size_t out_bytes) {
  if (out_bytes != EncodedSize(codec, n, block))
    return LaunchResult::Bad("encode: output buffer size does not match the codec layout");
  if (n == 0) return LaunchResult::Ok();
  if (codec == kFp32)
    return LaunchResult::Cuda(Check(cudaMemcpy(out, in, 4 * n, cudaMemcpyDeviceToDevice), "cudaMemcpy"));
  if (codec == kBf16) {
    EncodeBf16Kernel<<<Grid(n), kThreads>>>(in, n, static_cast<uint16_t*>(out));
    return LaunchResult::Cuda(Check(cudaDeviceSynchronize(), "bf16 encode kernel"));
  }
  size_t nb = NumBlocks(n, block);
  if (nb > 0x7fffffffu) return LaunchResult::Bad("encode: too many blocks for one grid");
  float* inverses = nullptr;
  std::string err = Check(cudaMalloc(&inverses, nb * sizeof(float)), "cudaMalloc");
  if (!err.empty()) return LaunchResult::Cuda(err);
  float* scales = static_cast<float*>(out);
  uint8_t* body = static_cast<uint8_t*>(out) + nb * sizeof(float);
  float levels = codec == kInt8 ? 127.0f : codec == kInt4 ? 7.0f : 1.0f;
  ScalesKernel<<<static_cast<unsigned int>(nb), kThreads>>>(in, n, block, levels, levels, scales, inverses);
  if (codec == kInt8) {
    EncodeInt8Kernel<<<Grid(n), kThreads>>>(in, n, block, inverses, reinterpret_cast<int8_t*>(body));
  } else {
    EncodeNibbleKernel<<<Grid((n + 1) / 2), kThreads>>>(in, n, block, inverses, codec == kFp4, body);
  }
  err = Check(cudaDeviceSynchronize(), "encode kernels");
  cudaFree(inverses);
  return LaunchResult::Cuda(err);
}

LaunchResult Decode(int codec, const void* in, size_t in_bytes, size_t n, size_t block, float* out) {
  if (in_bytes != EncodedSize(codec, n, block))
    return LaunchResult::Bad("decode: payload size does not match the codec layout");
  if (n == 0) return LaunchResult::Ok();
  if (codec == kFp32)
    return LaunchResult::Cuda(Check(cudaMemcpy(out, in, 4 * n, cudaMemcpyDeviceToDevice), "cudaMemcpy"));
  if (codec == kBf16) {
    DecodeBf16Kernel<<<Grid(n), kThreads>>>(static_cast<const uint16_t*>(in), n, out);
    return LaunchResult::Cuda(Check(cudaDeviceSynchronize(), "bf16 decode kernel"));
  }
  size_t nb = NumBlocks(n, block);
  const float* scales = static_cast<const float*>(in);
  const uint8_t* body = static_cast<const uint8_t*>(in) + nb * sizeof(float);
  DecodeBlockKernel<<<Grid(n), kThreads>>>(scales, body, n, block, codec, out);
  return LaunchResult::Cuda(Check(cudaDeviceSynchronize(), "decode kernel"));
}

LaunchResult CopyToHost(void* host, const void* device, size_t bytes) {
  if (bytes == 0) return LaunchResult::Ok();
  return LaunchResult::Cuda(Check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host"));
}

LaunchResult CopyToDevice(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return LaunchResult::Ok();
  return LaunchResult::Cuda(Check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device"));
}

}  // namespace longhaul::sync_policies::cuda_detail
