// Internal factories behind Compressor::Create, and the top-k selection both
// sparse codecs (topk, topk2) share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>

#include "longhaul/sync_policies/compressor.h"

namespace longhaul::sync_policies {

std::unique_ptr<Compressor> MakeDenseCompressor(const CompressionOptions& options);
std::unique_ptr<Compressor> MakeTopKCompressor(const CompressionOptions& options);
std::unique_ptr<Compressor> MakeTopK2BitCompressor(const CompressionOptions& options);

// DecodeAdd's addend must match its output in size (kInvalidArgument naming both).
Status CheckAddend(std::span<const float> addend, std::span<float> out);

// k of the sparse codecs for n floats: ceil(fraction * n), at least 1 when n > 0.
size_t TopKCount(size_t n, double fraction);

// |x| as an integer key: a total order on magnitudes (NaN above Inf).
inline uint32_t MagnitudeBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u & 0x7fffffffu;
}

// The k entries of `in` of largest magnitude (ties to the lower index), in
// index order: their u32 indices to `indices` and their fp32 values to
// `values`, 4k bytes each, any alignment. A pure function of the input;
// k <= in.size() < 2^32.
void SelectTopK(std::span<const float> in, size_t k, std::byte* indices, std::byte* values);

// What both sparse decoders check before writing anything: k is the count for
// n floats at `fraction`, and the k u32 indices at `indices` strictly increase
// below n. kDataLoss naming `codec` otherwise.
Status CheckSparseEntries(std::string_view codec, uint32_t k, const std::byte* indices, size_t n, double fraction);

}  // namespace longhaul::sync_policies
