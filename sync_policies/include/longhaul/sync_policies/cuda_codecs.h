// CUDA twins of the codecs, for pseudo-gradients that live on the GPU. Same
// byte layouts as compressor.h and bit-identical results to the CPU codecs
// (IEEE ops only: no contraction, round-to-nearest-even conversions; top-k with
// the same tie rule). topk2 has no kernels yet: it copies to the host and runs
// the CPU codec (the same bytes by construction, at PCIe speed). Pointers are
// device pointers, 4-byte aligned (cudaMalloc's are); calls are synchronous on
// the default stream. Built without CUDA, or without a usable device, every
// call returns kUnavailable.
#pragma once

#include <cstddef>

#include "longhaul/common/status.h"
#include "longhaul/sync_policies/compressor.h"

namespace longhaul::sync_policies::cuda {

// OK when a CUDA device can run kernels; otherwise kUnavailable with the reason
// ("cudaGetDeviceCount failed: error 35 ...", "built without CUDA").
Status DeviceUsable();

// `out` must hold Compressor::EncodedBytes(n) bytes.
Status EncodeOnDevice(const CompressionOptions& options, const float* in, size_t n, std::byte* out);
// `in` holds EncodedBytes(n) bytes; writes n floats to `out`. A malformed top-k
// payload (wrong count, index out of range; topk2: padding bits) is kDataLoss.
Status DecodeOnDevice(const CompressionOptions& options, const std::byte* in, size_t n, float* out);

}  // namespace longhaul::sync_policies::cuda
