// Chunk planning, checksums and reassembly.
#include <catch2/catch.hpp>
#include <numeric>

#include "longhaul/wan_transport/chunking.h"
#include "longhaul/wan_transport/endpoint.h"

using namespace longhaul;
using namespace longhaul::wan_transport;

namespace {

std::vector<std::byte> Pattern(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + 7) & 0xFF);
  return v;
}

v1::TensorChunkHeader Header(const ChunkSpan& c, const std::vector<std::byte>& data, uint32_t count) {
  v1::TensorChunkHeader h;
  FillChunkHeader(c, data.size(), count, std::span(data).subspan(c.offset, c.length), &h);
  return h;
}

}  // namespace

TEST_CASE("chunk plans tile the transfer exactly") {
  auto plan = PlanChunks(10, 4);
  REQUIRE(plan.size() == 3);
  CHECK(plan[2].offset == 8);
  CHECK(plan[2].length == 2);
  CHECK(PlanChunks(0, 4).size() == 1);
  CHECK(PlanChunks(0, 4)[0].length == 0);
  CHECK(PlanChunks(8, 4).size() == 2);
  CHECK(PlanChunks(1, 1 << 20).size() == 1);
}

TEST_CASE("reassembly accepts chunks in any order into a caller buffer") {
  auto data = Pattern(10'000);
  auto plan = PlanChunks(data.size(), 1'000);
  std::vector<std::byte> dest(data.size());
  Reassembly r(data.size(), static_cast<uint32_t>(plan.size()), dest);
  for (size_t k = plan.size(); k-- > 0;) {
    CHECK_FALSE(r.complete());
    auto out = r.Add(Header(plan[k], data, plan.size()), std::span(data).subspan(plan[k].offset, plan[k].length));
    REQUIRE(out.ok());
    CHECK(*out == Reassembly::Outcome::kAccepted);
  }
  CHECK(r.complete());
  CHECK(dest == data);
  // A duplicate is recognised and changes nothing.
  auto dup = r.Add(Header(plan[0], data, plan.size()), std::span(data).subspan(0, 1'000));
  CHECK(*dup == Reassembly::Outcome::kDuplicate);
}

TEST_CASE("a corrupted payload fails its checksum and is not written") {
  auto data = Pattern(100);
  auto plan = PlanChunks(data.size(), 100);
  Reassembly r(data.size(), 1);
  auto h = Header(plan[0], data, 1);
  auto corrupt = data;
  corrupt[42] ^= std::byte{1};
  auto out = r.Add(h, corrupt);
  REQUIRE(out.ok());
  CHECK(*out == Reassembly::Outcome::kBadChecksum);
  CHECK_FALSE(r.complete());
  CHECK(r.received_bytes() == 0);
  CHECK(*r.Add(h, data) == Reassembly::Outcome::kAccepted);
  CHECK(r.TakeBuffer() == data);
}

TEST_CASE("on an authenticated link the checksum is neither computed nor checked") {
  auto data = Pattern(100);
  auto plan = PlanChunks(data.size(), 100);
  v1::TensorChunkHeader h;
  FillChunkHeader(plan[0], data.size(), 1, data, &h, Integrity::kAuthenticatedLink);
  CHECK(h.checksum() == 0);
  Reassembly r(data.size(), 1);
  auto out = r.Add(h, data, Integrity::kAuthenticatedLink);
  REQUIRE(out.ok());
  CHECK(*out == Reassembly::Outcome::kAccepted);
  CHECK(r.TakeBuffer() == data);
  // The same header on a plaintext link is a checksum failure.
  Reassembly plain(data.size(), 1);
  CHECK(*plain.Add(h, data) == Reassembly::Outcome::kBadChecksum);
}

TEST_CASE("forged headers that would leave gaps or overflow are rejected") {
  auto data = Pattern(10);
  auto plan = PlanChunks(10, 4);
  Reassembly r(10, 3);
  auto h = Header(plan[1], data, 3);
  SECTION("offset past the end") {
    h.set_offset(9);
    CHECK(r.Add(h, std::span(data).subspan(4, 4)).status().code() == StatusCode::kInvalidArgument);
  }
  SECTION("payload shorter than the header says (truncated)") {
    CHECK_FALSE(r.Add(h, std::span(data).subspan(4, 3)).ok());
  }
  SECTION("inconsistent stride") {
    REQUIRE(r.Add(h, std::span(data).subspan(4, 4)).ok());
    auto h0 = Header({0, 3, 0}, data, 3);
    CHECK_FALSE(r.Add(h0, std::span(data).subspan(0, 3)).ok());
  }
  SECTION("wrong totals and indexes") {
    auto bad = h;
    bad.set_total_bytes(11);
    CHECK_FALSE(r.Add(bad, std::span(data).subspan(4, 4)).ok());
    bad = h;
    bad.set_chunk_index(7);
    CHECK_FALSE(r.Add(bad, std::span(data).subspan(4, 4)).ok());
  }
  CHECK_FALSE(r.complete());
}

TEST_CASE("connections per peer follow the bandwidth-delay product") {
  CHECK(ConnectionsForBdp(0, 0) == 4);  // unknown link: default
  CHECK(ConnectionsForBdp(1.25e7, 0.02) == 1);        // 100 Mbit/s * 20 ms = 250 KB
  CHECK(ConnectionsForBdp(1.25e8, 0.08) == 3);        // 1 Gbit/s * 80 ms = 10 MB
  CHECK(ConnectionsForBdp(1.25e10, 1.0) == 16);       // clamped
}
