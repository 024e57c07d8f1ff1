// Catch2's session, for the test binaries' mains (catch_main.cpp,
// catch_gpu_main.cpp); its implementation is compiled once (catch_runner.cpp).
#pragma once

namespace longhaul::testing {

// Runs the test cases argv selects (Catch::Session().run); returns the exit
// code: the number of failed checks, but 1 where that number is the skip code
// (support/skip.h), so a failing run never reads as skipped.
int RunCatch(int argc, char** argv);

}  // namespace longhaul::testing
