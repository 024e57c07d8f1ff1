// Compressors for pseudo-gradients: what one region puts on the WAN.
//
// Every codec has an exact, deterministic byte layout (little-endian) so that the
// ring collectives can forward a payload unchanged and every participant decodes
// the same bytes to the same floats. Dense layouts (n = number of floats, B =
// block size, nb = ceil(n / B)):
//   kFp32      n * 4 bytes, the raw floats.
//   kBf16      n * 2 bytes, round-to-nearest-even of the upper 16 bits.
//   kInt8Block nb fp32 scales (absmax/127), then n int8 (round-to-nearest-even).
//   kInt4Block nb fp32 scales (absmax/7), then ceil(n/2) bytes of two's-complement
//              nibbles, element 2i in the low nibble of byte i.
//   kFp4E3M0   nb fp32 scales (absmax), then ceil(n/2) bytes of nibbles
//              [sign | 3-bit exponent e]: e = 0 is zero, else scale * 2^(e-7).
//   kTopK      u32 k, k u32 indices (strictly increasing), k fp32 values;
//              k = ceil(topk_fraction * n) (at least 1 when n > 0); n < 2^32.
//   kTopK2Bit  u32 k, k u32 indices (strictly increasing; the same entries as
//              kTopK keeps), 4 fp32 bin centres, ceil(k/4) bytes of 2-bit codes
//              (entry i in bits 2*(i%4)..2*(i%4)+1 of byte i/4; unused bits 0).
//              Code = 2 * (sign bit) + (larger half): the kept values of each
//              sign split at their median magnitude (the larger ceil(m/2) of m,
//              ties to the lower index), a bin's centre the mean of its members
//              (0 when empty), so an entry decodes to table[code]. 20 bytes when
//              n = 0. (Templar's per-payload lookup of bin means; its bins are
//              a uniform grid around the mean, which wastes 2 of 4 bins on the
//              empty middle of top-k values: they are all far from zero.)
// Accumulation is always fp32: codecs only ever encode and decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/codec.h"

namespace longhaul::sync_policies {

struct CompressionOptions {
  Codec codec = Codec::kInt8Block;
  size_t block_size = 256;      // floats per fp32 scale (int8, int4, fp4)
  double topk_fraction = 0.01;  // share of entries kept by kTopK and kTopK2Bit, in (0, 1]
  Status Validate() const;
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  static Result<std::unique_ptr<Compressor>> Create(const CompressionOptions& options);

  virtual Codec codec() const = 0;
  // Exact size of Encode's output for num_floats inputs (every codec here,
  // including the sparse ones whose k is a function of num_floats).
  virtual size_t EncodedBytes(size_t num_floats) const = 0;
  // Replaces `out` with the encoding of `in`.
  virtual void Encode(std::span<const float> in, std::vector<std::byte>& out) const = 0;
  // Decodes exactly out.size() floats. A payload of the wrong size or with bad
  // contents (top-k index out of range, topk2 padding bits set) is an error,
  // never undefined behaviour, and leaves `out` as it was.
  virtual Status Decode(std::span<const std::byte> in, std::span<float> out) const = 0;

  // The ring's hot path, without the copies the two calls above imply:
  // EncodeTo writes the encoding of `in` into exactly EncodedBytes(in.size())
  // bytes at `out` (a link's send buffer); DecodeAdd sets out = Decode(in) +
  // addend (bit for bit the same floats), in one pass where the codec has a
  // kernel for it; `out` may be `addend`, and is left as it was on error. The
  // defaults go through Encode / Decode and a scratch vector.
  virtual void EncodeTo(std::span<const float> in, std::span<std::byte> out) const;
  virtual Status DecodeAdd(std::span<const std::byte> in, std::span<const float> addend, std::span<float> out) const;
};

// Error feedback (per region): what a lossy codec did not transmit is remembered
// and added to the next update, so the sum of transmitted updates tracks the sum
// of true updates. Meant for the sparse codecs (topk, topk2); works with any codec.
class ErrorFeedback {
 public:
  // out = Encode(update + residual); the residual to keep, (update + residual)
  // - Decode(out), is staged: residual() is unchanged until Commit(), so an
  // exchange that fails keeps the residual it started from. A residual of a
  // different size than `update` (first call, new shard) restarts at zero.
  // Its buffers are kept across calls (no fresh model-sized memory per round).
  void Stage(const Compressor& compressor, std::span<const float> update, std::vector<std::byte>& out);
  void Commit();
  // Stage, then Commit.
  void Compress(const Compressor& compressor, std::span<const float> update, std::vector<std::byte>& out) {
    Stage(compressor, update, out);
    Commit();
  }
  std::span<const float> residual() const { return residual_; }
  void Reset() {
    residual_.clear();
    staged_ = false;
  }

 private:
  std::vector<float> residual_;
  std::vector<float> next_;  // the staged residual
  std::vector<float> scratch_;
  bool staged_ = false;
};

}  // namespace longhaul::sync_policies
