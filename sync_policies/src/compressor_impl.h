// Internal factories behind Compressor::Create.
#pragma once

#include <memory>

#include "longhaul/sync_policies/compressor.h"

namespace longhaul::sync_policies {

std::unique_ptr<Compressor> MakeDenseCompressor(const CompressionOptions& options);
std::unique_ptr<Compressor> MakeTopKCompressor(const CompressionOptions& options);

// k of the top-k codec for n floats: ceil(fraction * n), at least 1 when n > 0.
size_t TopKCount(size_t n, double fraction);

}  // namespace longhaul::sync_policies
