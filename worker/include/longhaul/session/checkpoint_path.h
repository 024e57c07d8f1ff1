// Where a region's checkpoint of a round goes: one file per (job, region, round).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace longhaul::session {

std::filesystem::path CheckpointPath(const std::filesystem::path& dir, const std::string& job_id,
                                     const std::string& region, uint32_t round);

}  // namespace longhaul::session
