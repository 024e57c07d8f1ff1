#include <catch2/catch.hpp>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "codec_kernels.h"  // internal: ForceBaselineKernels
#include "longhaul/sync_policies/compressor.h"
#include "sync_policies/random_vector.h"

using namespace longhaul;
using namespace longhaul::sync_policies;
using longhaul::sync_policies::testing::RandomVector;

namespace {

std::unique_ptr<Compressor> Make(Codec codec, size_t block = 256, double fraction = 0.01) {
  auto c = Compressor::Create({.codec = codec, .block_size = block, .topk_fraction = fraction});
  REQUIRE(c.ok());
  return std::move(c).value();
}

std::vector<float> RoundTrip(const Compressor& c, const std::vector<float>& in) {
  std::vector<std::byte> bytes;
  c.Encode(in, bytes);
  REQUIRE(bytes.size() == c.EncodedBytes(in.size()));
  std::vector<float> out(in.size(), -99.0f);
  REQUIRE(c.Decode(bytes, out).ok());
  return out;
}

float BlockAbsMax(const std::vector<float>& v, size_t start, size_t len) {
  float m = 0;
  for (size_t i = start; i < start + len; ++i) m = std::max(m, std::fabs(v[i]));
  return m;
}

}  // namespace

TEST_CASE("Codec names parse and print", "[codec]") {
  CHECK(*ParseCodec("none") == Codec::kFp32);
  CHECK(*ParseCodec("fp32") == Codec::kFp32);
  CHECK(*ParseCodec("bf16") == Codec::kBf16);
  CHECK(*ParseCodec("int8") == Codec::kInt8Block);
  CHECK(*ParseCodec("int4") == Codec::kInt4Block);
  CHECK(*ParseCodec("fp4") == Codec::kFp4E3M0);
  CHECK(*ParseCodec("topk") == Codec::kTopK);
  CHECK(*ParseCodec("topk2") == Codec::kTopK2Bit);
  auto bad = ParseCodec("zstd");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("'zstd'") != std::string::npos);
  for (Codec c : {Codec::kFp32, Codec::kBf16, Codec::kInt8Block, Codec::kInt4Block, Codec::kFp4E3M0, Codec::kTopK,
                  Codec::kTopK2Bit})
    CHECK(*ParseCodec(CodecName(c)) == c);
}

TEST_CASE("Compression options are validated", "[codec]") {
  CHECK(CompressionOptions{}.Validate().ok());
  CHECK(CompressionOptions{.block_size = 0}.Validate().message().find("block_size") != std::string::npos);
  CHECK(CompressionOptions{.topk_fraction = 0}.Validate().message().find("topk_fraction") != std::string::npos);
  CHECK(CompressionOptions{.topk_fraction = 1.5}.Validate().code() == StatusCode::kInvalidArgument);
  CHECK_FALSE(Compressor::Create({.block_size = 0}).ok());
}

TEST_CASE("Encoded sizes are exact", "[codec]") {
  CHECK(Make(Codec::kFp32)->EncodedBytes(1000) == 4000);
  CHECK(Make(Codec::kBf16)->EncodedBytes(1000) == 2000);
  CHECK(Make(Codec::kInt8Block, 256)->EncodedBytes(1000) == 4 * 4 + 1000);
  CHECK(Make(Codec::kInt4Block, 256)->EncodedBytes(1001) == 4 * 4 + 501);
  CHECK(Make(Codec::kFp4E3M0, 100)->EncodedBytes(1000) == 10 * 4 + 500);
  CHECK(Make(Codec::kTopK, 256, 0.01)->EncodedBytes(1000) == 4 + 10 * 8);
  CHECK(Make(Codec::kTopK, 256, 0.01)->EncodedBytes(5) == 4 + 1 * 8);
  // topk2: k, k indices, 4 fp32 centres, ceil(k/4) bytes of codes.
  CHECK(Make(Codec::kTopK2Bit, 256, 0.01)->EncodedBytes(1000) == 4 + 10 * 4 + 16 + 3);
  CHECK(Make(Codec::kTopK2Bit, 256, 0.01)->EncodedBytes(5) == 4 + 1 * 4 + 16 + 1);
  CHECK(Make(Codec::kTopK2Bit, 256, 0.01)->EncodedBytes(0) == 4 + 16);
  // Templar's density, 1.56% of 2^20: 16,358 entries, 69,542 bytes = 0.066 bytes per
  // parameter (topk at 1%: 0.080).
  CHECK(Make(Codec::kTopK2Bit, 256, 0.0156)->EncodedBytes(size_t{1} << 20) == 4 + 16358 * 4 + 16 + 4090);
  for (Codec c : {Codec::kFp32, Codec::kBf16, Codec::kInt8Block, Codec::kInt4Block, Codec::kFp4E3M0})
    CHECK(Make(c)->EncodedBytes(0) == 0);
}

TEST_CASE("fp32 round-trips exactly and bf16 within 2^-8 relative", "[codec]") {
  auto in = RandomVector(5000, 1);
  CHECK(RoundTrip(*Make(Codec::kFp32), in) == in);
  auto out = RoundTrip(*Make(Codec::kBf16), in);
  for (size_t i = 0; i < in.size(); ++i) REQUIRE(std::fabs(out[i] - in[i]) <= std::fabs(in[i]) * (1.0f / 256));
  // Round to nearest even: 1 + 2^-8 (exact tie) goes down to 1, 1 + 3 * 2^-8 up.
  auto ties = RoundTrip(*Make(Codec::kBf16), {1.0f + 1.0f / 256, 1.0f + 3.0f / 256});
  CHECK(ties[0] == 1.0f);
  CHECK(ties[1] == 1.0f + 4.0f / 256);
}

TEST_CASE("int8 per-block error is at most half a quantisation step", "[codec]") {
  for (size_t block : {size_t{1}, size_t{7}, size_t{64}, size_t{256}, size_t{4096}}) {
    auto in = RandomVector(10007, 2, 3.0f);
    in[17] = 1000.0f;  // one outlier only widens its own block
    auto out = RoundTrip(*Make(Codec::kInt8Block, block), in);
    for (size_t start = 0; start < in.size(); start += block) {
      size_t len = std::min(block, in.size() - start);
      float absmax = BlockAbsMax(in, start, len);
      for (size_t i = start; i < start + len; ++i)
        REQUIRE(std::fabs(out[i] - in[i]) <= absmax / 254.0f * 1.0001f + 1e-30f);
    }
  }
}

TEST_CASE("int4 per-block error is at most half a step of absmax / 7", "[codec]") {
  for (size_t block : {size_t{1}, size_t{3}, size_t{32}, size_t{256}, size_t{3001}}) {
    auto in = RandomVector(9999, 3);
    auto out = RoundTrip(*Make(Codec::kInt4Block, block), in);
    for (size_t start = 0; start < in.size(); start += block) {
      size_t len = std::min(block, in.size() - start);
      float absmax = BlockAbsMax(in, start, len);
      for (size_t i = start; i < start + len; ++i) REQUIRE(std::fabs(out[i] - in[i]) <= absmax / 14.0f * 1.0001f);
    }
  }
}

TEST_CASE("fp4 E3M0 rounds to the nearest power of two times the block scale", "[codec]") {
  for (size_t block : {size_t{5}, size_t{128}, size_t{256}}) {
    auto in = RandomVector(7777, 4);
    auto out = RoundTrip(*Make(Codec::kFp4E3M0, block), in);
    for (size_t start = 0; start < in.size(); start += block) {
      size_t len = std::min(block, in.size() - start);
      float absmax = BlockAbsMax(in, start, len);
      for (size_t i = start; i < start + len; ++i) {
        // Within a third of |x| (power-of-two rounding), plus the flush below 2^-7.
        REQUIRE(std::fabs(out[i] - in[i]) <= std::fabs(in[i]) / 3.0f * 1.0001f + absmax * 0.0078125f * 1.5f);
        REQUIRE(std::signbit(out[i]) == std::signbit(in[i]));
      }
    }
  }
  // Exact powers of two within range are represented exactly.
  auto exact = RoundTrip(*Make(Codec::kFp4E3M0, 8), {1.0f, -0.5f, 0.25f, 0.125f, 1.0f / 64, 0.0f, -1.0f / 32, 0.0f});
  CHECK(exact == std::vector<float>{1.0f, -0.5f, 0.25f, 0.125f, 1.0f / 64, 0.0f, -1.0f / 32, 0.0f});
}

TEST_CASE("Dense codecs handle zeros, odd sizes and tiny inputs", "[codec]") {
  for (Codec c : {Codec::kBf16, Codec::kInt8Block, Codec::kInt4Block, Codec::kFp4E3M0}) {
    CHECK(RoundTrip(*Make(c, 4), std::vector<float>(9, 0.0f)) == std::vector<float>(9, 0.0f));
    CHECK(RoundTrip(*Make(c, 4), {}).empty());
    auto one = RoundTrip(*Make(c, 4), {2.0f});
    CHECK(one[0] == 2.0f);
  }
}

TEST_CASE("Decode rejects a payload of the wrong size instead of reading past it", "[codec]") {
  for (Codec c : {Codec::kFp32, Codec::kBf16, Codec::kInt8Block, Codec::kInt4Block, Codec::kFp4E3M0, Codec::kTopK,
                  Codec::kTopK2Bit}) {
    auto codec = Make(c, 16, 0.1);
    std::vector<std::byte> bytes;
    codec->Encode(RandomVector(100, 5), bytes);
    std::vector<float> out(100);
    bytes.pop_back();
    auto s = codec->Decode(bytes, out);
    CHECK(s.code() == StatusCode::kDataLoss);
    std::vector<float> bigger(101);
    bytes.push_back(std::byte{0});
    CHECK_FALSE(codec->Decode(bytes, bigger).ok());
    CHECK(codec->Decode(std::span<const std::byte>(), out).code() == StatusCode::kDataLoss);
  }
}

TEST_CASE("Top-k keeps the largest magnitudes and rejects bad indices", "[codec]") {
  auto codec = Make(Codec::kTopK, 256, 0.3);
  std::vector<float> in{0.1f, -5.0f, 0.2f, 3.0f, -0.3f, 0.0f, 4.0f, 0.05f, 0.0f, 0.01f};
  auto out = RoundTrip(*codec, in);
  CHECK(out == std::vector<float>{0, -5.0f, 0, 3.0f, 0, 0, 4.0f, 0, 0, 0});

  std::vector<std::byte> bytes;
  codec->Encode(in, bytes);
  std::vector<float> dst(10, 7.0f);
  uint32_t bad_index = 10;
  std::memcpy(bytes.data() + 4, &bad_index, 4);  // first index out of range
  auto s = codec->Decode(bytes, dst);
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(s.message().find("index 10") != std::string::npos);
  CHECK(dst == std::vector<float>(10, 7.0f));  // untouched on error
  uint32_t huge = 0xffffffffu;
  std::memcpy(bytes.data(), &huge, 4);
  CHECK(codec->Decode(bytes, dst).code() == StatusCode::kDataLoss);
}

TEST_CASE("Top-k selects exactly what a full sort selects, also where its sampled floor is fooled",
          "[codec][topk]") {
  // The reference: every entry sorted by magnitude (ties: lower index first),
  // the first k, back in index order.
  const auto reference = [](const std::vector<float>& in, size_t k) {
    std::vector<uint32_t> order(in.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return std::fabs(in[a]) > std::fabs(in[b]); });
    order.resize(k);
    std::sort(order.begin(), order.end());
    std::vector<float> out(in.size(), 0.0f);
    for (uint32_t i : order) out[i] = in[i];
    return out;
  };
  std::vector<std::pair<std::string, std::vector<float>>> cases;
  cases.emplace_back("gaussian", RandomVector(300'000, 11));
  cases.emplace_back("small", RandomVector(37, 12));
  std::vector<float> ties(200'000, 0.5f);  // one magnitude everywhere: the lowest indices win
  for (size_t i = 0; i < ties.size(); i += 7) ties[i] = -0.5f;
  cases.emplace_back("ties", ties);
  // Large values exactly on the sample's stride, small ones between: the
  // sampled floor keeps fewer than k, and the second pass keeps everything.
  std::vector<float> fooled(131'072, 0.001f);
  for (size_t i = 0; i < fooled.size(); i += 2) fooled[i] = 1000.0f + static_cast<float>(i);
  cases.emplace_back("fooled", fooled);
  std::vector<float> sparse(100'000, 0.0f);  // fewer nonzeros than k
  for (size_t i = 0; i < 50; ++i) sparse[i * 1999] = static_cast<float>(i) - 25.0f;
  cases.emplace_back("sparse", sparse);
  for (double fraction : {0.01, 0.6}) {
    for (const auto& [name, in] : cases) {
      INFO(name << " at " << fraction);
      auto codec = Make(Codec::kTopK, 256, fraction);
      const size_t k = (codec->EncodedBytes(in.size()) - 4) / 8;
      CHECK(RoundTrip(*codec, in) == reference(in, k));
    }
  }
}

TEST_CASE("Non-finite input encodes to defined output (the guard rejects it earlier)", "[codec]") {
  std::vector<float> in{1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -2.0f};
  for (Codec c : {Codec::kBf16, Codec::kInt8Block, Codec::kInt4Block, Codec::kFp4E3M0}) {
    auto out = RoundTrip(*Make(c, 2), in);
    CHECK(out.size() == 4);
  }
  CHECK(std::isnan(RoundTrip(*Make(Codec::kBf16), in)[1]));
}

TEST_CASE("AVX2 and baseline kernels produce the same bytes", "[codec]") {
  // Regions on different CPUs must encode identically (replicas stay bit-equal).
  auto in = RandomVector(10001, 9);
  in[3] = 0.0f;
  in[4] = -0.0f;
  for (Codec c : {Codec::kBf16, Codec::kInt8Block, Codec::kInt4Block, Codec::kFp4E3M0}) {
    for (size_t block : {size_t{7}, size_t{256}}) {
      INFO("codec " << CodecName(c) << ", block " << block);
      auto codec = Make(c, block);
      std::vector<std::byte> best, baseline;
      std::vector<float> best_out(in.size()), baseline_out(in.size());
      codec->Encode(in, best);
      REQUIRE(codec->Decode(best, best_out).ok());
      bool has_avx2 = kernels::ForceBaselineKernels(true);
      codec->Encode(in, baseline);
      REQUIRE(codec->Decode(baseline, baseline_out).ok());
      kernels::ForceBaselineKernels(false);
      if (!has_avx2) WARN("no AVX2 on this machine: both runs used the baseline kernels");
      REQUIRE(best == baseline);
      REQUIRE(std::memcmp(best_out.data(), baseline_out.data(), in.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("EncodeTo writes Encode's bytes and DecodeAdd gives Decode plus the addend, bit for bit", "[codec]") {
  // The ring's fused calls must not change a single bit of what regions agree on.
  struct BestKernelsAfter {  // also when a REQUIRE ends the case early
    ~BestKernelsAfter() { kernels::ForceBaselineKernels(false); }
  } restore;
  auto in = RandomVector(10001, 21);
  auto addend = RandomVector(10001, 22, 2.0f);
  for (Codec c : {Codec::kFp32, Codec::kBf16, Codec::kInt8Block, Codec::kInt4Block, Codec::kFp4E3M0, Codec::kTopK,
                  Codec::kTopK2Bit}) {
    for (bool baseline : {false, true}) {
      INFO("codec " << CodecName(c) << (baseline ? ", baseline kernels" : ""));
      kernels::ForceBaselineKernels(baseline);
      auto codec = Make(c, 256, 0.05);
      std::vector<std::byte> bytes;
      codec->Encode(in, bytes);
      std::vector<std::byte> into(bytes.size() + 3, std::byte{0x5a});  // a send buffer: the tail is not touched
      codec->EncodeTo(in, std::span<std::byte>(into).first(bytes.size()));
      CHECK(std::equal(bytes.begin(), bytes.end(), into.begin()));
      CHECK(into.back() == std::byte{0x5a});
      std::vector<float> decoded(in.size());
      REQUIRE(codec->Decode(bytes, decoded).ok());
      std::vector<float> want(in.size());
      for (size_t i = 0; i < in.size(); ++i) want[i] = decoded[i] + addend[i];
      std::vector<float> fused(in.size(), -1.0f);
      REQUIRE(codec->DecodeAdd(bytes, addend, fused).ok());
      CHECK(std::memcmp(fused.data(), want.data(), want.size() * sizeof(float)) == 0);
      // In place: the addend is the output.
      std::vector<float> in_place = addend;
      REQUIRE(codec->DecodeAdd(bytes, in_place, in_place).ok());
      CHECK(std::memcmp(in_place.data(), want.data(), want.size() * sizeof(float)) == 0);
      // A payload of the wrong size, or an addend of another length: an error, the output untouched.
      std::vector<float> untouched(in.size(), 7.0f);
      CHECK_FALSE(codec->DecodeAdd(std::span<const std::byte>(bytes).first(bytes.size() - 1), addend, untouched).ok());
      CHECK(codec->DecodeAdd(bytes, std::span<const float>(addend).first(10), untouched).code() ==
            StatusCode::kInvalidArgument);
      CHECK(std::all_of(untouched.begin(), untouched.end(), [](float x) { return x == 7.0f; }));
    }
  }
}
