// bench_convergence's aggregation: means and spreads over seeds, each policy at
// its best point, the comparison with the best-tuned sync baseline, the target.
#include <catch2/catch.hpp>

#include "convergence_report.h"

using namespace longhaul;
using namespace longhaul::bench;

namespace {

RunRecord Run(const Row& row, double lr, double outer_lr, uint32_t seed, double loss, uint64_t bytes) {
  RunRecord r;
  r.row = row;
  r.point = {lr, outer_lr, 0.9};
  r.seed = seed;
  r.val_loss = loss;
  r.loss_floor = 1.0;
  r.wan_bytes = bytes;
  r.curve = {{bytes / 2, loss + 0.5}, {bytes, loss}};
  return r;
}

}  // namespace

TEST_CASE("bench_convergence: each policy at its lowest mean, compared with the best sync", "[bench]") {
  const Setting iid{3, "iid"};
  Row sync{iid, {.group = "data", .kind = sync_policies::SyncKind::kSync, .h = 0, .codec = v1::CODEC_FP32}};
  Row diloco{iid, {.group = "data", .kind = sync_policies::SyncKind::kDiLoCo, .h = 50, .codec = v1::CODEC_INT8_BLOCK}};
  const std::vector<RunRecord> runs = {
      Run(sync, 0.01, 0, 1, 1.30, 1000000), Run(sync, 0.01, 0, 2, 1.34, 1000000),  // mean 1.32
      Run(sync, 0.02, 0, 1, 1.19, 1000000), Run(sync, 0.02, 0, 2, 1.21, 1000000),  // mean 1.20: best, on the edge
      Run(diloco, 0.02, 0.7, 1, 1.23, 5000), Run(diloco, 0.02, 0.7, 2, 1.21, 5000),  // mean 1.22
      Run(diloco, 0.02, 1.0, 1, 1.40, 5000), Run(diloco, 0.02, 1.0, 2, 1.42, 5000),
  };
  const auto rows = Summarize(runs);
  REQUIRE(rows.size() == 2);
  REQUIRE(rows[0].points.size() == 2);
  CHECK(rows[0].points[0].mean == Approx(1.32));
  CHECK(rows[0].points[0].stdev == Approx(0.028284).epsilon(1e-4));  // sample stdev of {1.30, 1.34}
  CHECK(rows[0].best == 1);
  CHECK(rows[0].best_on_edge);
  CHECK(rows[1].Best().point.outer_lr == 0.7);
  CHECK_FALSE(rows[1].best_on_edge);  // one inner lr only: no edge to be on
  CHECK(BaselineOf(rows, "3 regions, iid") == &rows[0]);

  const TargetCheck t = CheckTarget(rows, "3 regions, iid");
  REQUIRE(t.present);
  CHECK(t.gap == Approx(1.22 / 1.20 - 1));
  CHECK(t.reduction == Approx(200));
  CHECK(t.met);  // +1.67% with 200x fewer bytes
  CHECK_FALSE(CheckTarget(rows, "3 regions, text").present);
  // The row at the published outer setting is not the target's row.
  Row published = diloco;
  published.policy.published_outer = true;
  std::vector<RunRecord> with_published = runs;
  with_published.push_back(Run(published, 0.02, 0.7, 1, 3.00, 5000));
  CHECK(CheckTarget(Summarize(with_published), "3 regions, iid").gap == Approx(1.22 / 1.20 - 1));

  const std::string table = Table(rows, PlanOptions{});
  CHECK_THAT(table, Catch::Contains("inner lr 0.02 (edge of grid)"));
  CHECK_THAT(table, Catch::Contains("1.2200 ± 0.0141"));
  CHECK_THAT(table, Catch::Contains("+1.67%"));
  CHECK_THAT(table, Catch::Contains("200x"));
  CHECK_THAT(table, Catch::Contains("Target (3 regions, iid)") && Catch::Contains("-> met"));
  const std::string sweep = SweepTsv(runs);
  CHECK(std::count(sweep.begin(), sweep.end(), '\n') == 1 + 8);  // header and every run
  const std::string curves = CurvesTsv(rows);
  CHECK(std::count(curves.begin(), curves.end(), '\n') == 1 + 2 * 2);  // each row's best point, first seed
}

TEST_CASE("bench_convergence: a DiLoCo 3% behind the baseline misses the target, as does one with too few savings",
          "[bench]") {
  const Setting text{3, "text"};
  Row sync{text, {.group = "data", .kind = sync_policies::SyncKind::kSync, .h = 0, .codec = v1::CODEC_FP32}};
  Row diloco{text, {.group = "data", .kind = sync_policies::SyncKind::kDiLoCo, .h = 50, .codec = v1::CODEC_INT8_BLOCK}};
  auto check = [&](double loss, uint64_t bytes) {
    const std::vector<RunRecord> runs = {Run(sync, 0.02, 0, 1, 2.00, 1000000), Run(diloco, 0.02, 0.7, 1, loss, bytes)};
    return CheckTarget(Summarize(runs), "3 regions, text");
  };
  CHECK_FALSE(check(2.06, 5000).met);   // +3%
  CHECK_FALSE(check(2.01, 20000).met);  // 50x only
  CHECK(check(2.01, 5000).met);
}

TEST_CASE("bench_convergence: the closest method row within 100x fewer bytes is named beside the target", "[bench]") {
  const Setting text{3, "text"};
  Row sync{text, {.group = "data", .kind = sync_policies::SyncKind::kSync, .h = 0, .codec = v1::CODEC_FP32}};
  Row diloco{text, {.group = "data", .kind = sync_policies::SyncKind::kDiLoCo, .h = 50, .codec = v1::CODEC_INT8_BLOCK}};
  Row every_round = diloco, every_third = diloco, other_h = diloco;
  every_round.policy.method = every_third.policy.method = other_h.policy.method = Method::kMomentSync;
  every_round.policy.moment_sync_rounds = {0, 1};
  every_third.policy.moment_sync_rounds = {0, 3};
  other_h.policy.moment_sync_rounds = {0, 3};
  other_h.policy.h = 100;  // not the target's H: never chosen
  const std::vector<RunRecord> runs = {
      Run(sync, 0.02, 0, 1, 2.00, 1000000),      Run(diloco, 0.02, 0.7, 1, 2.20, 5000),
      Run(every_round, 0.02, 0.7, 1, 2.02, 15000),  // closest, but 67x only
      Run(every_third, 0.02, 0.7, 1, 2.10, 8000),   // 125x
      Run(other_h, 0.02, 0.7, 1, 2.01, 4000),
  };
  const auto rows = Summarize(runs);
  CHECK(CheckTarget(rows, "3 regions, text").gap == Approx(0.10));  // the plain row, not a method's
  const TargetCheck m = ClosestWithMethod(rows, "3 regions, text");
  REQUIRE(m.present);
  CHECK(m.policy == "DiLoCo H=50 int8 + inner moments averaged (v every 3 rounds)");
  CHECK(m.gap == Approx(0.05));
  CHECK(m.reduction == Approx(125));
  CHECK_FALSE(m.met);
  CHECK_THAT(Table(rows, PlanOptions{}),
             Catch::Contains("closest with a method at >= 100x fewer bytes: DiLoCo H=50 int8 + inner moments averaged "
                             "(v every 3 rounds): +5.00%, 125x -> not met"));
  CHECK_FALSE(ClosestWithMethod(Summarize({runs[0], runs[1], runs[2]}), "3 regions, text").present);
}
