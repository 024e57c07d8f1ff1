// The intra_region decision (auto | nccl | gloo) against every rank's facts, and
// the ranks' agreement on it through the rendezvous store (ranks in threads).
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "longhaul/trainer/intra_region_backend.h"

using namespace longhaul;
using namespace longhaul::trainer;

namespace {
const WorkerFacts kGpu{1, true, true, "gpu-host"};  // a device, NCCL, parameters on it
const WorkerFacts kNoDevice{0, true, true, "cpu-host"};
const WorkerFacts kHostParameters{8, true, false, "big-host"};
const WorkerFacts kNoNccl{2, false, true, "old-host"};
// kGpu's facts on machine `host`.
WorkerFacts GpuOn(const std::string& host, int devices = 1) { return {devices, true, true, host}; }
}  // namespace

TEST_CASE("intra_region: auto is nccl only when every worker can take part, else gloo with the reason", "[trainer]") {
  std::vector<WorkerFacts> all_gpu{GpuOn("a"), GpuOn("b"), GpuOn("c")};
  auto choice = ChooseIntraRegionBackend(IntraRegionSetting::kAuto, all_gpu);
  REQUIRE(choice.ok());
  CHECK(choice->backend == IntraRegionBackend::kNccl);

  struct Case {
    WorkerFacts odd;
    const char* reason;
  };
  for (const Case& c : {Case{kNoDevice, "auto: not nccl, worker rank 2 sees no CUDA device"},
                        Case{kHostParameters, "auto: not nccl, worker rank 2's program keeps its parameters in host memory"},
                        Case{kNoNccl, "auto: not nccl, worker rank 2 was built without CUDA and NCCL"}}) {
    std::vector<WorkerFacts> facts{GpuOn("a"), GpuOn("b"), c.odd};
    auto fallback = ChooseIntraRegionBackend(IntraRegionSetting::kAuto, facts);
    REQUIRE(fallback.ok());
    CHECK(fallback->backend == IntraRegionBackend::kGloo);
    CHECK(fallback->reason == c.reason);
  }
}

TEST_CASE("intra_region: nccl is refused naming the rank that lacks something, gloo is always gloo", "[trainer]") {
  std::vector<WorkerFacts> facts{GpuOn("a"), kNoDevice};
  auto refused = ChooseIntraRegionBackend(IntraRegionSetting::kNccl, facts);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message() == "intra_region nccl: worker rank 1 sees no CUDA device");
  std::vector<WorkerFacts> gpus{GpuOn("a"), GpuOn("b")};
  auto nccl = ChooseIntraRegionBackend(IntraRegionSetting::kNccl, gpus);
  REQUIRE(nccl.ok());
  CHECK(nccl->backend == IntraRegionBackend::kNccl);
  auto gloo = ChooseIntraRegionBackend(IntraRegionSetting::kGloo, gpus);
  REQUIRE(gloo.ok());
  CHECK(gloo->backend == IntraRegionBackend::kGloo);
  CHECK(ChooseIntraRegionBackend(IntraRegionSetting::kAuto, {}).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("intra_region: the workers of one machine take a GPU each, and nccl needs as many as they are",
          "[trainer]") {
  // Two machines: three workers on "a" with four GPUs, one on "b" with one.
  const std::vector<WorkerFacts> fits{GpuOn("a", 4), GpuOn("b", 1), GpuOn("a", 4), GpuOn("a", 4)};
  auto nccl = ChooseIntraRegionBackend(IntraRegionSetting::kAuto, fits);
  REQUIRE(nccl.ok());
  CHECK(nccl->backend == IntraRegionBackend::kNccl);
  CHECK(DeviceOfRank(fits, 0) == 0);
  CHECK(DeviceOfRank(fits, 1) == 0);
  CHECK(DeviceOfRank(fits, 2) == 1);
  CHECK(DeviceOfRank(fits, 3) == 2);
  // Two workers on one machine with one GPU: NCCL would refuse them.
  const std::vector<WorkerFacts> shared{GpuOn("a"), GpuOn("a")};
  auto fallback = ChooseIntraRegionBackend(IntraRegionSetting::kAuto, shared);
  REQUIRE(fallback.ok());
  CHECK(fallback->backend == IntraRegionBackend::kGloo);
  CHECK(fallback->reason ==
        "auto: not nccl, worker rank 1 would share a CUDA device: host a runs 2 or more of the region's workers "
        "and they see 1");
  CHECK(ChooseIntraRegionBackend(IntraRegionSetting::kNccl, shared).status().code() ==
        StatusCode::kFailedPrecondition);
}

TEST_CASE("intra_region: this process's facts match its build", "[trainer]") {
  const WorkerFacts f = LocalWorkerFacts(false);
  CHECK_FALSE(f.parameters_on_device);
  CHECK_FALSE(f.host.empty());
  CHECK(f.host.find(' ') == std::string::npos);
#ifdef LONGHAUL_HAVE_CUDA
  CHECK(f.nccl_built);
#else
  CHECK_FALSE(f.nccl_built);
  CHECK(f.cuda_devices == 0);
#endif
}

TEST_CASE("intra_region: every rank reaches the same choice through the store, and a missing or bad rank is named",
          "[trainer]") {
  auto store = MakeInProcessRendezvousStore();
  const std::vector<WorkerFacts> facts{GpuOn("a"), GpuOn("b"), kNoDevice};
  std::vector<Result<BackendChoice>> choices(3, Unavailable("not run"));
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    ranks.emplace_back([&, rank] {
      choices[rank] = AgreeIntraRegionBackend(*store, "job3/launch-2", rank, 3, IntraRegionSetting::kAuto, facts[rank],
                                              std::chrono::seconds(10));
    });
  }
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    REQUIRE(choices[rank].ok());
    CHECK(choices[rank]->backend == IntraRegionBackend::kGloo);
    CHECK(choices[rank]->reason == "auto: not nccl, worker rank 2 sees no CUDA device");
    CHECK(choices[rank]->device == -1);
  }
  // Where they agree on nccl, each rank learns its own device (through the store: hosts included).
  auto gpu_store = MakeInProcessRendezvousStore();
  const std::vector<WorkerFacts> two_gpus{GpuOn("a", 2), GpuOn("a", 2)};
  std::vector<Result<BackendChoice>> nccl(2, Unavailable("not run"));
  ranks.clear();
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      nccl[rank] = AgreeIntraRegionBackend(*gpu_store, "job7", rank, 2, IntraRegionSetting::kAuto, two_gpus[rank],
                                           std::chrono::seconds(10));
    });
  }
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    REQUIRE(nccl[rank].ok());
    CHECK(nccl[rank]->backend == IntraRegionBackend::kNccl);
    CHECK(nccl[rank]->device == rank);
  }

  auto lonely = MakeInProcessRendezvousStore();
  auto missing = AgreeIntraRegionBackend(*lonely, "job4", 0, 2, IntraRegionSetting::kAuto, kGpu,
                                         std::chrono::milliseconds(50));
  CHECK(missing.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(missing.status().message().find("worker rank 1's facts") != std::string::npos);
  REQUIRE(lonely->Set("job5/worker-facts/1", {'1', ' ', '2'}).ok());
  auto bad = AgreeIntraRegionBackend(*lonely, "job5", 0, 2, IntraRegionSetting::kAuto, kGpu, std::chrono::seconds(1));
  CHECK(bad.status().code() == StatusCode::kDataLoss);
  CHECK(bad.status().message().find("job5/worker-facts/1") != std::string::npos);
  CHECK(AgreeIntraRegionBackend(*lonely, "job6", 2, 2, IntraRegionSetting::kAuto, kGpu, std::chrono::seconds(1))
            .status()
            .code() == StatusCode::kInvalidArgument);
}
