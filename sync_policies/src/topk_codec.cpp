// Top-k selection (shared with topk2) and the topk codec: the k entries of
// largest magnitude as (index, value) pairs, indices increasing. Ties in
// magnitude go to the lower index, so the selected set is a pure function of
// the input.
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

// A magnitude floor that about 1.5k + 64 of the n entries reach, from an evenly
// strided sample of at most 65,536 (0 = keep everything).
uint32_t SampledFloor(std::span<const float> in, size_t k) {
  const size_t n = in.size();
  const size_t m = std::min<size_t>(n, 65536);
  const size_t want = static_cast<size_t>(1.5 * static_cast<double>(k) * static_cast<double>(m) / static_cast<double>(n)) + 64;
  if (want >= m) return 0;
  thread_local std::vector<uint32_t> sample;
  sample.resize(m);
  for (size_t j = 0; j < m; ++j) sample[j] = MagnitudeBits(in[j * n / m]);
  std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(want), sample.end(),
                   std::greater<uint32_t>());
  return sample[want];
}

}  // namespace

void SelectTopK(std::span<const float> in, size_t k, std::byte* indices, std::byte* values) {
  const size_t n = in.size();
  if (k == 0) return;
  // One pass over the input, not a selection over all of it: a floor
  // estimated from a sample keeps a few more than k candidates, in index
  // order; the exact k-th largest magnitude is selected among them; the
  // output is taken from them. The result is exactly the k largest (ties to
  // the lower index) whatever the estimate: a floor that kept fewer than k
  // (a sample the input fooled) is replaced by 0, and every entry is a
  // candidate on the second pass.
  thread_local std::vector<uint32_t> cand_index, cand_key, scratch;
  for (uint32_t floor = SampledFloor(in, k);; floor = 0) {
    cand_index.clear();
    cand_key.clear();
    for (size_t i = 0; i < n; ++i) {
      const uint32_t key = MagnitudeBits(in[i]);
      if (key < floor) continue;
      cand_index.push_back(static_cast<uint32_t>(i));
      cand_key.push_back(key);
    }
    if (cand_key.size() >= k || floor == 0) break;
  }
  scratch.assign(cand_key.begin(), cand_key.end());
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(k - 1), scratch.end(),
                   std::greater<uint32_t>());
  const uint32_t threshold = scratch[k - 1];
  size_t above = 0;
  for (size_t i = 0; i < k; ++i) above += scratch[i] > threshold;  // all keys > threshold sit in [0, k-1)
  size_t ties_left = k - above;
  size_t taken = 0;
  for (size_t c = 0; c < cand_key.size() && taken < k; ++c) {
    const uint32_t key = cand_key[c];
    const bool take = key > threshold || (key == threshold && ties_left > 0);
    if (!take) continue;
    if (key == threshold) --ties_left;
    std::memcpy(indices + taken * 4, &cand_index[c], 4);
    std::memcpy(values + taken * 4, &in[cand_index[c]], 4);
    ++taken;
  }
  if (cand_key.size() > 4 * k + 4096) {  // a fallback or a tie-heavy input: do not keep n-sized buffers
    std::vector<uint32_t>().swap(cand_index);
    std::vector<uint32_t>().swap(cand_key);
    std::vector<uint32_t>().swap(scratch);
  }
}

Status CheckSparseEntries(std::string_view codec, uint32_t k, const std::byte* indices, size_t n, double fraction) {
  // k is a function of the length: a different k means a different length or
  // topk_fraction on the sender's side.
  if (k != TopKCount(n, fraction))
    return DataLoss(std::string(codec) + " payload has " + std::to_string(k) + " entries, expected " +
                    std::to_string(TopKCount(n, fraction)) + " for " + std::to_string(n) + " floats");
  int64_t prev = -1;
  for (size_t i = 0; i < k; ++i) {
    uint32_t j;
    std::memcpy(&j, indices + i * 4, 4);
    if (j >= n || static_cast<int64_t>(j) <= prev)
      return DataLoss(std::string(codec) + " entry " + std::to_string(i) + " has index " + std::to_string(j) +
                      " (out of range or not increasing; " + std::to_string(n) + " floats)");
    prev = j;
  }
  return Status::Ok();
}

namespace {

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
    SelectTopK(in, k, out.data() + 4, out.data() + 4 + k * 4);
  }

  Status Decode(std::span<const std::byte> in, std::span<float> out) const override {
    if (in.size() < 4) return DataLoss("topk payload of " + std::to_string(in.size()) + " bytes has no count");
    uint32_t k;
    std::memcpy(&k, in.data(), 4);
    if (in.size() != 4 + size_t{k} * 8)
      return DataLoss("topk payload of " + std::to_string(in.size()) + " bytes does not hold its " + std::to_string(k) +
                      " entries");
    const std::byte* indices = in.data() + 4;
    const std::byte* values = indices + size_t{k} * 4;
    // Validate before touching `out`: a bad payload leaves it as it was.
    LONGHAUL_RETURN_IF_ERROR(CheckSparseEntries("topk", k, indices, out.size(), fraction_));
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

}  // namespace longhaul::sync_policies
