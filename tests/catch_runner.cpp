// Catch2's implementation, compiled once for every test binary.
#define CATCH_CONFIG_RUNNER
// Catch2 v2 indents a failing case's name after its first ": "; past the
// console width that throws out of its reporter (std::terminate, the failure
// itself unreported). Test names keep ": " early; this leaves room.
#define CATCH_CONFIG_CONSOLE_WIDTH 120
#include <catch2/catch.hpp>

#include "catch_runner.h"
#include "support/skip.h"

int longhaul::testing::RunCatch(int argc, char** argv) {
  const int failed = Catch::Session().run(argc, argv);
  return failed == kSkipReturnCode ? 1 : failed;
}
