// The intra_region decision (auto | nccl | gloo) against every rank's facts, and
// the ranks' agreement on it through the rendezvous store (ranks in threads).
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "longhaul/trainer/intra_region_backend.h"

using namespace longhaul;
using namespace longhaul::trainer;

namespace {
const WorkerFacts kGpu{1, true, true};           // a device, NCCL, parameters on it
const WorkerFacts kNoDevice{0, true, true};
const WorkerFacts kHostParameters{8, true, false};
const WorkerFacts kNoNccl{2, false, true};
}  // namespace

TEST_CASE("intra_region: auto is nccl only when every worker can take part, else gloo with the reason", "[trainer]") {
  std::vector<WorkerFacts> all_gpu{kGpu, kGpu, kGpu};
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
    std::vector<WorkerFacts> facts{kGpu, kGpu, c.odd};
    auto fallback = ChooseIntraRegionBackend(IntraRegionSetting::kAuto, facts);
    REQUIRE(fallback.ok());
    CHECK(fallback->backend == IntraRegionBackend::kGloo);
    CHECK(fallback->reason == c.reason);
  }
}

TEST_CASE("intra_region: nccl is refused naming the rank that lacks something, gloo is always gloo", "[trainer]") {
  std::vector<WorkerFacts> facts{kGpu, kNoDevice};
  auto refused = ChooseIntraRegionBackend(IntraRegionSetting::kNccl, facts);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message() == "intra_region nccl: worker rank 1 sees no CUDA device");
  std::vector<WorkerFacts> gpus{kGpu, kGpu};
  auto nccl = ChooseIntraRegionBackend(IntraRegionSetting::kNccl, gpus);
  REQUIRE(nccl.ok());
  CHECK(nccl->backend == IntraRegionBackend::kNccl);
  auto gloo = ChooseIntraRegionBackend(IntraRegionSetting::kGloo, gpus);
  REQUIRE(gloo.ok());
  CHECK(gloo->backend == IntraRegionBackend::kGloo);
  CHECK(ChooseIntraRegionBackend(IntraRegionSetting::kAuto, {}).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("intra_region: this process's facts match its build", "[trainer]") {
  const WorkerFacts f = LocalWorkerFacts(false);
  CHECK_FALSE(f.parameters_on_device);
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
  const std::vector<WorkerFacts> facts{kGpu, kGpu, kNoDevice};
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
