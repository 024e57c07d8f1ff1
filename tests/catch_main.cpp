// The main of every test binary but the gpu ones (catch_gpu_main.cpp). A case
// that cannot run here ends the process with the skip code (support/skip.h); a
// run whose failures happen to number that code says 1 instead.
#include "catch_runner.h"
#include "support/skip.h"

int main(int argc, char** argv) {
  const int failed = longhaul::testing::RunCatch(argc, argv);  // Catch returns the number of failed checks
  return failed == longhaul::testing::kSkipReturnCode ? 1 : failed;
}
