// bench_codecs: encode and decode throughput (GB/s of fp32 input) of every codec,
// next to memcpy bandwidth on a buffer of the same size measured in the same run.
// Each repetition times memcpy, encode and decode back to back; GB/s figures are
// the best repetition, the memcpy ratio the median one. Each codec stops early
// after --max-seconds. The target: int8 and bf16 encode+decode >= 0.5x memcpy.
// Bytes per parameter are the codec's exact EncodedBytes over the input's floats.
// Then one ring reduce-scatter hop over the whole buffer (in the ring's pieces of
// kRingPieceFloats) for the dense codecs the ring carries: received payload
// decoded and added to this region's values, the sum encoded into a send buffer.
// "separate" is the path before the fused calls (Decode into scratch, add into
// another, Encode into a vector, copy into the send buffer); "fused" is
// DecodeAdd + EncodeTo, the ring's path now. Both timed back to back each
// repetition; the speed-up is the median of separate / fused.
// Last, a plaintext link's chunk checksum and copy, separate against fused
// (CopyWithChecksum), next to memcpy.
// With --gpu (CUDA builds): the CUDA codecs instead, encode and decode on
// device buffers (cuda_codecs.h) next to a device-to-device cudaMemcpy of the
// same buffer, each repetition back to back, the payloads checked byte for byte
// against the CPU codec's. The target: encode+decode >= 0.5x that copy.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <xxhash.h>

#include "longhaul/sync_policies/compressor.h"
#include "longhaul/sync_policies/cross_region.h"
#include "longhaul/wan_transport/endpoint.h"

#ifdef LONGHAUL_HAVE_CUDA
#include <cuda_runtime.h>

#include "longhaul/sync_policies/cuda_codecs.h"
#endif

namespace lsp = longhaul::sync_policies;

namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
double Seconds(Fn&& fn) {
  auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

#ifdef LONGHAUL_HAVE_CUDA
// The CUDA codecs on device buffers against cudaMemcpy device to device.
int RunGpu(const std::vector<float>& input, size_t block, double topk_fraction, int reps, double max_seconds) {
  if (longhaul::Status usable = lsp::cuda::DeviceUsable(); !usable.ok()) {
    std::fprintf(stderr, "bench_codecs --gpu: %s\n", usable.ToString().c_str());
    return 2;
  }
  const size_t n = input.size();
  const double bytes = static_cast<double>(n * sizeof(float));
  float *d_in = nullptr, *d_out = nullptr, *d_copy = nullptr;
  std::byte* d_encoded = nullptr;
  const std::vector<lsp::Codec> codecs = {lsp::Codec::kFp32,     lsp::Codec::kBf16,    lsp::Codec::kInt8Block,
                                          lsp::Codec::kInt4Block, lsp::Codec::kFp4E3M0, lsp::Codec::kTopK};
  size_t most = 0;  // the largest payload of them
  for (lsp::Codec codec : codecs) {
    auto cpu = lsp::Compressor::Create({.codec = codec, .block_size = block, .topk_fraction = topk_fraction});
    if (!cpu.ok()) {
      std::fprintf(stderr, "bench_codecs --gpu: %s\n", cpu.status().ToString().c_str());
      return 2;
    }
    most = std::max(most, (*cpu)->EncodedBytes(n));
  }
  if (cudaMalloc(&d_in, n * sizeof(float)) != cudaSuccess || cudaMalloc(&d_out, n * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&d_copy, n * sizeof(float)) != cudaSuccess || cudaMalloc(&d_encoded, most) != cudaSuccess) {
    std::fprintf(stderr, "bench_codecs --gpu: cudaMalloc failed\n");
    return 2;
  }
  cudaMemcpy(d_in, input.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  auto d2d = [&] {
    cudaMemcpy(d_copy, d_in, n * sizeof(float), cudaMemcpyDeviceToDevice);
    cudaDeviceSynchronize();
  };
  std::printf("%-6s %10s %10s %12s %12s %12s %10s\n", "codec", "enc GB/s", "dec GB/s", "enc+dec GB/s", "d2d GB/s",
              "x d2d copy", "same bytes");
  int rc = 0;
  for (lsp::Codec codec : codecs) {
    const lsp::CompressionOptions options{.codec = codec, .block_size = block, .topk_fraction = topk_fraction};
    auto cpu = lsp::Compressor::Create(options);
    const size_t encoded_bytes = (*cpu)->EncodedBytes(n);
    longhaul::Status st;
    auto encode = [&] { st = lsp::cuda::EncodeOnDevice(options, d_in, n, d_encoded); };
    auto decode = [&] {
      if (st.ok()) st = lsp::cuda::DecodeOnDevice(options, d_encoded, n, d_out);
    };
    encode();  // warm-up
    decode();
    d2d();
    double enc = 0, dec = 0, copy = 0;
    std::vector<double> ratios;
    const auto start = Clock::now();
    for (int r = 0; r < reps && st.ok(); ++r) {
      const double t_copy = Seconds(d2d), t_enc = Seconds(encode), t_dec = Seconds(decode);
      copy = std::max(copy, bytes / t_copy / 1e9);
      enc = std::max(enc, bytes / t_enc / 1e9);
      dec = std::max(dec, bytes / t_dec / 1e9);
      ratios.push_back(t_copy / (t_enc + t_dec));
      if (std::chrono::duration<double>(Clock::now() - start).count() > max_seconds) break;
    }
    if (!st.ok()) {
      std::fprintf(stderr, "bench_codecs --gpu: %s: %s\n", std::string(lsp::CodecName(codec)).c_str(),
                   st.ToString().c_str());
      rc = 1;
      continue;
    }
    std::vector<std::byte> on_device(encoded_bytes), on_host;
    cudaMemcpy(on_device.data(), d_encoded, encoded_bytes, cudaMemcpyDeviceToHost);
    (*cpu)->Encode(input, on_host);
    const bool same = on_host == on_device;
    if (!same) rc = 1;
    std::sort(ratios.begin(), ratios.end());
    std::printf("%-6s %10.2f %10.2f %12.2f %12.2f %12.2f %10s\n", std::string(lsp::CodecName(codec)).c_str(), enc, dec,
                1.0 / (1.0 / enc + 1.0 / dec), copy, ratios[ratios.size() / 2], same ? "yes" : "NO");
  }
  std::printf("\n(GB/s of fp32 input, best repetition; x d2d copy = median over repetitions of the\n"
              " device-to-device copy's time / (encode + decode time); same bytes = the device's payload\n"
              " equals the CPU codec's; target enc+dec >= 0.5x the copy)\n");
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_copy);
  cudaFree(d_encoded);
  return rc;
}
#endif

// A plaintext link's receiver checks each chunk's XXH3 and copies it into the
// reassembly buffer (wan_transport/chunking.cpp). Both ways over `input`'s
// bytes in chunks of the transport's size: separate (hash the chunk, then copy
// it: the copy reads what the hash brought into the cache) against fused (copy
// 16 KiB, hash it while it is in L1). False when they disagree.
bool CopyWithChecksum(const std::vector<float>& input, int reps) {
  const size_t n = input.size() * sizeof(float), chunk = longhaul::wan_transport::WanOptions{}.chunk_bytes;
  const size_t block = 16 << 10;
  const auto* src = reinterpret_cast<const unsigned char*>(input.data());
  std::vector<unsigned char> dst(n);
  std::vector<uint64_t> separate_sums, fused_sums;
  XXH3_state_t* state = XXH3_createState();
  auto separate = [&] {
    separate_sums.clear();
    for (size_t at = 0; at < n; at += chunk) {
      const size_t len = std::min(chunk, n - at);
      separate_sums.push_back(XXH3_64bits(src + at, len));
      std::memcpy(dst.data() + at, src + at, len);
    }
  };
  auto fused = [&] {
    fused_sums.clear();
    for (size_t at = 0; at < n; at += chunk) {
      const size_t len = std::min(chunk, n - at);
      XXH3_64bits_reset(state);
      for (size_t b = at; b < at + len; b += block) {
        const size_t m = std::min(block, at + len - b);
        std::memcpy(dst.data() + b, src + b, m);
        XXH3_64bits_update(state, dst.data() + b, m);
      }
      fused_sums.push_back(XXH3_64bits_digest(state));
    }
  };
  separate();  // touches dst
  double best_copy = 0, best_separate = 0, best_fused = 0;
  const double bytes = static_cast<double>(n);
  for (int r = 0; r < reps; ++r) {
    best_copy = std::max(best_copy, bytes / Seconds([&] { std::memcpy(dst.data(), src, n); }) / 1e9);
    best_separate = std::max(best_separate, bytes / Seconds(separate) / 1e9);
    best_fused = std::max(best_fused, bytes / Seconds(fused) / 1e9);
  }
  XXH3_freeState(state);
  std::printf("\nchunk checksum and copy (plaintext receiver), %zu KiB chunks, GB/s, best repetition\n", chunk >> 10);
  std::printf("%12s %12s %16s\n", "memcpy", "separate", "fused (16 KiB)");
  std::printf("%12.2f %12.2f %16.2f\n", best_copy, best_separate, best_fused);
  if (separate_sums != fused_sums) std::fprintf(stderr, "bench_codecs: fused and separate checksums differ\n");
  return separate_sums == fused_sums;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Codec throughput next to memcpy bandwidth"};
  size_t mib = 64;
  int reps = 5;
  size_t block = 256;
  double topk_fraction = 0.01;
  double max_seconds = 10;
  app.add_option("--mib", mib, "buffer size in MiB of fp32 input")->check(CLI::Range(size_t{1}, size_t{4096}));
  app.add_option("--reps", reps, "repetitions per codec")->check(CLI::Range(1, 100));
  app.add_option("--block-size", block, "floats per scale for int8/int4/fp4")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--topk-fraction", topk_fraction, "share kept by topk and topk2")->check(CLI::Range(1e-6, 1.0));
  app.add_option("--max-seconds", max_seconds, "time bound per codec, seconds")->check(CLI::Range(0.1, 600.0));
  bool gpu = false;
  app.add_flag("--gpu", gpu, "the CUDA codecs on device buffers against a device-to-device copy (CUDA builds)");
  CLI11_PARSE(app, argc, argv);

  const size_t n = mib * 1024 * 1024 / sizeof(float);
  const double bytes = static_cast<double>(n * sizeof(float));
  std::vector<float> input(n), decoded(n), copy(n);
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1e-3f);  // pseudo-gradient-like magnitudes
  for (auto& x : input) x = dist(rng);
  if (gpu) {
    std::printf("bench_codecs --gpu: %zu MiB fp32 (%zu floats), block %zu, topk %.3g, %d repetitions\n", mib, n,
                block, topk_fraction, reps);
#ifdef LONGHAUL_HAVE_CUDA
    return RunGpu(input, block, topk_fraction, reps, max_seconds);
#else
    std::fprintf(stderr, "bench_codecs: --gpu needs a build with CUDA\n");
    return 2;
#endif
  }

  // Baseline: memcpy of the same fp32 buffer. The machine may be shared, so each
  // repetition times memcpy, encode and decode back to back and yields one ratio
  // memcpy_time / (encode_time + decode_time); the median ratio is reported.
  std::memcpy(copy.data(), input.data(), n * sizeof(float));  // touch the pages once
  auto seconds = [](auto&& fn) { return Seconds(fn); };
  std::printf("bench_codecs: %zu MiB fp32 (%zu floats), block %zu, topk %.3g, %d repetitions\n", mib, n, block,
              topk_fraction, reps);
  struct Row {
    lsp::Codec codec;
    std::string name;
    double enc = 0, dec = 0, copy = 0, ratio = 0;  // best GB/s each; median ratio
    size_t encoded = 0;
  };
  std::vector<Row> rows;
  double copy_gbs = 0;
  for (lsp::Codec codec : {lsp::Codec::kFp32, lsp::Codec::kBf16, lsp::Codec::kInt8Block, lsp::Codec::kInt4Block,
                           lsp::Codec::kFp4E3M0, lsp::Codec::kTopK, lsp::Codec::kTopK2Bit}) {
    auto compressor = lsp::Compressor::Create({.codec = codec, .block_size = block, .topk_fraction = topk_fraction});
    if (!compressor.ok()) {
      std::fprintf(stderr, "bench_codecs: %s\n", compressor.status().ToString().c_str());
      return 2;
    }
    const lsp::Compressor& c = **compressor;
    std::vector<std::byte> encoded;
    c.Encode(input, encoded);  // warm-up: allocates and touches the output
    Row row{codec, std::string(lsp::CodecName(codec))};
    std::vector<double> ratios;
    bool decode_ok = true;
    auto start = Clock::now();
    for (int r = 0; r < reps; ++r) {
      double t_copy = seconds([&] { std::memcpy(copy.data(), input.data(), n * sizeof(float)); });
      double t_enc = seconds([&] { c.Encode(input, encoded); });
      double t_dec = seconds([&] { decode_ok &= c.Decode(encoded, decoded).ok(); });
      row.copy = std::max(row.copy, bytes / t_copy / 1e9);
      row.enc = std::max(row.enc, bytes / t_enc / 1e9);
      row.dec = std::max(row.dec, bytes / t_dec / 1e9);
      ratios.push_back(t_copy / (t_enc + t_dec));
      if (std::chrono::duration<double>(Clock::now() - start).count() > max_seconds) break;
    }
    if (!decode_ok) {
      std::fprintf(stderr, "bench_codecs: %s failed to decode its own output\n", row.name.c_str());
      return 1;
    }
    std::sort(ratios.begin(), ratios.end());
    row.ratio = ratios[ratios.size() / 2];
    row.encoded = c.EncodedBytes(n);
    if (encoded.size() != row.encoded) {
      std::fprintf(stderr, "bench_codecs: %s encoded %zu bytes, EncodedBytes says %zu\n", row.name.c_str(),
                   encoded.size(), row.encoded);
      return 1;
    }
    copy_gbs = std::max(copy_gbs, row.copy);
    rows.push_back(row);
  }

  std::printf("memcpy: %.2f GB/s (best of the run)\n\n", copy_gbs);
  std::printf("%-6s %10s %10s %12s %12s %12s %8s %9s\n", "codec", "enc GB/s", "dec GB/s", "enc+dec GB/s", "memcpy GB/s",
              "x memcpy", "ratio", "B/param");

  bool target_met = true;
  for (const Row& row : rows) {
    double combined = 1.0 / (1.0 / row.enc + 1.0 / row.dec);
    std::printf("%-6s %10.2f %10.2f %12.2f %12.2f %12.2f %7.1fx %9.4f\n", row.name.c_str(), row.enc, row.dec, combined,
                row.copy, row.ratio, bytes / static_cast<double>(row.encoded),
                static_cast<double>(row.encoded) / static_cast<double>(n));
    if ((row.codec == lsp::Codec::kInt8Block || row.codec == lsp::Codec::kBf16) && row.ratio < 0.5) target_met = false;
  }
  std::printf(
      "\n(GB/s of fp32 input, best repetition; enc+dec = input bytes / (encode + decode time);\n x memcpy = median "
      "over repetitions of memcpy time / (encode + decode time), measured\n back to back; ratio = compression "
      "ratio; B/param = encoded bytes per fp32 input value)\n");
  std::printf("target int8 and bf16 enc+dec >= 0.5x memcpy: %s\n", target_met ? "met" : "NOT met");

  // One reduce-scatter hop, separate calls against the fused ones.
  const size_t piece = lsp::kRingPieceFloats;
  const std::vector<float> mine(input.rbegin(), input.rend());
  std::printf("\nring hop over %zu MiB in pieces of %zu floats (GB/s of fp32 input, best repetition)\n", mib, piece);
  std::printf("%-6s %12s %12s %10s\n", "codec", "separate", "fused", "speed-up");
  for (lsp::Codec codec : {lsp::Codec::kFp32, lsp::Codec::kBf16, lsp::Codec::kInt8Block}) {
    auto compressor = lsp::Compressor::Create({.codec = codec, .block_size = block});
    const lsp::Compressor& c = **compressor;
    std::vector<std::vector<std::byte>> payloads;  // what arrives: the input's pieces, encoded
    for (size_t at = 0; at < n; at += piece) {
      payloads.emplace_back();
      c.Encode(std::span<const float>(input).subspan(at, std::min(piece, n - at)), payloads.back());
    }
    std::vector<float> scratch(piece), acc(piece);
    std::vector<std::byte> encoded, send(c.EncodedBytes(piece));
    bool ok = true;
    auto separate = [&] {
      for (size_t at = 0, p = 0; at < n; at += piece, ++p) {
        const size_t len = std::min(piece, n - at);
        std::span<float> d(scratch.data(), len), a(acc.data(), len);
        ok &= c.Decode(payloads[p], d).ok();
        for (size_t i = 0; i < len; ++i) a[i] = d[i] + mine[at + i];
        c.Encode(a, encoded);
        std::memcpy(send.data(), encoded.data(), encoded.size());
      }
    };
    auto fused = [&] {
      for (size_t at = 0, p = 0; at < n; at += piece, ++p) {
        const size_t len = std::min(piece, n - at);
        std::span<float> a(acc.data(), len);
        ok &= c.DecodeAdd(payloads[p], std::span<const float>(mine).subspan(at, len), a).ok();
        c.EncodeTo(a, std::span<std::byte>(send).first(c.EncodedBytes(len)));
      }
    };
    separate();  // warm-up: sizes the scratch vectors
    fused();
    double best_separate = 0, best_fused = 0;
    std::vector<double> ratios;
    for (int r = 0; r < reps; ++r) {
      const double t_separate = seconds(separate), t_fused = seconds(fused);
      best_separate = std::max(best_separate, bytes / t_separate / 1e9);
      best_fused = std::max(best_fused, bytes / t_fused / 1e9);
      ratios.push_back(t_separate / t_fused);
    }
    if (!ok) {
      std::fprintf(stderr, "bench_codecs: %s failed to decode its own output in the ring hop\n",
                   std::string(lsp::CodecName(codec)).c_str());
      return 1;
    }
    std::sort(ratios.begin(), ratios.end());
    std::printf("%-6s %12.2f %12.2f %9.2fx\n", std::string(lsp::CodecName(codec)).c_str(), best_separate, best_fused,
                ratios[ratios.size() / 2]);
  }
  return CopyWithChecksum(input, reps) ? 0 : 1;
}
