#include "codec_kernels.h"

#include <algorithm>
#include <cstring>

namespace longhaul::sync_policies::kernels {
namespace {

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline void StoreScale(std::byte* scales, size_t b, float s) { std::memcpy(scales + b * sizeof s, &s, sizeof s); }
inline float LoadScale(const std::byte* scales, size_t b) {
  float s;
  std::memcpy(&s, scales + b * sizeof s, sizeof s);
  return s;
}

// Largest |x| of a block, as float. Computed on the bit patterns with an integer
// max: the order of non-negative floats is the order of their bits, and an
// integer max reduction vectorises where a float one (NaN rules) does not.
inline float AbsMax(const float* x, size_t n) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t a = Bits(x[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  return FromBits(m);
}

// Round to nearest even for |v| < 2^22: adding and subtracting 1.5 * 2^23 leaves
// the rounded value (exact IEEE ops; matches CUDA's __float2int_rn).
constexpr float kRoundMagic = 12582912.0f;
inline float RoundEven(float v) { return (v + kRoundMagic) - kRoundMagic; }

inline float InverseScale(float absmax, float levels) {
  // Non-finite absmax gives 0: the output is garbage, but defined (the guard
  // rejects non-finite pseudo-gradients before they get here).
  return (absmax > 0.0f && absmax <= 3.4028234663852886e38f) ? levels / absmax : 0.0f;
}

// Quantises x[0..n) to integers in [-levels, levels].
inline void QuantiseBlock(const float* x, size_t n, float inv, float levels, int32_t* q) {
  for (size_t i = 0; i < n; ++i) {
    float v = x[i] * inv;
    v = std::min(levels, std::max(-levels, v));  // NaN -> -levels, defined
    q[i] = static_cast<int32_t>(RoundEven(v));
  }
}

// E3M0 code of |x| * inv (in [0, 1] up to rounding): nearest power of two 2^(e-7),
// e in 1..7, or 0 below 2^-7. Adding half a mantissa to the bits rounds to the
// nearest power of two (ties up) by carrying into the exponent.
inline uint32_t Fp4Magnitude(float r) {
  uint32_t rounded = (Bits(r) & 0x7fffffffu) + 0x00400000u;
  int32_t e = static_cast<int32_t>(rounded >> 23) - 120;  // 2^0 -> 7, 2^-6 -> 1
  e = e < 0 ? 0 : e;
  e = e > 7 ? 7 : e;
  e = (e == 0 && r >= 0.0078125f) ? 1 : e;  // [2^-7, 1.5*2^-7) is nearer 2^-6 than 0
  return static_cast<uint32_t>(e);
}

}  // namespace

void EncodeBf16(std::span<const float> in, uint16_t* out) {
  const float* x = in.data();
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t u = Bits(x[i]);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
    out[i] = static_cast<uint16_t>(is_nan ? nan : rounded);
  }
}

void DecodeBf16(const std::byte* in, std::span<float> out) {
  float* y = out.data();
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, sizeof h);
    y[i] = FromBits(static_cast<uint32_t>(h) << 16);
  }
}

void EncodeInt8Block(std::span<const float> in, size_t block, std::byte* scales, int8_t* q) {
  int32_t tmp[1024];
  for (size_t b = 0, start = 0; start < in.size(); ++b, start += block) {
    size_t len = std::min(block, in.size() - start);
    const float* x = in.data() + start;
    float absmax = AbsMax(x, len);
    StoreScale(scales, b, absmax / 127.0f);
    float inv = InverseScale(absmax, 127.0f);
    for (size_t off = 0; off < len; off += 1024) {
      size_t m = std::min<size_t>(1024, len - off);
      QuantiseBlock(x + off, m, inv, 127.0f, tmp);
      int8_t* dst = q + start + off;
      for (size_t i = 0; i < m; ++i) dst[i] = static_cast<int8_t>(tmp[i]);
    }
  }
}

void DecodeInt8Block(const std::byte* scales, const int8_t* q, size_t block, std::span<float> out) {
  for (size_t b = 0, start = 0; start < out.size(); ++b, start += block) {
    size_t len = std::min(block, out.size() - start);
    float s = LoadScale(scales, b);
    const int8_t* src = q + start;
    float* y = out.data() + start;
    for (size_t i = 0; i < len; ++i) y[i] = s * static_cast<float>(src[i]);
  }
}

namespace {

// Shared frame of the two nibble codecs: per-block scale, per-element 4-bit code
// into a scratch of codes, then pairs packed (element 2i low nibble of byte i).
template <typename CodeFn>
void EncodeNibbles(std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed, CodeFn code) {
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
      for (size_t k = 0; k < pairs; ++k)
        dst[k] = static_cast<uint8_t>(codes[i + 2 * k] | (codes[i + 2 * k + 1] << 4));
      if ((m - i) % 2 == 1) pending = codes[m - 1];
    }
  }
  if (pending >= 0) packed[(n - 1) / 2] = static_cast<uint8_t>(pending);
}

struct Int4Code {
  float Scale(float absmax) const { return absmax / 7.0f; }
  float Inverse(float absmax) const { return InverseScale(absmax, 7.0f); }
  void Codes(const float* x, size_t m, float inv, uint8_t* codes) const {
    int32_t q[1024];
    QuantiseBlock(x, m, inv, 7.0f, q);
    for (size_t i = 0; i < m; ++i) codes[i] = static_cast<uint8_t>(q[i] & 0xf);
  }
};

struct Fp4Code {
  float Scale(float absmax) const { return absmax; }
  float Inverse(float absmax) const { return InverseScale(absmax, 1.0f); }
  void Codes(const float* x, size_t m, float inv, uint8_t* codes) const {
    for (size_t i = 0; i < m; ++i) {
      float r = x[i] * inv;
      uint32_t sign = (Bits(x[i]) >> 28) & 0x8u;
      codes[i] = static_cast<uint8_t>(sign | Fp4Magnitude(r));
    }
  }
};

inline float Int4Value(uint32_t nibble) {
  return static_cast<float>(static_cast<int32_t>(nibble << 28) >> 28);  // sign-extend
}

inline float Fp4Value(uint32_t nibble) {
  uint32_t e = nibble & 7u;
  float mag = e == 0 ? 0.0f : FromBits((e + 120u) << 23);  // 2^(e-7)
  return (nibble & 8u) ? -mag : mag;
}

template <typename ValueFn>
void DecodeNibbles(const std::byte* scales, const uint8_t* packed, size_t block, std::span<float> out, ValueFn value) {
  size_t n = out.size();
  float* y = out.data();
  for (size_t b = 0, start = 0; start < n; ++b, start += block) {
    size_t len = std::min(block, n - start);
    float s = LoadScale(scales, b);
    for (size_t i = start; i < start + len; ++i) {
      uint32_t byte = packed[i / 2];
      uint32_t nibble = (i & 1) ? (byte >> 4) : (byte & 0xfu);
      y[i] = s * value(nibble);
    }
  }
}

}  // namespace

void EncodeInt4Block(std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed) {
  EncodeNibbles(in, block, scales, packed, Int4Code{});
}
void DecodeInt4Block(const std::byte* scales, const uint8_t* packed, size_t block, std::span<float> out) {
  DecodeNibbles(scales, packed, block, out, Int4Value);
}
void EncodeFp4Block(std::span<const float> in, size_t block, std::byte* scales, uint8_t* packed) {
  EncodeNibbles(in, block, scales, packed, Fp4Code{});
}
void DecodeFp4Block(const std::byte* scales, const uint8_t* packed, size_t block, std::span<float> out) {
  DecodeNibbles(scales, packed, block, out, Fp4Value);
}

}  // namespace longhaul::sync_policies::kernels
