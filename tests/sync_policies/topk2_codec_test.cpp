// topk2: topk's entries, each sent as a 2-bit code into 4 per-payload bin
// centres (layout and bin rule in compressor.h).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "longhaul/sync_policies/compressor.h"
#include "sync_policies/random_vector.h"

using namespace longhaul;
using namespace longhaul::sync_policies;
using longhaul::sync_policies::testing::RandomVector;

namespace {

std::unique_ptr<Compressor> Make(Codec codec, double fraction) {
  auto c = Compressor::Create({.codec = codec, .topk_fraction = fraction});
  REQUIRE(c.ok());
  return std::move(c).value();
}

std::vector<std::byte> Encode(const Compressor& c, const std::vector<float>& in) {
  std::vector<std::byte> bytes;
  c.Encode(in, bytes);
  REQUIRE(bytes.size() == c.EncodedBytes(in.size()));
  return bytes;
}

// A topk2 payload read back by the layout in compressor.h.
struct Payload {
  std::vector<uint32_t> indices;
  float centres[4];
  std::vector<unsigned> codes;
};

Payload Parse(const std::vector<std::byte>& bytes) {
  Payload p;
  uint32_t k;
  std::memcpy(&k, bytes.data(), 4);
  REQUIRE(bytes.size() == 4 + size_t{k} * 4 + 16 + (size_t{k} + 3) / 4);
  p.indices.resize(k);
  if (k > 0) std::memcpy(p.indices.data(), bytes.data() + 4, size_t{k} * 4);
  std::memcpy(p.centres, bytes.data() + 4 + size_t{k} * 4, 16);
  const std::byte* packed = bytes.data() + 4 + size_t{k} * 4 + 16;
  for (size_t i = 0; i < k; ++i) p.codes.push_back((std::to_integer<unsigned>(packed[i / 4]) >> (2 * (i % 4))) & 3u);
  return p;
}

std::vector<uint32_t> TopKIndices(const std::vector<std::byte>& topk_bytes) {
  uint32_t k;
  std::memcpy(&k, topk_bytes.data(), 4);
  std::vector<uint32_t> indices(k);
  if (k > 0) std::memcpy(indices.data(), topk_bytes.data() + 4, size_t{k} * 4);
  return indices;
}

// The worked example of the layout: k = 6 of 10 at 0.6.
const std::vector<float> kSmall{0.1f, -5.0f, 0.2f, 3.0f, -0.3f, 0.0f, 4.0f, 0.05f, -1.0f, 0.01f};

}  // namespace

TEST_CASE("topk2 lays out k, the indices, the 4 centres and the packed codes", "[codec][topk2]") {
  auto codec = Make(Codec::kTopK2Bit, 0.6);
  const auto bytes = Encode(*codec, kSmall);
  // Kept (index order): -5, 0.2, 3, -0.3, 4, -1. Positives 0.2 | 3, 4 and
  // negatives -0.3 | -5, -1 split at their median magnitude (the larger
  // ceil(3/2) = 2 each side).
  std::vector<std::byte> expected;
  const auto put = [&](const void* p, size_t n) {  // resize + memcpy: GCC 12 misreads insert(end, p, p + n) here
    const size_t at = expected.size();
    expected.resize(at + n);
    std::memcpy(expected.data() + at, p, n);
  };
  const uint32_t header[] = {6, 1, 2, 3, 4, 6, 8};
  put(header, sizeof header);
  const float centres[] = {0.2f, 3.5f, -0.3f, -3.0f};  // +smaller, +larger, -smaller, -larger
  put(centres, sizeof centres);
  // Codes 3, 0, 1, 2 | 1, 3, two bits each from the low end; the unused bits 0.
  expected.push_back(std::byte{0b10'01'00'11});
  expected.push_back(std::byte{0b00'00'11'01});
  CHECK(bytes == expected);
  std::vector<float> out(10, 7.0f);
  REQUIRE(codec->Decode(bytes, out).ok());
  CHECK(out == std::vector<float>{0, -3.0f, 0.2f, 3.5f, -0.3f, 0, 3.5f, 0, -3.0f, 0});
}

TEST_CASE("topk2 keeps topk's entries and decodes each to the mean of its bin", "[codec][topk2]") {
  for (double fraction : {0.0156, 0.3, 1.0}) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{9}, size_t{20'000}}) {
      INFO(n << " floats at " << fraction);
      auto in = RandomVector(n, 21);
      if (n > 100) {
        for (size_t i = 0; i < n; i += 97) in[i] = (i % 2 ? -4.5f : 4.5f);  // ties in magnitude
      }
      const auto bytes = Encode(*Make(Codec::kTopK2Bit, fraction), in);
      const Payload p = Parse(bytes);
      REQUIRE(p.indices == TopKIndices(Encode(*Make(Codec::kTopK, fraction), in)));
      const size_t k = p.indices.size();
      // Each code's sign bit is its value's; per sign, the larger half (ceil(m/2)
      // entries) holds the largest magnitudes.
      size_t members[4] = {};
      double sum[4] = {};
      float smallest_larger[2] = {INFINITY, INFINITY}, largest_smaller[2] = {0, 0};
      for (size_t i = 0; i < k; ++i) {
        const float v = in[p.indices[i]];
        const unsigned code = p.codes[i], sign = code / 2;
        REQUIRE(sign == (std::signbit(v) ? 1u : 0u));
        ++members[code];
        sum[code] += v;
        if (code % 2) {
          smallest_larger[sign] = std::min(smallest_larger[sign], std::fabs(v));
        } else {
          largest_smaller[sign] = std::max(largest_smaller[sign], std::fabs(v));
        }
      }
      for (unsigned sign : {0u, 1u}) {
        const size_t m = members[2 * sign] + members[2 * sign + 1];
        CHECK(members[2 * sign + 1] == (m + 1) / 2);
        CHECK(largest_smaller[sign] <= smallest_larger[sign]);
      }
      for (unsigned b = 0; b < 4; ++b) {
        const float mean = members[b] > 0 ? static_cast<float>(sum[b] / static_cast<double>(members[b])) : 0.0f;
        CHECK(std::memcmp(&p.centres[b], &mean, 4) == 0);
      }
      // Every kept entry decodes to its bin's centre; the rest to 0.
      std::vector<float> expected(n, 0.0f), out(n, -99.0f);
      for (size_t i = 0; i < k; ++i) expected[p.indices[i]] = p.centres[p.codes[i]];
      REQUIRE(Make(Codec::kTopK2Bit, fraction)->Decode(bytes, out).ok());
      CHECK(std::memcmp(out.data(), expected.data(), n * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("topk2 encodes an input to the same bytes every time and decodes them to the same bits", "[codec][topk2]") {
  auto in = RandomVector(50'000, 23);
  for (size_t i = 0; i < in.size(); i += 13) in[i] = (i % 3 ? 2.5f : -2.5f);  // ties: the lower index wins
  auto a = Make(Codec::kTopK2Bit, 0.0156), b = Make(Codec::kTopK2Bit, 0.0156);
  const auto first = Encode(*a, in);
  Encode(*a, RandomVector(70'000, 24));  // other sizes through the same scratch
  CHECK(Encode(*a, in) == first);
  CHECK(Encode(*b, in) == first);
  std::vector<float> x(in.size()), y(in.size());
  REQUIRE(a->Decode(first, x).ok());
  REQUIRE(b->Decode(first, y).ok());
  CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
}

TEST_CASE("topk2 rejects truncated payloads, bad indices and stray code bits, and writes nothing", "[codec][topk2]") {
  auto codec = Make(Codec::kTopK2Bit, 0.6);
  const auto good = Encode(*codec, kSmall);  // k = 6: indices at bytes 4..27, codes at 44..45
  const std::vector<float> untouched(10, 7.0f);
  const auto rejects = [&](const std::vector<std::byte>& bytes, const std::string& why, size_t n = 10) {
    std::vector<float> dst(n, 7.0f);
    Status s = codec->Decode(bytes, dst);
    CHECK(s.code() == StatusCode::kDataLoss);
    CHECK_THAT(s.message(), Catch::Contains(why));
    CHECK(dst == std::vector<float>(n, 7.0f));
  };
  const auto with_u32 = [&](size_t offset, uint32_t value) {
    auto bytes = good;
    std::memcpy(bytes.data() + offset, &value, 4);
    return bytes;
  };
  rejects({good.begin(), good.begin() + 3}, "has no count");
  rejects({good.begin(), good.end() - 1}, "does not hold its 6 entries");
  rejects(with_u32(0, 7), "does not hold its 7 entries");
  rejects(with_u32(0, 0xffffffffu), "does not hold its 4294967295 entries");
  rejects(good, "expected 7 for 11 floats", 11);   // a payload for another length
  rejects(with_u32(4, 10), "index 10");            // first index out of range
  rejects(with_u32(8, 1), "entry 1 has index 1");  // not increasing
  auto stray = good;
  stray.back() |= std::byte{0x10};  // a code for a 7th entry that does not exist
  rejects(stray, "code bits set past its 6 entries");
  std::vector<float> dst = untouched;
  CHECK(codec->Decode(good, dst).ok());
}
