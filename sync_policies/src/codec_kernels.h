// CPU kernels of the dense codecs: plain loops over spans the compiler
// vectorises (no FMA contraction: the library builds with -ffp-contract=off).
// The float ops here are mirrored one for one by cuda/codecs.cu.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace longhaul::sync_policies::kernels {

inline constexpr size_t NumBlocks(size_t n, size_t block) { return (n + block - 1) / block; }

void EncodeBf16(std::span<const float> in, uint16_t* out);
// Decoders read through memcpy: received payloads need not be aligned.
void DecodeBf16(const std::byte* in, std::span<float> out);
// out[i] = decoded[i] + addend[i] in one pass (the ring's reduce step): the
// same floats as decoding, then adding; out may be addend.
void DecodeAddBf16(const std::byte* in, const float* addend, std::span<float> out);
void AddFp32(const std::byte* in, const float* addend, std::span<float> out);

// Symmetric integer quantisation per block: scale = absmax / levels,
// q = rne(clamp(x * (levels / absmax), -levels, levels)). levels = 127 (int8) or 7 (int4).
void EncodeInt8Block(std::span<const float> in, size_t block, std::byte* scales, int8_t* q);
void DecodeInt8Block(const std::byte* scales, const int8_t* q, size_t block, std::span<float> out);
void DecodeAddInt8Block(const std::byte* scales, const int8_t* q, size_t block, const float* addend,
                        std::span<float> out);
void EncodeInt4Block(std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed);
void DecodeInt4Block(const std::byte* scales, const uint8_t* packed, size_t block, std::span<float> out);
void EncodeFp4Block(std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed);
void DecodeFp4Block(const std::byte* scales, const uint8_t* packed, size_t block, std::span<float> out);

// Tests: force the baseline (non-AVX2) kernels or go back to the best ones.
// Returns whether this machine has the AVX2 versions at all.
bool ForceBaselineKernels(bool force);

}  // namespace longhaul::sync_policies::kernels
