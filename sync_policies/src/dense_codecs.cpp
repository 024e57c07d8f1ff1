// The dense compressors: fixed layouts (see compressor.h) over codec_kernels.
#include <cstring>
#include <string>

#include "codec_kernels.h"
#include "compressor_impl.h"

namespace longhaul::sync_policies {
namespace {

// What every dense codec shares: Encode is EncodeTo into a vector of the exact
// size, and a payload must be exactly EncodedBytes of its floats before
// anything is decoded.
class DenseCompressor : public Compressor {
 public:
  void Encode(std::span<const float> in, std::vector<std::byte>& out) const final {
    out.resize(EncodedBytes(in.size()));
    EncodeTo(in, out);
  }
  void EncodeTo(std::span<const float> in, std::span<std::byte> out) const override = 0;

 protected:
  Status CheckPayload(std::span<const std::byte> in, size_t n) const {
    if (in.size() == EncodedBytes(n)) return Status::Ok();
    return DataLoss(std::string(CodecName(codec())) + " payload of " + std::to_string(in.size()) +
                    " bytes, expected " + std::to_string(EncodedBytes(n)) + " for " + std::to_string(n) + " floats");
  }
  // DecodeAdd's checks: the addend's length, then the payload's size.
  Status CheckDecodeAdd(std::span<const std::byte> in, std::span<const float> addend, std::span<float> out) const {
    LONGHAUL_RETURN_IF_ERROR(CheckAddend(addend, out));
    return CheckPayload(in, out.size());
  }
};

class Fp32Compressor final : public DenseCompressor {
 public:
  Codec codec() const override { return Codec::kFp32; }
  size_t EncodedBytes(size_t n) const override { return n * sizeof(float); }
  void EncodeTo(std::span<const float> in, std::span<std::byte> out) const override {
    if (!in.empty()) std::memcpy(out.data(), in.data(), EncodedBytes(in.size()));
  }
  Status Decode(std::span<const std::byte> in, std::span<float> out) const override {
    LONGHAUL_RETURN_IF_ERROR(CheckPayload(in, out.size()));
    if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
    return Status::Ok();
  }
  Status DecodeAdd(std::span<const std::byte> in, std::span<const float> addend, std::span<float> out) const override {
    LONGHAUL_RETURN_IF_ERROR(CheckDecodeAdd(in, addend, out));
    kernels::AddFp32(in.data(), addend.data(), out);
    return Status::Ok();
  }
};

class Bf16Compressor final : public DenseCompressor {
 public:
  Codec codec() const override { return Codec::kBf16; }
  size_t EncodedBytes(size_t n) const override { return n * sizeof(uint16_t); }
  void EncodeTo(std::span<const float> in, std::span<std::byte> out) const override {
    kernels::EncodeBf16(in, reinterpret_cast<uint16_t*>(out.data()));
  }
  Status Decode(std::span<const std::byte> in, std::span<float> out) const override {
    LONGHAUL_RETURN_IF_ERROR(CheckPayload(in, out.size()));
    kernels::DecodeBf16(in.data(), out);
    return Status::Ok();
  }
  Status DecodeAdd(std::span<const std::byte> in, std::span<const float> addend, std::span<float> out) const override {
    LONGHAUL_RETURN_IF_ERROR(CheckDecodeAdd(in, addend, out));
    kernels::DecodeAddBf16(in.data(), addend.data(), out);
    return Status::Ok();
  }
};

// Scales first, then the quantised elements (bytes per element: 1 or 1/2).
class BlockCompressor final : public DenseCompressor {
 public:
  BlockCompressor(Codec codec, size_t block) : codec_(codec), block_(block) {}
  Codec codec() const override { return codec_; }
  size_t EncodedBytes(size_t n) const override {
    size_t body = codec_ == Codec::kInt8Block ? n : (n + 1) / 2;
    return kernels::NumBlocks(n, block_) * sizeof(float) + body;
  }
  void EncodeTo(std::span<const float> in, std::span<std::byte> out) const override {
    std::byte* scales = out.data();
    std::byte* body = out.data() + kernels::NumBlocks(in.size(), block_) * sizeof(float);
    switch (codec_) {
      case Codec::kInt8Block:
        kernels::EncodeInt8Block(in, block_, scales, reinterpret_cast<int8_t*>(body));
        break;
      case Codec::kInt4Block:
        kernels::EncodeInt4Block(in, block_, scales, reinterpret_cast<uint8_t*>(body));
        break;
      default:
        kernels::EncodeFp4Block(in, block_, scales, reinterpret_cast<uint8_t*>(body));
        break;
    }
  }
  Status Decode(std::span<const std::byte> in, std::span<float> out) const override {
    LONGHAUL_RETURN_IF_ERROR(CheckPayload(in, out.size()));
    const std::byte* scales = in.data();
    const std::byte* body = in.data() + kernels::NumBlocks(out.size(), block_) * sizeof(float);
    switch (codec_) {
      case Codec::kInt8Block:
        kernels::DecodeInt8Block(scales, reinterpret_cast<const int8_t*>(body), block_, out);
        break;
      case Codec::kInt4Block:
        kernels::DecodeInt4Block(scales, reinterpret_cast<const uint8_t*>(body), block_, out);
        break;
      default:
        kernels::DecodeFp4Block(scales, reinterpret_cast<const uint8_t*>(body), block_, out);
        break;
    }
    return Status::Ok();
  }
  Status DecodeAdd(std::span<const std::byte> in, std::span<const float> addend, std::span<float> out) const override {
    if (codec_ != Codec::kInt8Block) return Compressor::DecodeAdd(in, addend, out);
    LONGHAUL_RETURN_IF_ERROR(CheckDecodeAdd(in, addend, out));
    const std::byte* body = in.data() + kernels::NumBlocks(out.size(), block_) * sizeof(float);
    kernels::DecodeAddInt8Block(in.data(), reinterpret_cast<const int8_t*>(body), block_, addend.data(), out);
    return Status::Ok();
  }

 private:
  Codec codec_;
  size_t block_;
};

}  // namespace

std::unique_ptr<Compressor> MakeDenseCompressor(const CompressionOptions& options) {
  switch (options.codec) {
    case Codec::kFp32:
      return std::make_unique<Fp32Compressor>();
    case Codec::kBf16:
      return std::make_unique<Bf16Compressor>();
    default:
      return std::make_unique<BlockCompressor>(options.codec, options.block_size);
  }
}

}  // namespace longhaul::sync_policies
