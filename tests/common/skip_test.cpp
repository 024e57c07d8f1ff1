// The test suite's skip: a case that cannot run reports skipped, not passed.
#include <catch2/catch.hpp>


#include <chrono>
#include <filesystem>

#include "support/skip.h"
#include "support/subprocess.h"

using namespace longhaul::testing;
using namespace std::chrono_literals;

// Hidden ([.]): neither discovered by ctest nor run by default; the case below
// runs it in a process of its own.
TEST_CASE("skip: a case that cannot run here", "[.][skip-self]") {
  SkipTest("the reason named here");
  FAIL("SkipTest returned");
}

TEST_CASE("skip: a skipped case ends its process with the skip code and says why, so ctest reports it skipped",
          "[skip]") {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto run = Subprocess::Spawn({self, "[skip-self]"}, {.capture_stdout = true});
  REQUIRE(run.ok());
  const std::string out = run->ReadAll(30s);
  CHECK(run->Wait(30s) == kSkipReturnCode);
  CHECK(out.find("SKIPPED: the reason named here\n") != std::string::npos);
  CHECK(out.find("SkipTest returned") == std::string::npos);
}
