// NCCL backend of IntraRegionGroup (device memory, one stream, blocking calls).
#include "longhaul/trainer/nccl_group.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <string>

namespace longhaul::trainer {
namespace {

Status NcclError(const char* what, ncclResult_t r) {
  return Unavailable(std::string("nccl ") + what + ": " + ncclGetErrorString(r));
}
Status CudaError(const char* what, cudaError_t e) {
  return Unavailable(std::string("cuda ") + what + ": " + cudaGetErrorString(e));
}

using Clock = std::chrono::steady_clock;

// Waits for a non-blocking communicator's pending work: until its async state
// leaves ncclInProgress and (with a stream) the stream is idle. kDeadlineExceeded
// past `deadline`, an NCCL or CUDA error as soon as one shows; the caller aborts
// the communicator on any failure.
Status AwaitComm(ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t got = ncclCommGetAsyncError(comm, &state);
    if (got != ncclSuccess) return NcclError(what.c_str(), got);
    if (state != ncclSuccess && state != ncclInProgress) return NcclError(what.c_str(), state);
    if (state == ncclSuccess) {
      if (stream == nullptr) return Status::Ok();
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) return Status::Ok();
      if (q != cudaErrorNotReady) return CudaError(what.c_str(), q);
    }
    if (Clock::now() >= deadline)
      return DeadlineExceeded("nccl " + what + ": not done in time (a peer gone or stuck?)");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

class NcclGroup final : public IntraRegionGroup {
 public:
  NcclGroup(ncclComm_t comm, cudaStream_t stream, int rank, int size, int device, float* scratch,
            std::chrono::milliseconds timeout)
      : comm_(comm), stream_(stream), rank_(rank), size_(size), device_(device), scratch_(scratch), timeout_(timeout) {}
  ~NcclGroup() override {
    cudaSetDevice(device_);
    if (comm_ != nullptr) {
      // A non-blocking communicator finishes its work before it is destroyed;
      // one that cannot within the timeout is aborted.
      const ncclResult_t r = ncclCommFinalize(comm_);
      const bool finished = (r == ncclSuccess || r == ncclInProgress) &&
                            AwaitComm(comm_, nullptr, Clock::now() + timeout_, "comm finalize").ok();
      finished ? ncclCommDestroy(comm_) : ncclCommAbort(comm_);
    }
    cudaFree(scratch_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllReduceMean(std::span<float> data) override {
    if (data.empty()) return Status::Ok();
    LONGHAUL_RETURN_IF_ERROR(Usable());
    return Run("all-reduce", ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat,
                                           ncclAvg, comm_, stream_));
  }
  Status AllGather(std::span<const float> mine, std::span<float> all) override {
    if (all.size() != mine.size() * static_cast<size_t>(size_))
      return InvalidArgument("all-gather: output has " + std::to_string(all.size()) +
                             " floats, want " + std::to_string(mine.size()) + " x " + std::to_string(size_));
    if (mine.empty()) return Status::Ok();
    LONGHAUL_RETURN_IF_ERROR(Usable());
    return Run("all-gather", ncclAllGather(mine.data(), all.data(), mine.size(), ncclFloat, comm_, stream_));
  }
  Status Broadcast(std::span<float> data, int root) override {
    if (root < 0 || root >= size_)
      return InvalidArgument("broadcast: root " + std::to_string(root) + " not in a group of " + std::to_string(size_));
    if (data.empty()) return Status::Ok();
    LONGHAUL_RETURN_IF_ERROR(Usable());
    return Run("broadcast", ncclBroadcast(data.data(), data.data(), data.size(), ncclFloat, root, comm_, stream_));
  }
  Status Barrier() override {
    LONGHAUL_RETURN_IF_ERROR(Usable());
    return Run("barrier", ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, comm_, stream_));
  }

 private:
  Status Usable() const {
    if (comm_ != nullptr) return Status::Ok();
    return FailedPrecondition("nccl group: aborted after an earlier failure (build a new one)");
  }
  // The collective's enqueue result, then its completion within the timeout;
  // on any failure the communicator is aborted, so no rank waits for ever.
  Status Run(const char* what, ncclResult_t r) {
    Status s = r == ncclSuccess || r == ncclInProgress
                   ? AwaitComm(comm_, stream_, Clock::now() + timeout_, what)
                   : NcclError(what, r);
    if (!s.ok()) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    return s;
  }
  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_, size_, device_;
  float* scratch_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

Result<std::vector<uint8_t>> NewNcclUniqueId() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return NcclError("get unique id", r);
  return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(id.internal),
                              reinterpret_cast<const uint8_t*>(id.internal) + NCCL_UNIQUE_ID_BYTES);
}

Result<std::vector<uint8_t>> ShareNcclUniqueId(RendezvousStore& store, const std::string& prefix, int rank,
                                               std::chrono::milliseconds timeout) {
  const std::string key = prefix + "/nccl-unique-id";
  if (rank == 0) {
    LONGHAUL_ASSIGN_OR_RETURN(auto id, NewNcclUniqueId());
    LONGHAUL_RETURN_IF_ERROR(store.Set(key, std::vector<char>(id.begin(), id.end())).WithContext("nccl group " + key));
    return id;
  }
  auto value = store.Get(key, timeout);
  if (!value.ok()) return value.status().WithContext("nccl group: rank 0's " + key);
  if (value->size() != NCCL_UNIQUE_ID_BYTES) {
    return DataLoss("nccl group: " + key + " holds " + std::to_string(value->size()) + " bytes, not " +
                    std::to_string(NCCL_UNIQUE_ID_BYTES));
  }
  return std::vector<uint8_t>(value->begin(), value->end());
}

Status NcclGroupOptions::Validate() const {
  if (unique_id.size() != NCCL_UNIQUE_ID_BYTES)
    return InvalidArgument("nccl group: 'unique_id' must be " + std::to_string(NCCL_UNIQUE_ID_BYTES) +
                           " bytes, got " + std::to_string(unique_id.size()));
  if (size < 1) return InvalidArgument("nccl group: 'size' must be >= 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size)
    return InvalidArgument("nccl group: 'rank' must be in [0, " + std::to_string(size) + "), got " + std::to_string(rank));
  if (device < 0) return InvalidArgument("nccl group: 'device' must be >= 0, got " + std::to_string(device));
  if (timeout.count() <= 0)
    return InvalidArgument("nccl group: 'timeout' must be > 0 ms, got " + std::to_string(timeout.count()));
  return Status::Ok();
}

Result<std::unique_ptr<IntraRegionGroup>> MakeNcclGroup(const NcclGroupOptions& options) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  cudaError_t e = cudaSetDevice(options.device);
  if (e != cudaSuccess) return CudaError("set device", e);
  // A blocking stream: each collective starts after the work its caller queued
  // on the legacy default stream (the device model's kernels and cuBLAS calls
  // that wrote the buffer), with no event to record.
  cudaStream_t stream = nullptr;
  if ((e = cudaStreamCreateWithFlags(&stream, cudaStreamDefault)) != cudaSuccess)
    return CudaError("create stream", e);
  float* scratch = nullptr;
  if ((e = cudaMalloc(&scratch, sizeof(float))) != cudaSuccess || (e = cudaMemset(scratch, 0, sizeof(float))) != cudaSuccess) {
    cudaFree(scratch);
    cudaStreamDestroy(stream);
    return CudaError("malloc", e);
  }
  ncclUniqueId id;
  std::memcpy(id.internal, options.unique_id.data(), NCCL_UNIQUE_ID_BYTES);
  // Non-blocking: the group's own waits are bounded by options.timeout (a
  // blocking communicator waits for a missing peer for ever).
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, options.size, id, options.rank, &config);
  Status joined = r == ncclSuccess || r == ncclInProgress
                      ? AwaitComm(comm, nullptr, Clock::now() + options.timeout,
                                  "comm init of rank " + std::to_string(options.rank) + " of " +
                                      std::to_string(options.size))
                      : NcclError("comm init rank", r);
  if (!joined.ok()) {
    if (comm != nullptr) ncclCommAbort(comm);
    cudaFree(scratch);
    cudaStreamDestroy(stream);
    return joined;
  }
  return std::unique_ptr<IntraRegionGroup>(
      new NcclGroup(comm, stream, options.rank, options.size, options.device, scratch, options.timeout));
}

}  // namespace longhaul::trainer
