// CUDA paths that need no GPU (built only with LONGHAUL_HAVE_CUDA): the NCCL unique
// id and its rendezvous, the group's option checks, and without a usable GPU a
// Status (never a crash) from the cuBLAS engine and the NCCL group. What needs a
// GPU is in gpu_test.cpp (label gpu, skipped without one).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <thread>
#include <vector>

#include "longhaul/trainer/data.h"
#include "longhaul/trainer/device_trainer.h"
#include "longhaul/trainer/gemm.h"
#include "longhaul/trainer/nccl_group.h"
#include "support/skip.h"

using namespace longhaul;
using namespace longhaul::trainer;
using longhaul::testing::SkipTest;

TEST_CASE("trainer: nccl unique id is 128 bytes and bad group options are rejected", "[trainer][cuda]") {
  auto id = NewNcclUniqueId();
  if (!id.ok()) SkipTest("ncclGetUniqueId unavailable here: " + id.status().ToString());
  CHECK(id->size() == 128);
  NcclGroupOptions o;
  o.unique_id = *id;
  o.rank = 1;
  o.size = 1;
  CHECK(MakeNcclGroup(o).status().code() == StatusCode::kInvalidArgument);
  o.rank = 0;
  o.timeout = std::chrono::milliseconds(0);
  CHECK(MakeNcclGroup(o).status().message().find("timeout") != std::string::npos);
  o.timeout = std::chrono::milliseconds(1000);
  o.unique_id.resize(3);
  CHECK(MakeNcclGroup(o).status().message().find("unique_id") != std::string::npos);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    auto none = MakeNcclGroup({*id, 0, 1, 0});
    REQUIRE_FALSE(none.ok());
    CHECK(none.status().code() == StatusCode::kUnavailable);
    CHECK(MakeCublasGemm(0).status().code() == StatusCode::kUnavailable);
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

TEST_CASE("trainer: the device model and trainer refuse bad options before any device is touched",
          "[trainer][cuda]") {
  ModelConfig bad = *ModelPreset("tiny");
  bad.hidden_dim = 0;
  auto model = DeviceByteLM::Create(bad, 0);
  REQUIRE_FALSE(model.ok());
  CHECK(model.status().code() == StatusCode::kInvalidArgument);
  CHECK(model.status().message().find("hidden_dim") != std::string::npos);

  auto data = MakeDataSource(DataOptions{}, 0, 1, 0, 1);
  REQUIRE(data.ok());
  auto group = MakeSingleRankGroup();
  TrainerOptions options{.model = *ModelPreset("tiny")};
  options.batch_size = 0;
  auto trainer = DeviceInnerTrainer::Create(options, **data, *group, 0);
  REQUIRE_FALSE(trainer.ok());
  CHECK(trainer.status().code() == StatusCode::kInvalidArgument);
  CHECK(trainer.status().message().find("batch_size") != std::string::npos);

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    // Without a usable GPU: a Status naming CUDA, never a crash.
    auto none = DeviceByteLM::Create(*ModelPreset("tiny"), 0);
    REQUIRE_FALSE(none.ok());
    CHECK(none.status().code() == StatusCode::kUnavailable);
    CHECK(none.status().message().find("cuda") != std::string::npos);
    options.batch_size = 4;
    CHECK(DeviceInnerTrainer::Create(options, **data, *group, 0).status().code() == StatusCode::kUnavailable);
  }
}
