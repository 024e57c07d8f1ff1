// The Catch2 main of the suites whose every case needs a CUDA device (label gpu).
// Without a usable device (no GPU, no driver, or a build without CUDA) it runs
// nothing and exits with the skip code (support/skip.h), which ctest reports
// as skipped: a test that could not run never counts as passed. Listing the
// cases (test discovery at build time) needs no device.
#include <string_view>

#include "catch_runner.h"
#include "support/skip.h"
#include "longhaul/sync_policies/cuda_codecs.h"

namespace {
bool OnlyLists(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with("--list")) return true;
  }
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  if (!OnlyLists(argc, argv)) {
    const longhaul::Status usable = longhaul::sync_policies::cuda::DeviceUsable();
    if (!usable.ok()) {
      longhaul::testing::SkipTest("this test needs a CUDA device: " + usable.ToString());
    }
  }
  return longhaul::testing::RunCatch(argc, argv);
}
