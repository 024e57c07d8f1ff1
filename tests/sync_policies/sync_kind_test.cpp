// The sync-kind and codec tables: complete, consistent with the code they
// describe, and the only way names are read.
#include "longhaul/sync_policies/sync_kind.h"

#include <catch2/catch.hpp>
#include <set>

#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/schedule.h"

using namespace longhaul::sync_policies;

TEST_CASE("Sync kinds: one row per enumerator, names round-trip, unknown names list the kinds", "[sync_kind]") {
  std::set<std::string_view> names;
  int index = 0;
  for (const SyncKindTraits& t : SyncKinds()) {
    CHECK(static_cast<int>(t.kind) == index++);  // in the order of the enum
    CHECK(&Traits(t.kind) == &t);
    CHECK(*ParseSyncKind(t.name) == t.kind);
    CHECK(SyncKindName(t.kind) == t.name);
    names.insert(t.name);
  }
  CHECK(names == std::set<std::string_view>{"diloco", "streaming_diloco", "sync", "local"});
  auto bad = ParseSyncKind("gossip");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "unknown sync kind 'gossip' (expected one of diloco, streaming_diloco, sync, local)");
}

TEST_CASE("Sync kinds: the table says what each kind does, and the schedules agree", "[sync_kind]") {
  const auto& sync = Traits(SyncKind::kSync);
  CHECK(sync.averages_gradients);
  CHECK_FALSE(sync.uses_outer_optimizer);
  CHECK(sync.theta_is_local);
  CHECK(sync.default_codec == Codec::kFp32);  // the baseline is plain data parallelism
  const auto& local = Traits(SyncKind::kLocal);
  CHECK_FALSE(local.needs_link);
  CHECK_FALSE(local.replicas_identical);
  for (SyncKind k : {SyncKind::kDiLoCo, SyncKind::kStreamingDiLoCo}) {
    CHECK(Traits(k).uses_outer_optimizer);
    CHECK(Traits(k).default_codec == Codec::kInt8Block);
    CHECK_FALSE(Traits(k).theta_is_local);
  }
  CHECK(Traits(SyncKind::kStreamingDiLoCo).streams_fragments);
  // The schedule built for a kind carries that kind's row, and its actions match it.
  for (const SyncKindTraits& t : SyncKinds()) {
    INFO(t.name);
    ScheduleOptions o{.kind = t.kind, .inner_steps = 4};
    auto s = SyncSchedule::Create(o);
    REQUIRE(s.ok());
    CHECK(&(*s)->traits() == &t);
    bool gradient = false, outer = false;
    for (uint64_t step = 1; step <= 8; ++step) {
      for (const SyncAction& a : (*s)->AfterStep(step)) {
        gradient = gradient || a.kind == SyncAction::kGradientAllReduce;
        outer = outer || a.kind == SyncAction::kOuterSync;
      }
    }
    CHECK(gradient == t.averages_gradients);
    CHECK(outer == t.uses_outer_optimizer);
    CHECK((gradient || outer) == t.needs_link);
  }
}

TEST_CASE("Codecs: one row per enumerator, names round-trip, and the bits match the encoders", "[codec]") {
  int index = 0;
  for (const CodecTraits& t : Codecs()) {
    INFO(t.name);
    CHECK(static_cast<int>(t.codec) == index++);
    CHECK(&Traits(t.codec) == &t);
    CHECK(*ParseCodec(t.name) == t.codec);
    CHECK(CodecName(t.codec) == t.name);
    auto c = Compressor::Create({.codec = t.codec, .block_size = 256, .topk_fraction = 0.25});
    REQUIRE(c.ok());
    const size_t n = 1024;
    const size_t scales = t.uses_blocks ? n / 256 * 4 : 0;
    const size_t values = t.sparse ? n / 4 : n;
    const size_t indices = t.sparse ? 4 + values * 4 : 0;  // k, then one u32 index per kept value
    const size_t table = t.table_floats * 4;               // topk2's bin centres
    CHECK((*c)->EncodedBytes(n) == scales + indices + table + values * t.bits_per_value / 8);
    CHECK(t.lossy == (t.codec != Codec::kFp32));
  }
  CHECK(*ParseCodec("none") == Codec::kFp32);
  CHECK(CodecNames() == "none, fp32, bf16, int8, int4, fp4, topk, topk2");
}
