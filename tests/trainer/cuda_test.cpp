// CUDA paths (built only with LONGHAUL_HAVE_CUDA): without a usable GPU they must fail
// with a Status, never crash; with one, cuBLAS matches OpenBLAS and a one-rank NCCL
// group runs its collectives on device memory. The unique id's rendezvous needs no GPU.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <thread>
#include <vector>

#include "longhaul/trainer/gemm.h"
#include "longhaul/trainer/model.h"
#include "longhaul/trainer/nccl_group.h"

using namespace longhaul;
using namespace longhaul::trainer;

TEST_CASE("trainer: nccl unique id is 128 bytes and bad group options are rejected", "[trainer][cuda]") {
  auto id = NewNcclUniqueId();
  if (!id.ok()) {
    WARN("ncclGetUniqueId unavailable here: " << id.status().ToString());
    return;
  }
  CHECK(id->size() == 128);
  NcclGroupOptions o;
  o.unique_id = *id;
  o.rank = 1;
  o.size = 1;
  CHECK(MakeNcclGroup(o).status().code() == StatusCode::kInvalidArgument);
  o.unique_id.resize(3);
  o.rank = 0;
  CHECK(MakeNcclGroup(o).status().message().find("unique_id") != std::string::npos);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    auto none = MakeNcclGroup({*id, 0, 1, 0});
    REQUIRE_FALSE(none.ok());
    CHECK(none.status().code() == StatusCode::kUnavailable);
  }
}

TEST_CASE("trainer: the nccl unique id travels through the region's rendezvous store", "[trainer][cuda]") {
  auto store = MakeInProcessRendezvousStore();
  std::vector<Result<std::vector<uint8_t>>> ids(3, Unavailable("not run"));
  std::vector<std::thread> ranks;
  for (int rank = 2; rank >= 0; --rank) {  // the readers first: they wait for rank 0
    ranks.emplace_back([&, rank] { ids[rank] = ShareNcclUniqueId(*store, "job7/launch-1", rank, std::chrono::seconds(10)); });
  }
  for (auto& t : ranks) t.join();
  if (ids[0].ok()) {
    REQUIRE(ids[1].ok());
    REQUIRE(ids[2].ok());
    CHECK(ids[0]->size() == 128);
    CHECK(*ids[1] == *ids[0]);
    CHECK(*ids[2] == *ids[0]);
  } else {
    WARN("ncclGetUniqueId unavailable here: " << ids[0].status().ToString());
  }
  // Without rank 0 a reader names the key it waited for; a value of another length is refused.
  auto lonely = MakeInProcessRendezvousStore();
  auto missing = ShareNcclUniqueId(*lonely, "job8", 1, std::chrono::milliseconds(50));
  CHECK(missing.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(missing.status().message().find("job8/nccl-unique-id") != std::string::npos);
  REQUIRE(lonely->Set("job9/nccl-unique-id", {'x'}).ok());
  CHECK(ShareNcclUniqueId(*lonely, "job9", 1, std::chrono::seconds(1)).status().code() == StatusCode::kDataLoss);
}

TEST_CASE("trainer: cuBLAS engine matches OpenBLAS on the model, or reports no GPU", "[trainer][cuda]") {
  auto gemm = MakeCublasGemm(0);
  if (!gemm.ok()) {
    CHECK(gemm.status().code() == StatusCode::kUnavailable);
    WARN("no GPU: " << gemm.status().ToString());
    return;
  }
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

TEST_CASE("trainer: one-rank NCCL group runs collectives on device memory", "[trainer][cuda]") {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    WARN("no GPU: skipping the NCCL collective run");
    return;
  }
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
