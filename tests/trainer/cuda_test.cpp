// CUDA paths that need no GPU (built only with LONGHAUL_HAVE_CUDA): the NCCL unique
// id and its rendezvous, the group's option checks, and without a usable GPU a
// Status (never a crash) from the cuBLAS engine and the NCCL group. What needs a
// GPU is in gpu_test.cpp (label gpu, skipped without one).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <thread>
#include <vector>

#include "longhaul/trainer/gemm.h"
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
