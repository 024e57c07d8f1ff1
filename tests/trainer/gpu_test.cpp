// The trainer's CUDA paths on a GPU (label gpu: the suite's main reports every
// case skipped where no CUDA device is usable): cuBLAS matches OpenBLAS, and a
// one-rank NCCL group runs its collectives on device memory.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "longhaul/trainer/gemm.h"
#include "longhaul/trainer/model.h"
#include "longhaul/trainer/nccl_group.h"

using namespace longhaul;
using namespace longhaul::trainer;

TEST_CASE("trainer: cuBLAS engine matches OpenBLAS on the model", "[trainer][gpu]") {
  auto gemm = MakeCublasGemm(0);
  REQUIRE(gemm.ok());
  auto cfg = *ModelPreset("tiny");
  ByteLM cpu(cfg), gpu(cfg, *gemm);
  cpu.InitParams(5);
  gpu.InitParams(5);
  Batch batch{16, cfg.context, std::vector<uint8_t>(16 * cfg.context), std::vector<uint8_t>(16)};
  for (size_t i = 0; i < batch.inputs.size(); ++i) batch.inputs[i] = static_cast<uint8_t>(i * 37);
  for (size_t i = 0; i < batch.targets.size(); ++i) batch.targets[i] = static_cast<uint8_t>(i * 11);
  std::vector<float> g_cpu(cpu.num_params()), g_gpu(gpu.num_params());
  const float l_cpu = cpu.ForwardBackward(batch, g_cpu);
  const float l_gpu = gpu.ForwardBackward(batch, g_gpu);
  CHECK(l_gpu == Approx(l_cpu).epsilon(1e-4));
  double max_diff = 0;
  for (size_t i = 0; i < g_cpu.size(); ++i) max_diff = std::max(max_diff, std::abs(double(g_cpu[i]) - g_gpu[i]));
  CHECK(max_diff < 1e-4);
}

TEST_CASE("trainer: one-rank NCCL group runs collectives on device memory", "[trainer][gpu]") {
  auto id = NewNcclUniqueId();
  REQUIRE(id.ok());
  auto group = MakeNcclGroup({*id, 0, 1, 0});
  REQUIRE(group.ok());
  std::vector<float> host = {1, 2, 3, 4};
  float* dev = nullptr;
  REQUIRE(cudaMalloc(&dev, 8 * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(dev, host.data(), 4 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK((*group)->AllReduceMean({dev, 4}).ok());
  CHECK((*group)->AllGather({dev, 4}, {dev + 4, 4}).ok());
  CHECK((*group)->Broadcast({dev, 4}, 0).ok());
  CHECK((*group)->Barrier().ok());
  std::vector<float> back(8);
  REQUIRE(cudaMemcpy(back.data(), dev, 8 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4});
  cudaFree(dev);
}
