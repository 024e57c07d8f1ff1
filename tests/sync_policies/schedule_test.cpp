#include "longhaul/sync_policies/schedule.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace longhaul;
using namespace longhaul::sync_policies;

namespace {
std::unique_ptr<SyncSchedule> Make(const ScheduleOptions& o) {
  auto s = SyncSchedule::Create(o);
  REQUIRE(s.ok());
  return std::move(s).value();
}
using A = SyncAction;
}  // namespace

TEST_CASE("Fully synchronous schedule all-reduces gradients every step", "[schedule]") {
  auto s = Make({.kind = SyncKind::kSync});
  CHECK(s->kind() == SyncKind::kSync);
  CHECK(s->traits().averages_gradients);
  for (uint64_t step = 1; step <= 5; ++step) CHECK(s->AfterStep(step) == std::vector<A>{{A::kGradientAllReduce, -1}});
  CHECK(s->AfterStep(0).empty());
}

TEST_CASE("Local schedule never synchronises", "[schedule]") {
  auto s = Make({.kind = SyncKind::kLocal});
  for (uint64_t step = 0; step <= 1000; step += 7) CHECK(s->AfterStep(step).empty());
}

TEST_CASE("DiLoCo syncs and applies the whole vector every H steps", "[schedule]") {
  auto s = Make({.kind = SyncKind::kDiLoCo, .inner_steps = 4});
  CHECK(s->fragments() == 1);
  CHECK(s->mixing_alpha() == 0.0);
  for (uint64_t step = 1; step <= 12; ++step) {
    auto actions = s->AfterStep(step);
    if (step % 4 == 0)
      CHECK(actions == std::vector<A>{{A::kOuterSync, 0}, {A::kApplyFragment, 0}});
    else
      CHECK(actions.empty());
  }
}

TEST_CASE("Streaming DiLoCo staggers fragments and applies each tau steps after sending", "[schedule]") {
  auto s =
      Make({.kind = SyncKind::kStreamingDiLoCo, .inner_steps = 12, .fragments = 3, .overlap_steps = 2, .mixing_alpha = 0.25});
  CHECK(s->fragments() == 3);
  CHECK(s->mixing_alpha() == 0.25);
  std::vector<std::pair<uint64_t, A>> seen;
  for (uint64_t step = 1; step <= 26; ++step)
    for (const A& a : s->AfterStep(step)) seen.push_back({step, a});
  std::vector<std::pair<uint64_t, A>> expected{
      {4, {A::kOuterSync, 0}},  {6, {A::kApplyFragment, 0}},  {8, {A::kOuterSync, 1}},  {10, {A::kApplyFragment, 1}},
      {12, {A::kOuterSync, 2}}, {14, {A::kApplyFragment, 2}}, {16, {A::kOuterSync, 0}}, {18, {A::kApplyFragment, 0}},
      {20, {A::kOuterSync, 1}}, {22, {A::kApplyFragment, 1}}, {24, {A::kOuterSync, 2}}, {26, {A::kApplyFragment, 2}}};
  CHECK(seen == expected);
  // Each fragment is synced once every H steps.
  auto once = Make({.kind = SyncKind::kStreamingDiLoCo, .inner_steps = 8, .fragments = 4, .overlap_steps = 0});
  int syncs[4] = {0, 0, 0, 0};
  for (uint64_t step = 1; step <= 80; ++step)
    for (const A& a : once->AfterStep(step))
      if (a.kind == A::kOuterSync) ++syncs[a.fragment];
  for (int c : syncs) CHECK(c == 10);
  CHECK(once->AfterStep(2) == std::vector<A>{{A::kOuterSync, 0}, {A::kApplyFragment, 0}});
}

TEST_CASE("Schedule options are validated with the field and value named", "[schedule]") {
  CHECK(ScheduleOptions{}.Validate().ok());
  auto msg = [](const ScheduleOptions& o) { return o.Validate().message(); };
  CHECK(msg({.kind = static_cast<SyncKind>(99)}).find("kind: unknown value 99") != std::string::npos);
  CHECK(msg({.kind = SyncKind::kDiLoCo, .inner_steps = 0}).find("inner_steps") != std::string::npos);
  CHECK(msg({.kind = SyncKind::kDiLoCo, .fragments = 2}).find("streaming_diloco") != std::string::npos);
  CHECK(msg({.kind = SyncKind::kSync, .fragments = 2}).find("fragments must be 1 for sync") != std::string::npos);
  CHECK(msg({.kind = SyncKind::kStreamingDiLoCo, .inner_steps = 10, .fragments = 3}).find("must divide inner_steps") !=
        std::string::npos);
  CHECK(msg({.kind = SyncKind::kStreamingDiLoCo, .inner_steps = 12, .fragments = 3, .overlap_steps = 4})
            .find("overlap_steps must be < inner_steps / fragments = 4, got 4") != std::string::npos);
  CHECK(
      msg({.kind = SyncKind::kStreamingDiLoCo, .inner_steps = 12, .fragments = 3, .mixing_alpha = 1.5}).find("mixing_alpha") !=
      std::string::npos);
  CHECK_FALSE(SyncSchedule::Create({.kind = SyncKind::kStreamingDiLoCo, .fragments = 0}).ok());
}

TEST_CASE("Fragments tile the vector contiguously with sizes differing by at most one", "[schedule]") {
  for (size_t n : {size_t{0}, size_t{1}, size_t{10}, size_t{1001}}) {
    for (uint32_t p : {1u, 3u, 8u}) {
      size_t next = 0, smallest = n, largest = 0;
      for (uint32_t i = 0; i < p; ++i) {
        auto [begin, end] = FragmentRange(n, p, i);
        CHECK(begin == next);
        next = end;
        smallest = std::min(smallest, end - begin);
        largest = std::max(largest, end - begin);
      }
      CHECK(next == n);
      CHECK(largest - smallest <= 1);
    }
  }
  CHECK(FragmentRange(10, 3, 0) == std::pair<size_t, size_t>{0, 4});
  CHECK(FragmentRange(10, 3, 2) == std::pair<size_t, size_t>{7, 10});
}

TEST_CASE("Mixing blends local and global fragments with factor alpha", "[schedule]") {
  std::vector<float> local{1, 2}, global{3, 6};
  REQUIRE(MixFragment(local, global, 0.5).ok());
  CHECK(local == std::vector<float>{2, 4});
  REQUIRE(MixFragment(local, global, 0.0).ok());
  CHECK(local == global);
  CHECK_FALSE(MixFragment(local, std::vector<float>{1}, 0.5).ok());
}
