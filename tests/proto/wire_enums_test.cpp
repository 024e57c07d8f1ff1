#include "longhaul/proto/wire_enums.h"

#include <catch2/catch.hpp>
#include <set>

#include "longhaul/proto/job_defaults.h"

namespace lp = longhaul::proto;
namespace sp = longhaul::sync_policies;
namespace v1 = longhaul::v1;

TEST_CASE("proto: every codec has its own wire value and comes back from it", "[wire_enums]") {
  std::set<int> wire;
  for (const sp::CodecTraits& t : sp::Codecs()) {
    const v1::Codec w = lp::CodecToWire(t.codec);
    CHECK(w != v1::CODEC_UNSPECIFIED);
    wire.insert(w);
    CHECK(*lp::CodecFromWire(w) == t.codec);
    CHECK(lp::CodecName(w) == t.name);
    CHECK(*lp::CodecFromName(t.name) == w);
  }
  CHECK(wire.size() == sp::Codecs().size());
  auto unset = lp::CodecFromWire(v1::CODEC_UNSPECIFIED);
  REQUIRE_FALSE(unset.ok());
  CHECK_THAT(unset.status().message(), Catch::Contains("compression.codec is unset"));
  auto unknown = lp::CodecFromWire(static_cast<v1::Codec>(77));
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.status().message(), Catch::Contains("unknown codec 77"));
  auto name = lp::CodecFromName("zstd");
  REQUIRE_FALSE(name.ok());
  CHECK_THAT(name.status().message(), Catch::Contains("compression.codec") && Catch::Contains("'zstd'"));
}

TEST_CASE("proto: sync kinds by name, and the default codec comes from the kind's row", "[wire_enums]") {
  for (const sp::SyncKindTraits& t : sp::SyncKinds()) {
    v1::JobSpec spec;
    spec.set_rounds(1);
    lp::SetSyncKind(spec.mutable_sync(), t.kind);
    CHECK(spec.sync().kind() == t.name);
    CHECK(*lp::SyncKindOf(spec.sync()) == t.kind);
    lp::FillJobDefaults(&spec);
    CHECK(spec.compression().codec() == lp::CodecToWire(t.default_codec));
  }
  v1::SyncPolicy bad;
  bad.set_kind("gossip");
  auto kind = lp::SyncKindOf(bad);
  REQUIRE_FALSE(kind.ok());
  CHECK_THAT(kind.status().message(), Catch::Contains("sync.kind") && Catch::Contains("'gossip'"));
}
