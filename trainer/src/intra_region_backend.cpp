#include "longhaul/trainer/intra_region_backend.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#ifdef LONGHAUL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace longhaul::trainer {
namespace {

// Device `i` of a rank, as the ranks tell devices apart.
std::string GpuId(const WorkerFacts& f, int i) {
  return static_cast<size_t>(i) < f.gpus.size() ? f.gpus[i] : f.host + "#" + std::to_string(i);
}

// Why NCCL cannot run on this region, naming the first rank that lacks something; none when it can.
std::optional<std::string> WhyNotNccl(std::span<const WorkerFacts> facts) {
  for (size_t r = 0; r < facts.size(); ++r) {
    const std::string who = "worker rank " + std::to_string(r);
    if (!facts[r].nccl_built) return who + " was built without CUDA and NCCL";
    if (facts[r].cuda_devices <= 0) return who + " sees no CUDA device";
    if (!facts[r].parameters_on_device) return who + "'s program keeps its parameters in host memory";
  }
  const std::vector<int> devices = DevicesOfRanks(facts);
  for (size_t r = 0; r < facts.size(); ++r) {
    if (devices[r] < 0)
      return "worker rank " + std::to_string(r) + " would share a CUDA device: other ranks of the region need the " +
             std::to_string(facts[r].cuda_devices) + " it sees on host " + facts[r].host;
  }
  return std::nullopt;
}

// The facts as the store carries them: three decimal fields, the host and the
// devices' ids separated by commas ("-" for none).
std::string Encode(const WorkerFacts& f) {
  std::string ids;
  for (const std::string& id : f.gpus) ids += (ids.empty() ? "" : ",") + id;
  return std::to_string(f.cuda_devices) + " " + (f.nccl_built ? "1" : "0") + " " + (f.parameters_on_device ? "1" : "0") +
         " " + f.host + " " + (ids.empty() ? "-" : ids);
}

std::optional<WorkerFacts> Decode(const std::vector<char>& bytes) {
  const std::string text(bytes.begin(), bytes.end());
  WorkerFacts f;
  int built = -1, on_device = -1, used = 0;
  char host[256] = {}, ids[4096] = {};
  if (std::sscanf(text.c_str(), "%d %d %d %255s %4095s%n", &f.cuda_devices, &built, &on_device, host, ids, &used) != 5 ||
      static_cast<size_t>(used) != text.size() || f.cuda_devices < 0 || (built != 0 && built != 1) ||
      (on_device != 0 && on_device != 1))
    return std::nullopt;
  f.nccl_built = built == 1;
  f.parameters_on_device = on_device == 1;
  f.host = host;
  if (std::string(ids) != "-") {
    std::string id;
    for (const char* c = ids;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (id.empty()) return std::nullopt;
        f.gpus.push_back(std::move(id));
        id.clear();
        if (*c == '\0') break;
      } else {
        id += *c;
      }
    }
    if (f.gpus.size() != static_cast<size_t>(f.cuda_devices)) return std::nullopt;
  }
  return f;
}

}  // namespace

Result<BackendChoice> ChooseIntraRegionBackend(IntraRegionSetting setting, std::span<const WorkerFacts> facts) {
  if (facts.empty()) return InvalidArgument("intra_region: a region without workers has no backend");
  if (setting == IntraRegionSetting::kGloo) return BackendChoice{IntraRegionBackend::kGloo, "the job asks for gloo"};
  const std::optional<std::string> why_not = WhyNotNccl(facts);
  if (!why_not) {
    return BackendChoice{IntraRegionBackend::kNccl, setting == IntraRegionSetting::kNccl
                                                        ? "the job asks for nccl"
                                                        : "every worker sees a CUDA device and keeps its parameters there"};
  }
  if (setting == IntraRegionSetting::kNccl) return FailedPrecondition("intra_region nccl: " + *why_not);
  return BackendChoice{IntraRegionBackend::kGloo, "auto: not nccl, " + *why_not};
}

std::vector<int> DevicesOfRanks(std::span<const WorkerFacts> facts) {
  std::vector<int> device(facts.size(), -1);
  std::map<std::string, size_t> holder;  // device id -> the rank using it
  std::set<std::string> visited;         // devices one rank's search has tried
  // Rank r gets a device: the first free one it sees, else one whose holder
  // moves on to another device it sees (recursively); false when neither is possible.
  std::function<bool(size_t)> place = [&](size_t r) {
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < facts[r].cuda_devices; ++i) {
        const std::string id = GpuId(facts[r], i);
        auto held = holder.find(id);
        if (pass == 0 && held != holder.end()) continue;
        if (pass == 1 && (!visited.insert(id).second || (held != holder.end() && !place(held->second)))) continue;
        holder[id] = r;
        device[r] = i;
        return true;
      }
    }
    return false;
  };
  for (size_t r = 0; r < facts.size(); ++r) {
    visited.clear();
    place(r);
  }
  return device;
}

int DeviceOfRank(std::span<const WorkerFacts> facts, int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= facts.size()) return -1;
  return DevicesOfRanks(facts)[static_cast<size_t>(rank)];
}

WorkerFacts LocalWorkerFacts(bool parameters_on_device) {
  WorkerFacts f;
  f.parameters_on_device = parameters_on_device;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  for (char* c = host; *c != '\0'; ++c)
    if (std::isspace(static_cast<unsigned char>(*c))) *c = '_';  // the store's format separates fields by spaces
  f.host = host;
#ifdef LONGHAUL_HAVE_CUDA
  f.nccl_built = true;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess) {
    f.cuda_devices = devices;
    for (int i = 0; i < devices; ++i) {
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
        f.gpus.clear();  // unknown: ordinals stand for them
        cudaGetLastError();
        break;
      }
      char hex[40] = "GPU-";
      for (int b = 0; b < 16; ++b)
        std::snprintf(hex + 4 + 2 * b, 3, "%02x", static_cast<unsigned char>(prop.uuid.bytes[b]));
      f.gpus.emplace_back(hex);
    }
  } else {
    cudaGetLastError();  // clears the sticky error of a machine without a driver
  }
#endif
  return f;
}

Result<BackendChoice> AgreeIntraRegionBackend(RendezvousStore& store, const std::string& prefix, int rank, int size,
                                              IntraRegionSetting setting, const WorkerFacts& mine,
                                              std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size)
    return InvalidArgument("intra_region: rank " + std::to_string(rank) + " of a region of " + std::to_string(size));
  auto key = [&](int r) { return prefix + "/worker-facts/" + std::to_string(r); };
  const std::string text = Encode(mine);
  LONGHAUL_RETURN_IF_ERROR(store.Set(key(rank), std::vector<char>(text.begin(), text.end())).WithContext("intra_region"));
  std::vector<WorkerFacts> facts(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      facts[r] = mine;
      continue;
    }
    auto value = store.Get(key(r), timeout);
    if (!value.ok()) return value.status().WithContext("intra_region: worker rank " + std::to_string(r) + "'s facts");
    auto decoded = Decode(*value);
    if (!decoded)
      return DataLoss("intra_region: " + key(r) + " is not '<devices> <nccl 0|1> <on device 0|1> <host> <ids|->'");
    facts[r] = *decoded;
  }
  LONGHAUL_ASSIGN_OR_RETURN(BackendChoice choice, ChooseIntraRegionBackend(setting, facts));
  if (choice.backend == IntraRegionBackend::kNccl) choice.device = DeviceOfRank(facts, rank);
  return choice;
}

}  // namespace longhaul::trainer
