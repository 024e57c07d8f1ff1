// The intra_region decision (auto | nccl | gloo) against every rank's facts, and
// the ranks' agreement on it through the rendezvous store (ranks in threads).
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "longhaul/trainer/intra_region_backend.h"

using namespace longhaul;
using namespace longhaul::trainer;

namespace {
const WorkerFacts kNoDevice{0, true, true, "cpu-host", {}};
const WorkerFacts kHostParameters{8, true, false, "big-host", {}};
const WorkerFacts kNoNccl{2, false, true, "old-host", {}};
// A worker with `devices` CUDA devices, NCCL and its parameters on them, on machine `host`.
WorkerFacts GpuOn(const std::string& host, int devices = 1) { return {devices, true, true, host, {}}; }
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
        "auto: not nccl, worker rank 1 would share a CUDA device: other ranks of the region need the 1 it sees on "
        "host a");
  CHECK(DeviceOfRank(shared, 1) == -1);
  CHECK(ChooseIntraRegionBackend(IntraRegionSetting::kNccl, shared).status().code() ==
        StatusCode::kFailedPrecondition);
  // Slurm's GPU binding: two tasks on one machine each see only their own GPU,
  // as ordinal 0; their UUIDs tell them apart.
  const std::vector<WorkerFacts> bound{{1, true, true, "node1", {"GPU-aa"}}, {1, true, true, "node1", {"GPU-bb"}}};
  auto slurm = ChooseIntraRegionBackend(IntraRegionSetting::kAuto, bound);
  REQUIRE(slurm.ok());
  CHECK(slurm->backend == IntraRegionBackend::kNccl);
  CHECK(DeviceOfRank(bound, 0) == 0);
  CHECK(DeviceOfRank(bound, 1) == 0);
  // Without the binding both see both: the second takes the second.
  const std::vector<WorkerFacts> unbound{{2, true, true, "node1", {"GPU-aa", "GPU-bb"}},
                                         {2, true, true, "node1", {"GPU-aa", "GPU-bb"}}};
  CHECK(DeviceOfRank(unbound, 1) == 1);
  // A rank that sees both GPUs before one bound to the first: taking the first
  // free device would leave the second rank without one; the first moves on.
  const std::vector<WorkerFacts> mixed{{2, true, true, "node1", {"GPU-aa", "GPU-bb"}},
                                       {1, true, true, "node1", {"GPU-aa"}}};
  CHECK(DevicesOfRanks(mixed) == std::vector<int>{1, 0});
  auto matched = ChooseIntraRegionBackend(IntraRegionSetting::kAuto, mixed);
  REQUIRE(matched.ok());
  CHECK(matched->backend == IntraRegionBackend::kNccl);
  // The same through a chain: rank 2 sees only A, which moves rank 1 from A
  // to B, which moves rank 0 from B to C.
  const std::vector<WorkerFacts> chain{{2, true, true, "n", {"GPU-B", "GPU-C"}},
                                       {2, true, true, "n", {"GPU-A", "GPU-B"}},
                                       {1, true, true, "n", {"GPU-A"}}};
  CHECK(DevicesOfRanks(chain) == std::vector<int>{1, 1, 0});
  // Three ranks that between them see two GPUs: the last is left without one,
  // and the others keep theirs.
  const std::vector<WorkerFacts> short_one{{2, true, true, "n", {"GPU-A", "GPU-B"}},
                                           {1, true, true, "n", {"GPU-A"}},
                                           {1, true, true, "n", {"GPU-B"}}};
  CHECK(DevicesOfRanks(short_one) == std::vector<int>{1, 0, -1});
  CHECK(DeviceOfRank(short_one, 3) == -1);
  CHECK(ChooseIntraRegionBackend(IntraRegionSetting::kNccl, short_one).status().message() ==
        "intra_region nccl: worker rank 2 would share a CUDA device: other ranks of the region need the 1 it sees on "
        "host n");
}

TEST_CASE("intra_region: this process's facts match its build", "[trainer]") {
  const WorkerFacts f = LocalWorkerFacts(false);
  CHECK_FALSE(f.parameters_on_device);
  CHECK_FALSE(f.host.empty());
  CHECK(f.host.find(' ') == std::string::npos);
  CHECK((f.gpus.empty() || f.gpus.size() == static_cast<size_t>(f.cuda_devices)));
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
  const std::vector<WorkerFacts> two_gpus{{2, true, true, "a", {"GPU-01", "GPU-02"}},
                                          {2, true, true, "a", {"GPU-01", "GPU-02"}}};
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
  auto missing = AgreeIntraRegionBackend(*lonely, "job4", 0, 2, IntraRegionSetting::kAuto, GpuOn("h"),
                                         std::chrono::milliseconds(50));
  CHECK(missing.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(missing.status().message().find("worker rank 1's facts") != std::string::npos);
  REQUIRE(lonely->Set("job5/worker-facts/1", {'1', ' ', '2'}).ok());
  const std::string wrong_count = "2 1 1 host GPU-01";  // two devices, one id
  REQUIRE(lonely->Set("job8/worker-facts/1", std::vector<char>(wrong_count.begin(), wrong_count.end())).ok());
  CHECK(AgreeIntraRegionBackend(*lonely, "job8", 0, 2, IntraRegionSetting::kAuto, GpuOn("h"), std::chrono::seconds(1))
            .status()
            .code() == StatusCode::kDataLoss);
  auto bad = AgreeIntraRegionBackend(*lonely, "job5", 0, 2, IntraRegionSetting::kAuto, GpuOn("h"), std::chrono::seconds(1));
  CHECK(bad.status().code() == StatusCode::kDataLoss);
  CHECK(bad.status().message().find("job5/worker-facts/1") != std::string::npos);
  CHECK(AgreeIntraRegionBackend(*lonely, "job6", 2, 2, IntraRegionSetting::kAuto, GpuOn("h"), std::chrono::seconds(1))
            .status()
            .code() == StatusCode::kInvalidArgument);
}
