// GPU codecs against the CPU ones, bit for bit (label gpu: the suite's main
// reports the case skipped, naming the reason, where no CUDA device is usable,
// e.g. no driver (error 35) or a build without CUDA).
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/cuda_codecs.h"

#if LONGHAUL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace longhaul;
using namespace longhaul::sync_policies;

TEST_CASE("CUDA codecs match the CPU codecs bit for bit", "[gpu]") {
  REQUIRE(cuda::DeviceUsable().ok());
#if LONGHAUL_HAVE_CUDA
  const size_t n = 100003;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> in(n);
  for (auto& x : in) x = dist(rng);
  in[5] = 0.0f;
  in[6] = -0.0f;
  float* d_in = nullptr;
  float* d_out = nullptr;
  std::byte* d_bytes = nullptr;
  REQUIRE(cudaMalloc(&d_in, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_out, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_bytes, n * sizeof(float)) == cudaSuccess);
  // `input` encoded on the device and on the CPU: the same bytes, decoded to
  // the same bits. Returns the bytes (left in d_bytes too).
  auto same_as_cpu = [&](const CompressionOptions& options, const std::vector<float>& input) {
    REQUIRE(cudaMemcpy(d_in, input.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    auto cpu = Compressor::Create(options);
    REQUIRE(cpu.ok());
    std::vector<std::byte> cpu_bytes;
    (*cpu)->Encode(input, cpu_bytes);
    REQUIRE(cuda::EncodeOnDevice(options, d_in, n, d_bytes).ok());
    std::vector<std::byte> gpu_bytes(cpu_bytes.size());
    REQUIRE(cudaMemcpy(gpu_bytes.data(), d_bytes, gpu_bytes.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(gpu_bytes == cpu_bytes);
    std::vector<float> cpu_out(n), gpu_out(n);
    REQUIRE((*cpu)->Decode(cpu_bytes, cpu_out).ok());
    REQUIRE(cuda::DecodeOnDevice(options, d_bytes, n, d_out).ok());
    REQUIRE(cudaMemcpy(gpu_out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(std::memcmp(gpu_out.data(), cpu_out.data(), n * sizeof(float)) == 0);
    return cpu_bytes;
  };
  for (Codec codec : {Codec::kFp32, Codec::kBf16, Codec::kInt8Block, Codec::kInt4Block, Codec::kFp4E3M0}) {
    for (size_t block : {size_t{7}, size_t{256}}) {
      INFO("codec " << CodecName(codec) << ", block " << block);
      same_as_cpu({.codec = codec, .block_size = block}, in);
    }
  }
  {
    // Top-k with ties (repeated magnitudes) must pick the same lower indices.
    std::vector<float> ties = in;
    for (size_t i = 0; i < n; i += 3)
      ties[i] = (i % 2 ? -10.0f : 10.0f);  // above every N(0, 2) sample: the tie rule decides
    const CompressionOptions options{.codec = Codec::kTopK, .topk_fraction = 0.05};
    same_as_cpu(options, ties);
    // A corrupted index is refused.
    uint32_t bad = static_cast<uint32_t>(n);
    REQUIRE(cudaMemcpy(d_bytes + 4, &bad, 4, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cuda::DecodeOnDevice(options, d_bytes, n, d_out).code() == StatusCode::kDataLoss);
  }
  {
    // topk2 has no kernels: the CPU codec through host memory, the same bytes
    // and the same refusal of a malformed payload.
    const CompressionOptions options{.codec = Codec::kTopK2Bit, .topk_fraction = 0.0156};
    const std::vector<std::byte> bytes = same_as_cpu(options, in);
    // k = 1561 (k % 4 = 1): the last byte's top bits are padding and must be 0.
    std::byte last = bytes.back() | std::byte{0x80};
    REQUIRE(cudaMemcpy(d_bytes + bytes.size() - 1, &last, 1, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cuda::DecodeOnDevice(options, d_bytes, n, d_out).code() == StatusCode::kDataLoss);
  }
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_bytes);
#endif
}
