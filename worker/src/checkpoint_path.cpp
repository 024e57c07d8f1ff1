#include "longhaul/session/checkpoint_path.h"

#include <cinttypes>
#include <cstdio>

namespace longhaul::session {

std::filesystem::path CheckpointPath(const std::filesystem::path& dir, const std::string& job_id,
                                     const std::string& region, uint32_t round) {
  char name[64];
  std::snprintf(name, sizeof(name), "round-%08" PRIu32, round);
  return dir / (job_id + "-" + region + "-" + name + ".safetensors");
}

}  // namespace longhaul::session
