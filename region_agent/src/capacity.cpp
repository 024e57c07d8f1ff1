#include "longhaul/region_agent/capacity.h"

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#ifdef LONGHAUL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace longhaul::region_agent {
namespace {

uint64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      uint64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

uint32_t GpuCount() {
#ifdef LONGHAUL_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return static_cast<uint32_t>(n);
#endif
  return 0;  // no CUDA build, or no usable driver (cudaGetDeviceCount fails)
}

}  // namespace

v1::Capacity ProbeCapacity(int workers) {
  v1::Capacity c;
  c.set_workers(static_cast<uint32_t>(workers > 0 ? workers : 0));
  c.set_gpus(GpuCount());
  c.set_cpu_slots(std::thread::hardware_concurrency());
  c.set_free_memory_bytes(MemAvailableBytes());
  return c;
}

}  // namespace longhaul::region_agent
