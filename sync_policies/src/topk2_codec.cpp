// topk2: the entries topk keeps (SelectTopK), each value sent as a 2-bit code
// into a table of 4 fp32 bin centres fitted to this payload (layout and bin
// rule in compressor.h). From Templar: a per-payload lookup table whose entries
// are the means of the values in each bin, so a bin decodes to the average of
// what it stands for. Unlike Templar's uniform grid around the mean, the bins
// split each sign at its median magnitude: top-k values are never near zero,
// and a grid spends half of 4 bins there. Decoding is a table lookup, so every
// region decodes the same bytes to the same bits; error feedback (ErrorFeedback)
// carries what the coarse values and the dropped entries did not send.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "compressor_impl.h"

namespace longhaul::sync_policies {
namespace {

constexpr size_t kBins = 4;
constexpr size_t kTableBytes = kBins * sizeof(float);

size_t CodeBytes(size_t k) { return (k + 3) / 4; }
size_t PayloadBytes(size_t k) { return sizeof(uint32_t) + k * 4 + kTableBytes + CodeBytes(k); }

uint32_t SignBit(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u >> 31;
}

// codes[i] = 2 * sign + (values[i] in the larger half of its sign), and each
// bin's centre: the mean of its members (summed in double, in index order),
// 0 for an empty bin. The halves split at a unique key (magnitude, then the
// lower position first, as SelectTopK breaks ties), so the larger half holds
// exactly ceil(m/2) of a sign's m values.
void FitBins(std::span<const float> values, std::span<uint8_t> codes, float centres[kBins]) {
  const auto key = [&](size_t i) { return (uint64_t{MagnitudeBits(values[i])} << 32) | (0xffffffffu - i); };
  thread_local std::vector<uint64_t> keys;
  for (uint32_t sign = 0; sign < 2; ++sign) {
    keys.clear();
    for (size_t i = 0; i < values.size(); ++i)
      if (SignBit(values[i]) == sign) keys.push_back(key(i));
    if (keys.empty()) continue;
    const size_t larger = (keys.size() + 1) / 2;
    std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(larger - 1), keys.end(),
                     std::greater<uint64_t>());
    const uint64_t pivot = keys[larger - 1];  // the smallest key of the larger half
    for (size_t i = 0; i < values.size(); ++i)
      if (SignBit(values[i]) == sign) codes[i] = static_cast<uint8_t>(2 * sign + (key(i) >= pivot ? 1 : 0));
  }
  double sum[kBins] = {};
  size_t count[kBins] = {};
  for (size_t i = 0; i < values.size(); ++i) {
    sum[codes[i]] += static_cast<double>(values[i]);
    ++count[codes[i]];
  }
  for (size_t b = 0; b < kBins; ++b)
    centres[b] = count[b] > 0 ? static_cast<float>(sum[b] / static_cast<double>(count[b])) : 0.0f;
}

class TopK2BitCompressor final : public Compressor {
 public:
  explicit TopK2BitCompressor(double fraction) : fraction_(fraction) {}
  Codec codec() const override { return Codec::kTopK2Bit; }
  size_t EncodedBytes(size_t n) const override { return PayloadBytes(TopKCount(n, fraction_)); }

  void Encode(std::span<const float> in, std::vector<std::byte>& out) const override {
    const size_t k = TopKCount(in.size(), fraction_);
    out.resize(PayloadBytes(k));
    const uint32_t k32 = static_cast<uint32_t>(k);
    std::memcpy(out.data(), &k32, 4);
    std::byte* table = out.data() + 4 + k * 4;
    std::byte* packed = table + kTableBytes;
    thread_local std::vector<float> values;
    thread_local std::vector<uint8_t> codes;
    values.resize(k);
    codes.resize(k);
    SelectTopK(in, k, out.data() + 4, reinterpret_cast<std::byte*>(values.data()));
    float centres[kBins];
    FitBins(values, codes, centres);
    std::memcpy(table, centres, kTableBytes);
    std::fill(packed, packed + CodeBytes(k), std::byte{0});
    for (size_t i = 0; i < k; ++i) packed[i / 4] |= static_cast<std::byte>(codes[i] << (2 * (i % 4)));
  }

  Status Decode(std::span<const std::byte> in, std::span<float> out) const override {
    if (in.size() < 4) return DataLoss("topk2 payload of " + std::to_string(in.size()) + " bytes has no count");
    uint32_t k;
    std::memcpy(&k, in.data(), 4);
    if (in.size() != PayloadBytes(k))
      return DataLoss("topk2 payload of " + std::to_string(in.size()) + " bytes does not hold its " +
                      std::to_string(k) + " entries (" + std::to_string(PayloadBytes(k)) + " bytes)");
    const std::byte* indices = in.data() + 4;
    const std::byte* table = indices + size_t{k} * 4;
    const std::byte* packed = table + kTableBytes;
    // Validate before touching `out`: a bad payload leaves it as it was. Every
    // 2-bit code names a bin; the bits past the last code must be 0, so a
    // payload has one spelling.
    LONGHAUL_RETURN_IF_ERROR(CheckSparseEntries("topk2", k, indices, out.size(), fraction_));
    if (k % 4 != 0 && (std::to_integer<unsigned>(packed[k / 4]) >> (2 * (k % 4))) != 0)
      return DataLoss("topk2 payload has code bits set past its " + std::to_string(k) + " entries (last byte " +
                      std::to_string(std::to_integer<unsigned>(packed[k / 4])) + ")");
    uint32_t centres[kBins];  // as bits: a centre is copied, never computed with
    std::memcpy(centres, table, kTableBytes);
    std::fill(out.begin(), out.end(), 0.0f);
    for (size_t i = 0; i < k; ++i) {
      uint32_t j;
      std::memcpy(&j, indices + i * 4, 4);
      const unsigned code = (std::to_integer<unsigned>(packed[i / 4]) >> (2 * (i % 4))) & 3u;
      std::memcpy(&out[j], &centres[code], 4);
    }
    return Status::Ok();
  }

 private:
  double fraction_;
};

}  // namespace

std::unique_ptr<Compressor> MakeTopK2BitCompressor(const CompressionOptions& options) {
  return std::make_unique<TopK2BitCompressor>(options.topk_fraction);
}

}  // namespace longhaul::sync_policies
