// cuda_codecs.h over the C++17 launchers in cuda/codecs.cu (or kUnavailable
// when the library was built without CUDA).
#include "longhaul/sync_policies/cuda_codecs.h"

#if LONGHAUL_HAVE_CUDA
#include <vector>

#include "compressor_impl.h"
#include "cuda/launch.h"
#endif

namespace longhaul::sync_policies::cuda {

#if LONGHAUL_HAVE_CUDA
namespace {

Result<int> DenseLauncherCodec(Codec codec) {
  switch (codec) {
    case Codec::kFp32:
      return int{cuda_detail::kFp32};
    case Codec::kBf16:
      return int{cuda_detail::kBf16};
    case Codec::kInt8Block:
      return int{cuda_detail::kInt8};
    case Codec::kInt4Block:
      return int{cuda_detail::kInt4};
    case Codec::kFp4E3M0:
      return int{cuda_detail::kFp4};
    default:
      return InvalidArgument("codec " + std::string(CodecName(codec)) + " is not dense");
  }
}

Status ToStatus(const cuda_detail::LaunchResult& r) {
  switch (r.kind) {
    case cuda_detail::LaunchResult::kOk:
      return Status::Ok();
    case cuda_detail::LaunchResult::kBadInput:
      return DataLoss(r.message);
    case cuda_detail::LaunchResult::kCudaError:
      break;
  }
  return Unavailable(r.message);
}

// topk2 has no kernels: its CPU codec runs on a host copy, which gives the
// CPU's bytes by construction. Decode writes `out` only when the payload is good.
Status EncodeThroughHost(const Compressor& cpu, const float* in, size_t n, std::byte* out) {
  std::vector<float> host(n);
  LONGHAUL_RETURN_IF_ERROR(ToStatus(cuda_detail::CopyToHost(host.data(), in, n * sizeof(float))));
  std::vector<std::byte> bytes;
  cpu.Encode(host, bytes);
  return ToStatus(cuda_detail::CopyToDevice(out, bytes.data(), bytes.size()));
}

Status DecodeThroughHost(const Compressor& cpu, const std::byte* in, size_t n, float* out) {
  std::vector<std::byte> bytes(cpu.EncodedBytes(n));
  LONGHAUL_RETURN_IF_ERROR(ToStatus(cuda_detail::CopyToHost(bytes.data(), in, bytes.size())));
  std::vector<float> host(n);
  LONGHAUL_RETURN_IF_ERROR(cpu.Decode(bytes, host));
  return ToStatus(cuda_detail::CopyToDevice(out, host.data(), n * sizeof(float)));
}

}  // namespace

Status DeviceUsable() { return ToStatus(cuda_detail::DeviceCheck()); }

Status EncodeOnDevice(const CompressionOptions& options, const float* in, size_t n, std::byte* out) {
  LONGHAUL_ASSIGN_OR_RETURN(auto cpu, Compressor::Create(options));
  if (options.codec == Codec::kTopK)
    return ToStatus(cuda_detail::EncodeTopK(in, n, TopKCount(n, options.topk_fraction), out, cpu->EncodedBytes(n)));
  if (options.codec == Codec::kTopK2Bit) return EncodeThroughHost(*cpu, in, n, out);
  LONGHAUL_ASSIGN_OR_RETURN(int codec, DenseLauncherCodec(options.codec));
  return ToStatus(cuda_detail::Encode(codec, in, n, options.block_size, out, cpu->EncodedBytes(n)));
}

Status DecodeOnDevice(const CompressionOptions& options, const std::byte* in, size_t n, float* out) {
  LONGHAUL_ASSIGN_OR_RETURN(auto cpu, Compressor::Create(options));
  if (options.codec == Codec::kTopK)
    return ToStatus(cuda_detail::DecodeTopK(in, cpu->EncodedBytes(n), n, TopKCount(n, options.topk_fraction), out));
  if (options.codec == Codec::kTopK2Bit) return DecodeThroughHost(*cpu, in, n, out);
  LONGHAUL_ASSIGN_OR_RETURN(int codec, DenseLauncherCodec(options.codec));
  return ToStatus(cuda_detail::Decode(codec, in, cpu->EncodedBytes(n), n, options.block_size, out));
}

#else

Status DeviceUsable() { return Unavailable("longhaul was built without CUDA"); }
Status EncodeOnDevice(const CompressionOptions&, const float*, size_t, std::byte*) {
  return Unavailable("longhaul was built without CUDA");
}
Status DecodeOnDevice(const CompressionOptions&, const std::byte*, size_t, float*) {
  return Unavailable("longhaul was built without CUDA");
}

#endif

}  // namespace longhaul::sync_policies::cuda
