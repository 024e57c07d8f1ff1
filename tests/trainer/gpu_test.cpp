// The trainer's CUDA paths on a GPU (label gpu: the suite's main reports every
// case skipped where no CUDA device is usable): cuBLAS matches OpenBLAS, a
// one-rank NCCL group runs its collectives on device memory, and the
// device-resident model and trainer follow the host ones.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "longhaul/trainer/data.h"
#include "longhaul/trainer/device_trainer.h"
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

namespace {

Batch MakeBatch(int batch_size, int context, int salt) {
  Batch batch{batch_size, context, std::vector<uint8_t>(static_cast<size_t>(batch_size) * context),
              std::vector<uint8_t>(batch_size)};
  for (size_t i = 0; i < batch.inputs.size(); ++i) batch.inputs[i] = static_cast<uint8_t>(i * 37 + salt);
  for (size_t i = 0; i < batch.targets.size(); ++i) batch.targets[i] = static_cast<uint8_t>(i * 11 + salt);
  return batch;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - b[i]));
  return d;
}

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, double(std::abs(x)));
  return m;
}

std::unique_ptr<IntraRegionGroup> OneRankNcclGroup() {
  auto id = NewNcclUniqueId();
  REQUIRE(id.ok());
  auto group = MakeNcclGroup({*id, 0, 1, 0});
  REQUIRE(group.ok());
  return std::move(*group);
}

}  // namespace

TEST_CASE("trainer: the device model computes the host model's loss and gradient", "[trainer][gpu]") {
  for (const char* preset : {"tiny", "small"}) {
    INFO("preset " << preset);
    const ModelConfig cfg = *ModelPreset(preset);
    ByteLM host(cfg);
    host.InitParams(5);
    auto device = DeviceByteLM::Create(cfg, 0);
    REQUIRE(device.ok());
    DeviceByteLM& dev = **device;
    REQUIRE(dev.num_params() == host.num_params());
    REQUIRE(dev.Upload(host.params()).ok());
    // A longer batch context than the model's: both read the most recent bytes.
    const Batch batch = MakeBatch(16, cfg.context + 2, 3);
    std::vector<float> g_host(host.num_params());
    const float l_host = host.ForwardBackward(batch, g_host);
    REQUIRE(dev.ForwardBackward(batch).ok());
    std::vector<float> g_dev(dev.num_params() + 1);
    REQUIRE(cudaMemcpy(g_dev.data(), dev.gradient_and_loss(), g_dev.size() * sizeof(float),
                       cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(g_dev.back() == Approx(l_host).epsilon(1e-5));
    g_dev.pop_back();
    CHECK(MaxAbsDiff(g_host, g_dev) <= 1e-4 * MaxAbs(g_host));
    // The parameters did not move, and a held-out loss of other parameters matches.
    std::vector<float> back(dev.num_params());
    REQUIRE(dev.Download(back).ok());
    CHECK(std::equal(back.begin(), back.end(), host.params().begin()));
    std::vector<float> other(host.num_params());
    InitByteLMParams(host.tensors(), 9, other);
    const std::vector<Batch> held_out = {MakeBatch(8, cfg.context, 1), MakeBatch(8, cfg.context, 2)};
    auto mean = dev.MeanLossWith(other, held_out);
    REQUIRE(mean.ok());
    const double expect = (double(host.LossWith(other, held_out[0])) + host.LossWith(other, held_out[1])) / 2;
    CHECK(*mean == Approx(expect).epsilon(1e-5));
    Batch short_context = MakeBatch(4, cfg.context - 1, 0);
    CHECK(dev.ForwardBackward(short_context).code() == StatusCode::kInvalidArgument);
  }
}

TEST_CASE("trainer: the device AdamW step equals the host one bit for bit", "[trainer][gpu]") {
  auto data = MakeDataSource(DataOptions{}, 0, 1, 0, 1);
  REQUIRE(data.ok());
  auto group = OneRankNcclGroup();
  TrainerOptions options{.model = *ModelPreset("tiny")};
  auto trainer = DeviceInnerTrainer::Create(options, **data, *group, 0);
  REQUIRE(trainer.ok());
  DeviceInnerTrainer& dev = **trainer;
  const size_t n = dev.model().num_params();
  std::vector<float> p(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    p[i] = std::sin(0.01f * static_cast<float>(i));
    g[i] = 1e-3f * std::cos(0.02f * static_cast<float>(i));
  }
  REQUIRE(dev.UploadParams(p).ok());
  AdamW host(options.adamw, n);
  std::vector<float> p_dev(n), m_dev(n), v_dev(n);
  for (int t = 1; t <= 3; ++t) {
    INFO("step " << t);
    REQUIRE(cudaMemcpy(dev.device_gradient(), g.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(dev.ApplyGradients().ok());
    host.Step(p, g);
    REQUIRE(dev.DownloadParams(p_dev).ok());
    REQUIRE(dev.DownloadMoments(m_dev, v_dev).ok());
    CHECK(dev.optimizer_step() == host.step());
    CHECK(p_dev == p);
    CHECK(std::equal(m_dev.begin(), m_dev.end(), host.first_moment().begin()));
    CHECK(std::equal(v_dev.begin(), v_dev.end(), host.second_moment().begin()));
  }
}

TEST_CASE("trainer: the device trainer follows the host trainer and repeats itself exactly", "[trainer][gpu]") {
  TrainerOptions options{.model = *ModelPreset("tiny")};
  options.batch_size = 32;
  auto host_data = MakeDataSource(DataOptions{}, 0, 1, 0, 1);
  REQUIRE(host_data.ok());
  auto host_group = MakeSingleRankGroup();
  InnerTrainer host(options, **host_data, *host_group);
  auto group = OneRankNcclGroup();
  std::vector<std::vector<float>> finals;
  for (int run = 0; run < 2; ++run) {
    INFO("device run " << run);
    auto data = MakeDataSource(DataOptions{}, 0, 1, 0, 1);
    REQUIRE(data.ok());
    auto trainer = DeviceInnerTrainer::Create(options, **data, *group, 0);
    REQUIRE(trainer.ok());
    for (int step = 1; step <= 30; ++step) {
      auto loss = (*trainer)->Step();
      REQUIRE(loss.ok());
      if (run == 0) {
        auto host_loss = host.Step();
        REQUIRE(host_loss.ok());
        CHECK(*loss == Approx(*host_loss).epsilon(1e-3));
      }
    }
    CHECK((*trainer)->tokens() == 30u * 32u);
    finals.emplace_back((*trainer)->model().num_params());
    REQUIRE((*trainer)->DownloadParams(finals.back()).ok());
    auto validation = (*trainer)->ValidationLoss(finals.back(), 2);
    REQUIRE(validation.ok());
    CHECK(*validation == Approx(host.ValidationLoss(host.model().params(), 2)).epsilon(1e-3));
  }
  const std::vector<float> host_params(host.model().params().begin(), host.model().params().end());
  // AdamW divides by the gradient's own scale, so an element whose gradient is
  // near zero can move differently on the two: compare the mean difference.
  double diff = 0, scale = 0;
  for (size_t i = 0; i < host_params.size(); ++i) {
    diff += std::abs(double(host_params[i]) - finals[0][i]);
    scale += std::abs(double(host_params[i]));
  }
  CHECK(diff <= 1e-3 * scale);
  CHECK(finals[0] == finals[1]);  // deterministic on one GPU
}

TEST_CASE("trainer: an NCCL group whose peer never joins gives up at its timeout instead of waiting for ever",
          "[trainer][gpu]") {
  auto id = NewNcclUniqueId();
  REQUIRE(id.ok());
  NcclGroupOptions o{*id, 0, 2, 0};  // rank 1 never comes
  o.timeout = std::chrono::milliseconds(1500);
  const auto t0 = std::chrono::steady_clock::now();
  auto group = MakeNcclGroup(o);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_FALSE(group.ok());
  CHECK(group.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(group.status().message().find("rank 0 of 2") != std::string::npos);
  CHECK(waited >= 1.4);
  CHECK(waited < 30);
}
