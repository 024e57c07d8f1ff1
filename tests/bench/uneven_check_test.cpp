// bench_uneven --check: time-budgeted rounds through the real processes (a
// region throttled to a quarter of its speed runs fewer steps over the rounds,
// every commit with the regions' hashes agreeing), and the bench's table.
#include <catch2/catch.hpp>

#include <fstream>

#include "support/subprocess.h"
#include "support/temp_dir.h"

using namespace longhaul::testing;
using namespace std::chrono_literals;

TEST_CASE("bench: bench_uneven --check runs fewer steps in the slow region over the time-budgeted rounds",
          "[bench][budget]") {
  // Steps of about 10 ms (batch 1024): with the tiny preset's 1 ms steps a
  // round's budget was 0.1 s, and on a loaded machine one scheduling delay of
  // a fast region's worker cost it most of its steps.
  const TempDir out("bench-uneven");
  const auto log = out.path() / "bench.log";
  auto bench = Subprocess::Spawn({std::string(LONGHAUL_BIN_DIR) + "/bench_uneven", "--check", "--rounds", "3",
                                  "--inner-steps", "50", "--batch", "1024", "--throttle-percent", "400", "--seeds", "1"},
                                 {.log_path = log.string()});
  REQUIRE(bench.ok());
  const auto status = bench->Wait(170s);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(text);
  REQUIRE(status.has_value());
  CHECK(*status == 0);
  CHECK_THAT(text, Catch::Contains("time-budgeted rounds (sync.time_budgeted)") && Catch::Contains("| time-budgeted |"));
}
