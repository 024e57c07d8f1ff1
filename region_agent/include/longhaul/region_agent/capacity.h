// What this machine offers a job: worker slots, GPUs, CPU cores, free memory.
#pragma once

#include "longhaul/v1/control.pb.h"

namespace longhaul::region_agent {

// `workers` is the configured slot count; the rest is probed (/proc/meminfo
// MemAvailable, hardware threads, CUDA devices when built with CUDA).
v1::Capacity ProbeCapacity(int workers);

}  // namespace longhaul::region_agent
