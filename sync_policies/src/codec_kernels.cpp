#include "codec_kernels.h"

#include <algorithm>
#include <atomic>
#include <cstring>

// Every kernel body is compiled twice, for AVX2 and for baseline x86-64, and the
// first call picks one for this machine: wide vectors where available, and no
// -march flag that could break an older CPU. Both versions execute the same IEEE
// operations, so their outputs are bit-identical. (Plain dispatch rather than
// GCC's target_clones: ifunc resolvers run before sanitizer runtimes start and
// crash TSan builds.)
#if defined(__x86_64__) && defined(__GNUC__)
#define LONGHAUL_AVX2 __attribute__((target("avx2")))
static bool HaveAvx2() { return __builtin_cpu_supports("avx2"); }
#else
#define LONGHAUL_AVX2
static bool HaveAvx2() { return false; }
#endif
namespace {
std::atomic<bool> g_force_baseline{false};
}  // namespace
// Helpers are force-inlined so they are compiled for the target of each caller.
#define LONGHAUL_INLINE inline __attribute__((always_inline))

// Defines the public kernel `name` over the always-inline body `name##Impl`.
#define LONGHAUL_DISPATCH(name, params, args)                            \
  namespace {                                                            \
  LONGHAUL_AVX2 void name##Avx2 params { name##Impl args; }              \
  void name##Base params { name##Impl args; }                            \
  }                                                                      \
  void name params {                                                     \
    static const bool use_avx2 = HaveAvx2();                             \
    if (use_avx2 && !g_force_baseline.load(std::memory_order_relaxed)) { \
      name##Avx2 args;                                                   \
    } else {                                                             \
      name##Base args;                                                   \
    }                                                                    \
  }

namespace longhaul::sync_policies::kernels {
namespace {

LONGHAUL_INLINE uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
LONGHAUL_INLINE float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
LONGHAUL_INLINE void StoreScale(std::byte* scales, size_t b, float s) {
  std::memcpy(scales + b * sizeof s, &s, sizeof s);
}
LONGHAUL_INLINE float LoadScale(const std::byte* scales, size_t b) {
  float s;
  std::memcpy(&s, scales + b * sizeof s, sizeof s);
  return s;
}

// Largest |x| of a block, as float. Computed on the bit patterns with an integer
// max: the order of non-negative floats is the order of their bits, and an
// integer max reduction vectorises where a float one (NaN rules) does not.
LONGHAUL_INLINE float AbsMax(const float* x, size_t n) {
  int32_t m = 0;  // masked bits fit in int32: a signed max, which SSE2 has
  for (size_t i = 0; i < n; ++i) {
    int32_t a = static_cast<int32_t>(Bits(x[i]) & 0x7fffffffu);
    m = a > m ? a : m;
  }
  return FromBits(static_cast<uint32_t>(m));
}

// Round to nearest even for |v| < 2^22: adding and subtracting 1.5 * 2^23 leaves
// the rounded value (exact IEEE ops; matches CUDA's __float2int_rn).
constexpr float kRoundMagic = 12582912.0f;
LONGHAUL_INLINE float RoundEven(float v) { return (v + kRoundMagic) - kRoundMagic; }

LONGHAUL_INLINE float InverseScale(float absmax, float levels) {
  // Non-finite absmax gives 0: the output is garbage, but defined (the guard
  // rejects non-finite pseudo-gradients before they get here).
  return (absmax > 0.0f && absmax <= 3.4028234663852886e38f) ? levels / absmax : 0.0f;
}

// x * inv with non-finite products replaced by 0. With inv = levels / absmax the
// product of a finite x is within levels * (1 + 2^-22), which rounds into
// [-levels, levels], so no clamp is needed and the conversion is always defined.
// (Integer selects: a float clamp does not if-convert under IEEE NaN rules.)
LONGHAUL_INLINE float ScaledFinite(float x, float inv) {
  uint32_t v = Bits(x * inv);
  uint32_t keep = 0u - static_cast<uint32_t>(static_cast<int32_t>(v & 0x7fffffffu) < 0x7f800000);  // all ones if finite
  return FromBits(v & keep);  // (a mask, not ?:, so GCC if-converts the loop)
}

// E3M0 code of |x| * inv (in [0, 1] up to rounding): nearest power of two 2^(e-7),
// e in 1..7, or 0 below 2^-7. Adding half a mantissa to the bits rounds to the
// nearest power of two (ties up) by carrying into the exponent.
LONGHAUL_INLINE uint32_t Fp4Magnitude(float r) {
  uint32_t rounded = (Bits(r) & 0x7fffffffu) + 0x00400000u;
  int32_t e = static_cast<int32_t>(rounded >> 23) - 120;  // 2^0 -> 7, 2^-6 -> 1
  e = e < 0 ? 0 : e;
  e = e > 7 ? 7 : e;
  e = (e == 0 && r >= 0.0078125f) ? 1 : e;  // [2^-7, 1.5*2^-7) is nearer 2^-6 than 0
  return static_cast<uint32_t>(e);
}

}  // namespace

namespace {

LONGHAUL_INLINE void EncodeBf16Impl(std::span<const float> in, uint16_t* out) {
  const float* x = in.data();
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t u = Bits(x[i]);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
    out[i] = static_cast<uint16_t>(is_nan ? nan : rounded);
  }
}

LONGHAUL_INLINE void DecodeBf16Impl(const std::byte* in, std::span<float> out) {
  float* y = out.data();
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, sizeof h);
    y[i] = FromBits(static_cast<uint32_t>(h) << 16);
  }
}

LONGHAUL_INLINE void DecodeAddBf16Impl(const std::byte* in, const float* addend, std::span<float> out) {
  float* y = out.data();
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, sizeof h);
    y[i] = FromBits(static_cast<uint32_t>(h) << 16) + addend[i];
  }
}

LONGHAUL_INLINE void AddFp32Impl(const std::byte* in, const float* addend, std::span<float> out) {
  float* y = out.data();
  for (size_t i = 0; i < out.size(); ++i) {
    float x;
    std::memcpy(&x, in + 4 * i, sizeof x);
    y[i] = x + addend[i];
  }
}

LONGHAUL_INLINE void EncodeInt8BlockImpl(std::span<const float> in, size_t block, std::byte* scales, int8_t* q) {
  for (size_t b = 0, start = 0; start < in.size(); ++b, start += block) {
    size_t len = std::min(block, in.size() - start);
    const float* x = in.data() + start;
    float absmax = AbsMax(x, len);
    StoreScale(scales, b, absmax / 127.0f);
    float inv = InverseScale(absmax, 127.0f);
    int8_t* dst = q + start;
    for (size_t i = 0; i < len; ++i)
      dst[i] = static_cast<int8_t>(static_cast<int32_t>(RoundEven(ScaledFinite(x[i], inv))));
  }
}

LONGHAUL_INLINE void DecodeInt8BlockImpl(const std::byte* scales, const int8_t* q, size_t block, std::span<float> out) {
  for (size_t b = 0, start = 0; start < out.size(); ++b, start += block) {
    size_t len = std::min(block, out.size() - start);
    float s = LoadScale(scales, b);
    const int8_t* src = q + start;
    float* y = out.data() + start;
    for (size_t i = 0; i < len; ++i) y[i] = s * static_cast<float>(src[i]);
  }
}

LONGHAUL_INLINE void DecodeAddInt8BlockImpl(const std::byte* scales, const int8_t* q, size_t block,
                                            const float* addend, std::span<float> out) {
  for (size_t b = 0, start = 0; start < out.size(); ++b, start += block) {
    size_t len = std::min(block, out.size() - start);
    float s = LoadScale(scales, b);
    const int8_t* src = q + start;
    const float* a = addend + start;
    float* y = out.data() + start;
    for (size_t i = 0; i < len; ++i) y[i] = s * static_cast<float>(src[i]) + a[i];
  }
}

// Shared frame of the two nibble codecs: per-block scale, per-element 4-bit code
// into a scratch of codes, then pairs packed (element 2i low nibble of byte i).
template <typename CodeFn>
LONGHAUL_INLINE void EncodeNibbles(std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed,
                                   CodeFn code) {
  uint8_t codes[1024];
  size_t n = in.size();
  // Walk the input in pieces of <= 1024 elements that never straddle a block,
  // with even-aligned starts so pairs stay inside a piece unless a block ends on
  // an odd element, which the pending-nibble logic handles.
  int pending = -1;  // low nibble waiting for its partner, or -1
  for (size_t b = 0, start = 0; start < n; ++b, start += block) {
    size_t len = std::min(block, n - start);
    const float* x = in.data() + start;
    float absmax = AbsMax(x, len);
    float scale = code.Scale(absmax);
    StoreScale(scales, b, scale);
    float inv = code.Inverse(absmax);
    for (size_t off = 0; off < len; off += 1024) {
      size_t m = std::min<size_t>(1024, len - off);
      code.Codes(x + off, m, inv, codes);
      size_t i = 0;
      size_t pos = start + off;  // element index of codes[0]
      if (pending >= 0) {
        packed[(pos - 1) / 2] = static_cast<uint8_t>(pending | (codes[0] << 4));
        pending = -1;
        i = 1;
        ++pos;
      }
      uint8_t* dst = packed + pos / 2;
      size_t pairs = (m - i) / 2;
      for (size_t k = 0; k < pairs; ++k) dst[k] = static_cast<uint8_t>(codes[i + 2 * k] | (codes[i + 2 * k + 1] << 4));
      if ((m - i) % 2 == 1) pending = codes[m - 1];
    }
  }
  if (pending >= 0) packed[(n - 1) / 2] = static_cast<uint8_t>(pending);
}

struct Int4Code {
  LONGHAUL_INLINE float Scale(float absmax) const { return absmax / 7.0f; }
  LONGHAUL_INLINE float Inverse(float absmax) const { return InverseScale(absmax, 7.0f); }
  LONGHAUL_INLINE void Codes(const float* x, size_t m, float inv, uint8_t* codes) const {
    for (size_t i = 0; i < m; ++i)
      codes[i] = static_cast<uint8_t>(static_cast<int32_t>(RoundEven(ScaledFinite(x[i], inv))) & 0xf);
  }
};

struct Fp4Code {
  LONGHAUL_INLINE float Scale(float absmax) const { return absmax; }
  LONGHAUL_INLINE float Inverse(float absmax) const { return InverseScale(absmax, 1.0f); }
  LONGHAUL_INLINE void Codes(const float* x, size_t m, float inv, uint8_t* codes) const {
    for (size_t i = 0; i < m; ++i) {
      float r = ScaledFinite(x[i], inv);
      uint32_t sign = (Bits(x[i]) >> 28) & 0x8u;
      codes[i] = static_cast<uint8_t>(sign | Fp4Magnitude(r));
    }
  }
};

// Nibble values as float bits, with integer ops only (vectorisable).
LONGHAUL_INLINE uint32_t Int4Bits(uint32_t nibble) {
  return Bits(static_cast<float>(static_cast<int32_t>(nibble << 28) >> 28));  // sign-extend
}
LONGHAUL_INLINE uint32_t Fp4Bits(uint32_t nibble) {
  uint32_t e = nibble & 7u;
  uint32_t mag = e == 0 ? 0u : (e + 120u) << 23;  // 2^(e-7)
  return mag | ((nibble & 8u) << 28);
}

template <typename BitsFn>
LONGHAUL_INLINE void DecodeNibbles(const std::byte* scales, const uint8_t* packed, size_t block, std::span<float> out,
                                   BitsFn bits) {
  size_t n = out.size();
  float* y = out.data();
  for (size_t b = 0, start = 0; start < n; ++b, start += block) {
    size_t end = std::min(start + block, n);
    float s = LoadScale(scales, b);
    size_t i = start;
    if (i & 1) {  // block starts on a high nibble
      y[i] = s * FromBits(bits(static_cast<uint32_t>(packed[i / 2]) >> 4));
      ++i;
    }
    const uint8_t* src = packed + i / 2;
    float* dst = y + i;
    size_t pairs = (end - i) / 2;
    for (size_t k = 0; k < pairs; ++k) {
      uint32_t byte = src[k];
      dst[2 * k] = s * FromBits(bits(byte & 0xfu));
      dst[2 * k + 1] = s * FromBits(bits(byte >> 4));
    }
    i += 2 * pairs;
    if (i < end) y[i] = s * FromBits(bits(static_cast<uint32_t>(packed[i / 2]) & 0xfu));
  }
}

LONGHAUL_INLINE void EncodeInt4BlockImpl(std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed) {
  EncodeNibbles(in, block, scales, packed, Int4Code{});
}
LONGHAUL_INLINE void DecodeInt4BlockImpl(const std::byte* scales, const uint8_t* packed, size_t block,
                                         std::span<float> out) {
  DecodeNibbles(scales, packed, block, out, Int4Bits);
}
LONGHAUL_INLINE void EncodeFp4BlockImpl(std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed) {
  EncodeNibbles(in, block, scales, packed, Fp4Code{});
}
LONGHAUL_INLINE void DecodeFp4BlockImpl(const std::byte* scales, const uint8_t* packed, size_t block,
                                        std::span<float> out) {
  DecodeNibbles(scales, packed, block, out, Fp4Bits);
}

}  // namespace

LONGHAUL_DISPATCH(EncodeBf16, (std::span<const float> in, uint16_t* out), (in, out))
LONGHAUL_DISPATCH(DecodeBf16, (const std::byte* in, std::span<float> out), (in, out))
LONGHAUL_DISPATCH(DecodeAddBf16, (const std::byte* in, const float* addend, std::span<float> out), (in, addend, out))
LONGHAUL_DISPATCH(AddFp32, (const std::byte* in, const float* addend, std::span<float> out), (in, addend, out))
LONGHAUL_DISPATCH(DecodeAddInt8Block,
                  (const std::byte* scales, const int8_t* q, size_t block, const float* addend, std::span<float> out),
                  (scales, q, block, addend, out))
LONGHAUL_DISPATCH(EncodeInt8Block, (std::span<const float> in, size_t block, std::byte* scales, int8_t* q),
                  (in, block, scales, q))
LONGHAUL_DISPATCH(DecodeInt8Block, (const std::byte* scales, const int8_t* q, size_t block, std::span<float> out),
                  (scales, q, block, out))
LONGHAUL_DISPATCH(EncodeInt4Block, (std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed),
                  (in, block, scales, packed))
LONGHAUL_DISPATCH(DecodeInt4Block, (const std::byte* scales, const uint8_t* packed, size_t block, std::span<float> out),
                  (scales, packed, block, out))
LONGHAUL_DISPATCH(EncodeFp4Block, (std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed),
                  (in, block, scales, packed))
LONGHAUL_DISPATCH(DecodeFp4Block, (const std::byte* scales, const uint8_t* packed, size_t block, std::span<float> out),
                  (scales, packed, block, out))

bool ForceBaselineKernels(bool force) {
  g_force_baseline.store(force);
  return HaveAvx2();
}

}  // namespace longhaul::sync_policies::kernels
