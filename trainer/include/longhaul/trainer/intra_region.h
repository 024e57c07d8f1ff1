// IntraRegionGroup: the collectives among the workers of one region.
//
// Every inner step all-reduces gradients over this group; after an outer step each
// worker all-gathers the shards of θ(t). Two backends behind one interface:
//  - Gloo over TCP on CPUs (MakeGlooGroup), rendezvous through a gloo FileStore in a
//    directory every worker can reach (the agent creates it), keys under a prefix
//    unique per job and membership epoch, because a FileStore reused with old keys
//    aborts the rendezvous;
//  - NCCL on GPUs (nccl_group.h; spans then point to device memory).
// A group of size 1 needs no backend: MakeGlooGroup returns an in-process group.
//
// Results are bitwise identical on every rank (ring reduce-scatter + all-gather:
// each element is summed once, then copied), which the cross-region invariant of
// identical replicas relies on. Backend failures (a peer gone, a timeout) come back as
// Status (kUnavailable / kDeadlineExceeded), never as exceptions. After a failure the
// group is unusable; build a new one under a new prefix.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "longhaul/common/status.h"

namespace longhaul::trainer {

class IntraRegionGroup {
 public:
  virtual ~IntraRegionGroup();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data <- mean over ranks of data (same length on every rank).
  virtual Status AllReduceMean(std::span<float> data) = 0;
  // all <- concat over ranks of mine; all.size() == mine.size() * size().
  virtual Status AllGather(std::span<const float> mine, std::span<float> all) = 0;
  // data <- root's data.
  virtual Status Broadcast(std::span<float> data, int root) = 0;
  virtual Status Barrier() = 0;
};

// A key-value store for the Gloo rendezvous, for an agent that serves it itself
// (e.g. over its control channel) instead of a shared directory. Each rank Sets its
// address under a few keys and Gets the others'.
class RendezvousStore {
 public:
  virtual ~RendezvousStore();
  virtual Status Set(const std::string& key, const std::vector<char>& value) = 0;
  // Blocks until `key` exists; kDeadlineExceeded after `timeout`.
  virtual Result<std::vector<char>> Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

// A thread-safe in-memory store: ranks that are threads of one process (tests, or an
// agent that relays Set/Get from its workers).
std::shared_ptr<RendezvousStore> MakeInProcessRendezvousStore();

struct GlooGroupOptions {
  std::shared_ptr<RendezvousStore> store;  // when set, used instead of store_dir
  std::filesystem::path store_dir;  // shared rendezvous directory (created if missing)
  std::string prefix;               // unique per job + membership epoch, e.g. "job7/e3"
  int rank = 0;
  int size = 1;
  std::string host = "127.0.0.1";   // address this worker listens on (port chosen by the OS)
  std::chrono::milliseconds timeout{30000};  // rendezvous and each collective
  Status Validate() const;
};

// kInvalidArgument for bad options; kUnavailable/kDeadlineExceeded when the
// rendezvous fails (peers missing, store unreachable).
Result<std::unique_ptr<IntraRegionGroup>> MakeGlooGroup(const GlooGroupOptions& options);

// The trivial group of one rank (no communication).
std::unique_ptr<IntraRegionGroup> MakeSingleRankGroup();

}  // namespace longhaul::trainer
