// MomentSyncOptions: which rounds average which moment, and the periods refused.
#include <catch2/catch.hpp>

#include "longhaul/sync_policies/moment_sync.h"

using longhaul::sync_policies::MomentSyncOptions;

TEST_CASE("moment sync: a moment is due at the end of each multiple of its period, never with period 0",
          "[moment_sync]") {
  const MomentSyncOptions o{.first_moment_sync_rounds = 6, .second_moment_sync_rounds = 3};
  REQUIRE(o.Validate().ok());
  CHECK(o.enabled());
  CHECK(o.buffers_needed() == 2);
  for (uint32_t round : {1u, 2u, 4u, 5u, 7u}) CHECK_FALSE(o.Due(1, round));
  for (uint32_t round : {3u, 6u, 9u, 300u}) CHECK(o.Due(1, round));
  for (uint32_t round : {3u, 9u, 13u}) CHECK_FALSE(o.Due(0, round));
  for (uint32_t round : {6u, 12u}) CHECK(o.Due(0, round));
  CHECK_FALSE(o.Due(0, 0));
  CHECK_FALSE(o.Due(2, 6));  // no third buffer
  const MomentSyncOptions never;
  CHECK_FALSE(never.enabled());
  CHECK(never.buffers_needed() == 0);
  CHECK_FALSE(never.Due(0, 5));
  const MomentSyncOptions v_only{.second_moment_sync_rounds = 2};
  REQUIRE(v_only.Validate().ok());
  CHECK(v_only.buffers_needed() == 2);
  CHECK_FALSE(v_only.Due(0, 2));
}

TEST_CASE("moment sync: m is never averaged without v, and periods stay in range", "[moment_sync]") {
  auto m_alone = MomentSyncOptions{.first_moment_sync_rounds = 4}.Validate();
  REQUIRE_FALSE(m_alone.ok());
  CHECK_THAT(m_alone.message(), Catch::Contains("first_moment_sync_rounds 4 must be a multiple of second_moment_sync_rounds 0"));
  auto not_multiple = MomentSyncOptions{.first_moment_sync_rounds = 4, .second_moment_sync_rounds = 8}.Validate();
  REQUIRE_FALSE(not_multiple.ok());
  CHECK_THAT(not_multiple.message(), Catch::Contains("multiple"));
  CHECK(MomentSyncOptions{.first_moment_sync_rounds = 4, .second_moment_sync_rounds = 4}.Validate().ok());
  auto huge = MomentSyncOptions{.second_moment_sync_rounds = 1000001}.Validate();
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.message(), Catch::Contains("second_moment_sync_rounds must be in 0..1000000"));
}
