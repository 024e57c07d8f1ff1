// bench_convergence --quick: the whole pipeline (real cluster, sweep, seeds,
// best points, emulated-link wall times, the three output files) in seconds.
#include <catch2/catch.hpp>

#include <algorithm>
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

// The WAN bytes (column 9) of the sweep's runs whose policy (column 2) is `policy`.
std::vector<uint64_t> BytesOf(const std::string& tsv, const std::string& policy) {
  std::vector<uint64_t> out;
  std::istringstream in(tsv);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cols;
    std::istringstream fields(line);
    for (std::string c; std::getline(fields, c, '\t');) cols.push_back(c);
    if (cols.size() >= 9 && cols[1] == policy) out.push_back(std::stoull(cols[8]));
  }
  return out;
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
  CHECK_THAT(table, Catch::Contains("| 3 regions, non-iid | DiLoCo H=50 int8 + inner moments averaged (v every round) |"));
  CHECK_THAT(table, Catch::Contains("Target (3 regions, non-iid)"));
  CHECK_THAT(table, Catch::Contains("2 seeds per point"));
  // 3 rows: sync 1 point, DiLoCo 2 points, method 2 points; 2 seeds each.
  const std::string sweep = Read(out.path() / "convergence_sweep.tsv");
  CHECK(DataLines(sweep) == (1 + 2 + 2) * 2);
  // The method's jobs carried the second moment over the WAN besides the pseudo-gradients.
  const auto plain = BytesOf(sweep, "DiLoCo H=50 int8");
  const auto with_v = BytesOf(sweep, "DiLoCo H=50 int8 + inner moments averaged (v every round)");
  REQUIRE(plain.size() == 4);
  REQUIRE(with_v.size() == 4);
  CHECK(*std::min_element(with_v.begin(), with_v.end()) > *std::max_element(plain.begin(), plain.end()) * 2);
  CHECK(DataLines(Read(out.path() / "convergence.tsv")) == 4 + 4 + 4);  // 200 steps: 4 rounds per best point
}
