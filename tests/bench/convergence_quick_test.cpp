// bench_convergence --quick: the whole pipeline (real cluster, sweep, seeds,
// best points, emulated-link wall times, the three output files) in seconds.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "support/subprocess.h"
#include "support/temp_dir.h"

using namespace longhaul::testing;
using namespace std::chrono_literals;

namespace {

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

size_t DataLines(const std::string& tsv) {
  size_t n = 0;
  std::istringstream in(tsv);
  for (std::string line; std::getline(in, line);) n += !line.empty() && line[0] != '#';
  return n;
}

}  // namespace

TEST_CASE("bench: bench_convergence --quick writes its table, its whole sweep and the best points' curves",
          "[bench]") {
  const TempDir out("bench-quick");
  auto bench = Subprocess::Spawn({std::string(LONGHAUL_BIN_DIR) + "/bench_convergence", "--quick", "--out",
                                  out.path().string()},
                                 {.log_path = (out.path() / "bench.log").string()});
  REQUIRE(bench.ok());
  const auto status = bench->Wait(170s);
  INFO(Read(out.path() / "bench.log"));
  REQUIRE(status.has_value());
  REQUIRE(*status == 0);
  const std::string table = Read(out.path() / "convergence.md");
  CHECK_THAT(table, Catch::Contains("| 3 regions, non-iid | sync fp32 (data parallel) |"));
  CHECK_THAT(table, Catch::Contains("| 3 regions, non-iid | DiLoCo H=50 int8 |"));
  CHECK_THAT(table, Catch::Contains("outer lr warm-up, cosine decay"));
  CHECK_THAT(table, Catch::Contains("Target (3 regions, non-iid)"));
  CHECK_THAT(table, Catch::Contains("2 seeds per point"));
  // 3 rows: sync 1 point, DiLoCo 2 points, method 2 points; 2 seeds each.
  CHECK(DataLines(Read(out.path() / "convergence_sweep.tsv")) == (1 + 2 + 2) * 2);
  CHECK(DataLines(Read(out.path() / "convergence.tsv")) == 4 + 4 + 4);  // 200 steps: 4 rounds per best point
}
