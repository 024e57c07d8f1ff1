// Test support: a case that cannot run on this machine (no root, no Slurm, no
// CUDA device) is reported as skipped, never as passed.
//
// ctest runs every Catch case in a process of its own, and every suite is
// registered with LONGHAUL_SKIP_RETURN_CODE as its SKIP_RETURN_CODE
// (tests/CMakeLists.txt): SkipTest prints "SKIPPED: <why>" and ends the process
// with that code. Call it before the case starts anything. A run of a whole
// binary by hand stops at the first skipped case; name the cases to run then.
#pragma once

#include <string>

namespace longhaul::testing {

inline constexpr int kSkipReturnCode = LONGHAUL_SKIP_RETURN_CODE;

[[noreturn]] void SkipTest(const std::string& why);

// SkipTest unless this process runs as root (network namespaces, other users,
// cgroups); `what` names what needs it.
void SkipUnlessRoot(const std::string& what);

}  // namespace longhaul::testing
