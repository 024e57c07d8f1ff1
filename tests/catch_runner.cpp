// Catch2's implementation, compiled once for every test binary.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_runner.h"

int longhaul::testing::RunCatch(int argc, char** argv) { return Catch::Session().run(argc, argv); }
