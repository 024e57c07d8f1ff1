// Top-k sparsification: the k entries of largest magnitude as (index, value)
// pairs, indices increasing. Ties in magnitude go to the lower index, so the
// selected set is a pure function of the input.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "compressor_impl.h"

namespace longhaul::sync_policies {

size_t TopKCount(size_t n, double fraction) {
  if (n == 0) return 0;
  double k = std::ceil(fraction * static_cast<double>(n));
  if (k < 1) return 1;
  return k >= static_cast<double>(n) ? n : static_cast<size_t>(k);
}

namespace {

uint32_t MagnitudeBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u & 0x7fffffffu;  // total order on |x| (NaN above Inf): a valid comparator
}

class TopKCompressor final : public Compressor {
 public:
  explicit TopKCompressor(double fraction) : fraction_(fraction) {}
  Codec codec() const override { return Codec::kTopK; }
  size_t EncodedBytes(size_t n) const override { return sizeof(uint32_t) + TopKCount(n, fraction_) * 8; }

  void Encode(std::span<const float> in, std::vector<std::byte>& out) const override {
    const size_t n = in.size(), k = TopKCount(n, fraction_);
    out.resize(EncodedBytes(n));
    uint32_t k32 = static_cast<uint32_t>(k);
    std::memcpy(out.data(), &k32, 4);
    if (k == 0) return;
    // Threshold = the k-th largest magnitude (selection on plain keys, cheaper
    // than on indices), then one pass in index order takes everything above it
    // and the lowest-index entries equal to it.
    std::vector<uint32_t> keys(n);
    for (size_t i = 0; i < n; ++i) keys[i] = MagnitudeBits(in[i]);
    std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(k - 1), keys.end(),
                     std::greater<uint32_t>());
    const uint32_t threshold = keys[k - 1];
    size_t above = 0;
    for (size_t i = 0; i < k; ++i) above += keys[i] > threshold;  // all keys > threshold sit in [0, k-1)
    size_t ties_left = k - above;
    std::byte* indices = out.data() + 4;
    std::byte* values = indices + k * 4;
    size_t taken = 0;
    for (size_t i = 0; i < n && taken < k; ++i) {
      uint32_t key = MagnitudeBits(in[i]);
      bool take = key > threshold || (key == threshold && ties_left > 0);
      if (!take) continue;
      if (key == threshold) --ties_left;
      uint32_t i32 = static_cast<uint32_t>(i);
      std::memcpy(indices + taken * 4, &i32, 4);
      std::memcpy(values + taken * 4, &in[i], 4);
      ++taken;
    }
  }

  Status Decode(std::span<const std::byte> in, std::span<float> out) const override {
    if (in.size() < 4) return DataLoss("topk payload of " + std::to_string(in.size()) + " bytes has no count");
    uint32_t k;
    std::memcpy(&k, in.data(), 4);
    if (in.size() != 4 + size_t{k} * 8)
      return DataLoss("topk payload of " + std::to_string(in.size()) + " bytes does not hold its " + std::to_string(k) +
                      " entries");
    // k is a function of the length: a different k means a different length or
    // topk_fraction on the sender's side.
    if (k != TopKCount(out.size(), fraction_))
      return DataLoss("topk payload has " + std::to_string(k) + " entries, expected " +
                      std::to_string(TopKCount(out.size(), fraction_)) + " for " + std::to_string(out.size()) +
                      " floats");
    const std::byte* indices = in.data() + 4;
    const std::byte* values = indices + size_t{k} * 4;
    // Validate before touching `out`: a bad payload leaves it as it was.
    int64_t prev = -1;
    for (size_t i = 0; i < k; ++i) {
      uint32_t j;
      std::memcpy(&j, indices + i * 4, 4);
      if (j >= out.size() || static_cast<int64_t>(j) <= prev)
        return DataLoss("topk entry " + std::to_string(i) + " has index " + std::to_string(j) +
                        " (out of range or not increasing; " + std::to_string(out.size()) + " floats)");
      prev = j;
    }
    std::fill(out.begin(), out.end(), 0.0f);
    for (size_t i = 0; i < k; ++i) {
      uint32_t j;
      std::memcpy(&j, indices + i * 4, 4);
      std::memcpy(&out[j], values + i * 4, 4);
    }
    return Status::Ok();
  }

 private:
  double fraction_;
};

}  // namespace

std::unique_ptr<Compressor> MakeTopKCompressor(const CompressionOptions& options) {
  return std::make_unique<TopKCompressor>(options.topk_fraction);
}

Result<std::unique_ptr<Compressor>> Compressor::Create(const CompressionOptions& options) {
  LONGHAUL_RETURN_IF_ERROR(options.Validate());
  if (options.codec == Codec::kTopK) return MakeTopKCompressor(options);
  return MakeDenseCompressor(options);
}

}  // namespace longhaul::sync_policies
