// THE shared quantization math of fusednorm: encoders, decoders and the per-row scalar formulas
// of docs/numerics.md. Header-only, compiled for the host (C++17) and for CUDA/HIP devices; it
// includes no vendor header. Every backend calls these functions or reproduces them exactly
// (the CPU SIMD encoders in backends/cpu/ are tested equal to these over all 2^32 f32 inputs).
#pragma once

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FN_HD __host__ __device__ __forceinline__
#elif defined(__GNUC__)
// Always inlined on the host too: the CPU backend calls these from Highway's per-target code
// (AVX2, AVX-512), and an out-of-line copy is compiled for the baseline target, in legacy SSE
// encoding. An SSE instruction executed while the upper halves of the vector registers are dirty
// is a state transition: 170-194 ns each on the development VM (tests/bench/cpu_vector_ports.c
// measures it; tests/cpu/sse_transitions.py is the test that the library holds no such call).
#define FN_HD inline __attribute__((always_inline))
#else
#define FN_HD inline
#endif

namespace fusednorm {
namespace math {

// ---------------------------------------------------------------- IEEE binary32 helpers
// The numerics contract forbids contraction and approximation: on the device every operation is
// an explicit round-to-nearest intrinsic, so neither -fmad nor fast-math can change a result.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
// Register moves (memcpy can go through the stack in device code).
FN_HD uint32_t bits_of(float f) { return __float_as_uint(f); }
FN_HD float float_of(uint32_t u) { return __uint_as_float(u); }
#else
FN_HD uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
FN_HD float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
#endif
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
FN_HD float add_rn(float a, float b) { return __fadd_rn(a, b); }
FN_HD float mul_rn(float a, float b) { return __fmul_rn(a, b); }
FN_HD float div_rn(float a, float b) { return __fdiv_rn(a, b); }
FN_HD float sqrt_rn(float a) { return __fsqrt_rn(a); }
FN_HD float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
#else
FN_HD float add_rn(float a, float b) { return a + b; }
FN_HD float mul_rn(float a, float b) { return a * b; }
FN_HD float div_rn(float a, float b) { return a / b; }
FN_HD float sqrt_rn(float a) { return __builtin_sqrtf(a); }
FN_HD float fma_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }  // fused (libm or FMA)
#endif

constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32InfBits = 0x7F800000u;
constexpr uint32_t kF32CanonicalNaN = 0x7FC00000u;

FN_HD bool is_nan_bits(uint32_t u) { return (u & kF32AbsMask) > kF32InfBits; }

// ---------------------------------------------------------------- FP8 / FP4 element formats
// A sign-exponent-mantissa format of at most 8 bits, encoded from f32 by rounding to nearest,
// ties to even, with subnormals, saturating to the largest finite (Inf included). One template
// serves all formats listed in formats.inc.
template <int kExpBits, int kManBits, int kBias, uint32_t kMaxCode, uint32_t kNanCode,
          bool kSignedNan, bool kHasNegZero, uint32_t kInfCode>
struct MiniFloat {
  static constexpr int kExp = kExpBits;
  static constexpr int kMan = kManBits;
  static constexpr int kSignShift = kExpBits + kManBits;
  static constexpr uint32_t kMagMask = (1u << kSignShift) - 1;
  static constexpr int kEmin = 1 - kBias;           // exponent of the smallest normal
  static constexpr int kShift = 23 - kManBits;      // f32 mantissa bits dropped
  static constexpr uint32_t kMaxCodeBits = kMaxCode;
  static constexpr uint32_t kNan = kNanCode;
  static constexpr bool kNanHasSign = kSignedNan;
  static constexpr bool kNegZero = kHasNegZero;
  // f32 bits of the largest finite value.
  static constexpr uint32_t kMaxBits =
      ((((kMaxCode >> kManBits) & ((1u << kExpBits) - 1)) + 127u - kBias) << 23) |
      ((kMaxCode & ((1u << kManBits) - 1)) << kShift);
  static constexpr uint32_t kMinNormalBits = uint32_t(127 + kEmin) << 23;
  // Subnormal rounding: adding K = 2^(emin - man + 23) to |v| < 2^emin makes the f32 ulp equal
  // to the target's subnormal quantum, so one correctly rounded addition rounds |v| RNE; the
  // low bits of the sum are then the code (a carry into 2^emin yields the smallest normal).
  static constexpr uint32_t kSubMagicBits = uint32_t(127 + kEmin - kManBits + 23) << 23;
  // Rebias subtracted from the rounded f32 bits >> kShift.
  static constexpr uint32_t kRebias = uint32_t(127 - kBias) << kManBits;
  // Scale of a subnormal code: 2^(emin - man).
  static constexpr uint32_t kSubQuantumBits = uint32_t(127 + kEmin - kManBits) << 23;

  // kKeepNanSign: fusednorm_cast keeps a NaN's sign; operations write the positive NaN, because
  // the sign of an arithmetic NaN differs between CPUs and GPUs (IEEE 754 leaves it open).
  template <bool kKeepNanSign = true>
  FN_HD static uint32_t encode(float v) {
    const uint32_t u = bits_of(v);
    const uint32_t sign = u >> 31;
    const uint32_t a = u & kF32AbsMask;
    if (a > kF32InfBits) return (kSignedNan && kKeepNanSign) ? (kNanCode | (sign << kSignShift)) : kNanCode;
    uint32_t code;
    if (a > kMaxBits) {
      code = kMaxCode;
    } else if (a >= kMinNormalBits) {
      const uint32_t r = a + ((1u << (kShift - 1)) - 1u) + ((a >> kShift) & 1u);
      code = (r >> kShift) - kRebias;
    } else {
      code = bits_of(add_rn(float_of(a), float_of(kSubMagicBits))) - kSubMagicBits;
    }
    if (!kHasNegZero && code == 0) return 0;
    return code | (sign << kSignShift);
  }

  FN_HD static float decode(uint32_t c) {
    const uint32_t sign = (c >> kSignShift) & 1u;
    const uint32_t mag = c & kMagMask;
    const uint32_t nan = (sign << 31) | kF32CanonicalNaN;
    if (kInfCode != 0) {
      if (mag == kInfCode) return float_of((sign << 31) | kF32InfBits);
      if (mag > kInfCode) return float_of(nan);
    } else if (kSignedNan) {
      if (mag == kNanCode) return float_of(nan);
    } else if (kNanCode != 0 && c == kNanCode) {
      return float_of(kF32CanonicalNaN);
    }
    const uint32_t e = mag >> kManBits;
    const uint32_t m = mag & ((1u << kManBits) - 1u);
    if (e == 0) {
      const float f = float_of(kSubQuantumBits) * float(m);  // exact: m < 2^man
      return float_of(bits_of(f) | (sign << 31));
    }
    return float_of((sign << 31) | ((e + 127u - kBias) << 23) | (m << kShift));
  }
};

#define FN_MINIFLOAT(name, dl, e, m, bias, maxc, nanc, snan, negz, infc) \
  using name = MiniFloat<e, m, bias, maxc, nanc, snan, negz, infc>;
#include "formats.inc"
#undef FN_MINIFLOAT

// f8e4m3fnuz codes from hardware conversions (sm_89's e4m3fn of 2x, MI300's below): bytes equal
// to 0x80 cleared in w, the others kept: z = w ^ 0x80.. has a zero byte exactly there,
// and ((z & 0x7F..) + 0x7F..) | z has its top bit clear only in zero bytes (no carry leaves a byte).
// (z & 0x7F..) is w's magnitudes, w & 0x7F.., which callers may pass in (t).
FN_HD uint32_t fnuz_clear_neg_zero(uint32_t w, uint32_t t) {
  const uint32_t zero_bytes = ~((t + 0x7F7F7F7Fu) | (w ^ 0x80808080u)) & 0x80808080u;
  return w ^ zero_bytes;
}
FN_HD uint32_t fnuz_clear_neg_zero(uint32_t w) { return fnuz_clear_neg_zero(w, w & 0x7F7F7F7Fu); }
// encode_fnuz_rne's pieces: which half of a word its conversion writes, and its clamp.
template <bool kHigh>
struct HalfWord {
  static constexpr bool kValue = kHigh;
};
FN_HD float fnuz_clamp(float v) { return __builtin_fmaxf(__builtin_fminf(v, 240.0f), -240.0f); }
// f8e4m3fnuz through a hardware conversion that rounds to nearest even (MI300's v_cvt_pk_fp8_f32:
// backends/gpu/encode.cuh), kN = 2 or 4 values, element i in byte i. cvt(old, lo, hi, HalfWord<h>)
// puts the codes of lo and hi into bytes 2h and 2h + 1 of old and keeps the other half (h a type's
// constant: the instruction takes it as an immediate); it is relied on only for finite values in
// [-240, 240], and a negative value that rounds to zero may come back as 0x80 or 0x00. Clamp,
// convert, mend (docs/numerics.md §3c, "MI300"): the shared encoder's bytes for every input,
// checked over all 2^32 inputs with both readings of the zero (tests/cpu/encoders_exhaustive_test.cc)
// and, with the chip's conversion, by verify_encoders.
template <int kN, class Cvt>
FN_HD uint32_t encode_fnuz_rne(const float* v, Cvt cvt) {
  uint32_t w = cvt(0u, fnuz_clamp(v[0]), fnuz_clamp(v[1]), HalfWord<false>{});  // bytes 2-3: old's 0
  if (kN == 4) w = cvt(w, fnuz_clamp(v[2]), fnuz_clamp(v[3]), HalfWord<true>{});
  w = fnuz_clear_neg_zero(w);
  for (int k = 0; k < kN; ++k)
    if (v[k] != v[k]) w = (w & ~(0xFFu << (8 * k))) | (0x80u << (8 * k));
  return w;
}

// f4e2m1 without branches (selects: no divergence in a GPU warp): MiniFloat::encode's algorithm for
// f4e2m1 with both range paths computed and one selected; NaN gives +0 as there. Proven equal to
// f4e2m1::encode over all 2^32 inputs (tests/cpu/encoders_exhaustive_test.cc, and the GPU plugin's
// verify_encoders on the device).
FN_HD uint32_t encode_f4e2m1_sel(float v) {
  const uint32_t u = bits_of(v);
  const uint32_t a = u & kF32AbsMask;
  // |v| < 1 (subnormal or zero): + 2^22 makes the f32 ulp 0.5, the e2m1 quantum there.
  const uint32_t sub = bits_of(add_rn(float_of(a), float_of(f4e2m1::kSubMagicBits))) - f4e2m1::kSubMagicBits;
  // 1 <= |v|: round the f32 bits to one mantissa bit, rebias.
  const uint32_t nor = ((a + ((1u << (f4e2m1::kShift - 1)) - 1u) + ((a >> f4e2m1::kShift) & 1u)) >> f4e2m1::kShift) -
                       f4e2m1::kRebias;
  uint32_t code = a < f4e2m1::kMinNormalBits ? sub : nor;
  code = a > f4e2m1::kMaxBits ? f4e2m1::kMaxCodeBits : code;  // above 6, Inf included: saturate
  code |= (u >> 31) << f4e2m1::kSignShift;
  return a > kF32InfBits ? f4e2m1::kNan : code;
}

// f4e2m1 of a value that is not NaN, in float arithmetic. c = min(|v|, 6) (saturation, Inf
// included) lies in the binade b = E - 127 (0, 1 or 2) of d = max(c, 1), whose e2m1 quantum is
// 2^(b-1) (0.5 below 2, 1 in [2, 4), 2 in [4, 6]). M = 2^(b+22) has that quantum as its f32 ulp,
// and so has M' = M + 6 ulps; c + M', rounded, stays in M's binade (c <= 2^(b+1), and 6 for b =
// 2, far below 2^(b+22)) and on M's grid with the same parity (6 is even), so the sum rounds c to
// nearest even on the e2m1 grid: bits(c + M') = bits(M) + 6 + k with k = rn(c / quantum) (an even
// k is an even e2m1 mantissa: 0, 1.0, 2.0, 4.0; odd k: 0.5, 1.5, 3.0, 6.0). The code is k + 2b (b
// = 0: k = 0..4 are codes 0..4; b = 1: k = 2..4 are 2.0, 3.0, 4.0, codes 4..6; b = 2: k = 2, 3
// are 4.0, 6.0, codes 6, 7). bits(M) = (E + 22) << 23 is a multiple of 8 and bits(M') >> 22 = 2E
// + 44 = 2b + 298, so bits(c + M') + (bits(M') >> 22) = bits(M) + code + 304, 304 = 8 * 38: the
// code is its low 3 bits. f4e2m1_num_low3 returns that sum (its bits above the third are not part
// of the code; the GPU packs words of 8 codes from it); encode_f4e2m1_num adds the sign. The CPU
// backend's vector encoder (EncodeMiniNoNaN) is the same formula for every format. Proven equal to
// f4e2m1::encode for every non-NaN f32 (tests/cpu/encoders_exhaustive_test.cc, and
// verify_encoders on the device).
FN_HD uint32_t f4e2m1_num_low3(float v) {
  const float a = __builtin_fabsf(v);  // |v| (not NaN): a GPU takes it as an operand modifier
  const float c = a < 6.0f ? a : 6.0f;
  const uint32_t m = (bits_of(c < 1.0f ? 1.0f : c) & kF32InfBits) + (22u << 23) + 6u;  // bits(M')
  return bits_of(add_rn(c, float_of(m))) + (m >> 22);
}
FN_HD uint32_t encode_f4e2m1_num(float v) { return (f4e2m1_num_low3(v) & 7u) | ((bits_of(v) >> 28) & 8u); }

// The f4e2m1 magnitude code of a = |v| < 7 (not NaN; a is +0 or positive), where no value needs
// saturating: c = a itself (a in [6, 7) lies in the binade of 4, where k = rn(a / 2) = 3 gives code
// 7; 7 would tie to k = 4). f4e2m1_num_low3's sum with two changes: M' = M + 258 ulps (258 is even,
// and a <= 4 quanta keeps a + M' in M's binade), made as e × (2^22 + 129) with e = 2^b, exact, so
// that a + M' is one FMA; and (bits(e) >> 22) = 2b + 254 in place of bits(M') >> 22. The sum is
// bits(M) + 258 + k + 2b + 254 = bits(M) + code + 512: its low byte is the code and nothing else
// (bits 3 to 7 clear), which lets the GPU kernels merge codes and signs a byte at a time
// (fp4_encode.cuh). Proven equal to the magnitude of f4e2m1::encode for every f32 with |v| < 7
// (tests/cpu/encoders_exhaustive_test.cc, and verify_encoders on the device).
FN_HD uint32_t f4e2m1_small_low(float a) {
  const float e = float_of(bits_of(a < 1.0f ? 1.0f : a) & kF32InfBits);  // 2^b
  return bits_of(fma_rn(e, 4194433.0f, a)) + (bits_of(e) >> 22);       // 4194433 = 2^22 + 129
}
constexpr uint32_t kF4SmallLimitBits = 0x40E00000u;  // bits of 7.0f: f4e2m1_small_low wants |v| below

// ---------------------------------------------------------------- f16 and bf16 (IEEE rounding)
// Round to nearest even; overflow gives Inf (these are storage types, not quantization targets).
// NaN keeps its sign and top payload bits and is made quiet; kKeepNanSign = false writes the
// positive canonical NaN (operations; see MiniFloat::encode).
template <bool kKeepNanSign = true>
FN_HD uint32_t encode_f16(float v) {
  const uint32_t u = bits_of(v);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & kF32AbsMask;
  if (a > kF32InfBits) return kKeepNanSign ? (sign | 0x7E00u | ((a >> 13) & 0x3FFu)) : 0x7E00u;
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520: rounds past 65504
  if (a >= 0x38800000u) {                       // >= 2^-14: normal
    const uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
    return sign | ((r >> 13) - (112u << 10));
  }
  // subnormal: K = 2^-1 (see MiniFloat::kSubMagicBits)
  return sign | (bits_of(add_rn(float_of(a), 0.5f)) - 0x3F000000u);
}

FN_HD float decode_f16(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  if (e == 0x1F) return float_of(sign | kF32InfBits | (m << 13));  // Inf, NaN (payload kept)
  if (e == 0) return float_of(bits_of(float(m) * 5.9604644775390625e-8f) | sign);  // m * 2^-24
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

template <bool kKeepNanSign = true>
FN_HD uint32_t encode_bf16(float v) {
  const uint32_t u = bits_of(v);
  if (is_nan_bits(u)) return kKeepNanSign ? ((u >> 16) | 0x0040u) : 0x7FC0u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

FN_HD float decode_bf16(uint32_t h) { return float_of(h << 16); }

// f32 as a storage type: identity, except that operations canonicalize NaN.
template <bool kKeepNanSign = true>
FN_HD uint32_t encode_f32(float v) {
  const uint32_t u = bits_of(v);
  return (!kKeepNanSign && is_nan_bits(u)) ? kF32CanonicalNaN : u;
}
FN_HD float decode_f32(uint32_t u) { return float_of(u); }

// ---------------------------------------------------------------- int8
// rn(v) clamped to [-128, 127]; NaN encodes as 0. Returns the two's complement byte.
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: x + M - M rounds |x| < 2^22 RNE
FN_HD uint32_t encode_int8(float v) {
  if (is_nan_bits(bits_of(v))) return 0;
  v = v < -128.0f ? -128.0f : (v > 127.0f ? 127.0f : v);
  const float r = add_rn(add_rn(v, kRoundMagic), -kRoundMagic);
  return uint32_t(int32_t(r)) & 0xFFu;
}
FN_HD float decode_int8(uint32_t c) { return float(int32_t(int8_t(uint8_t(c)))); }

// ---------------------------------------------------------------- e8m0 (UE8M0 scales)
// Code c is 2^(c - 127); 0xFF is NaN. Both encoders: NaN -> 0xFF; v <= 0 or v < 2^-127 -> 0x00;
// a result above 2^127 (Inf included) saturates to 0xFE. Exact bit arithmetic, never log2.
constexpr uint32_t kE8m0Nan = 0xFFu;
constexpr uint32_t kE8m0Max = 0xFEu;
constexpr uint32_t kF32Pow2m127 = 0x00400000u;  // 2^-127, an f32 subnormal

// Smallest power of two >= v (block scales: no element saturates).
FN_HD uint32_t encode_e8m0_up(float v) {
  const uint32_t u = bits_of(v);
  if (is_nan_bits(u)) return kE8m0Nan;
  if ((u >> 31) || u <= kF32Pow2m127) return 0;  // also -0, +0, below 2^-127, exactly 2^-127
  if (u > 0x7F000000u) return kE8m0Max;          // > 2^127
  if (u < 0x00800000u) return 1;                 // (2^-127, 2^-126)
  return (u >> 23) + ((u & 0x7FFFFFu) != 0);
}

// Nearest power of two, ties (1.5 * 2^e) up.
FN_HD uint32_t encode_e8m0_rn(float v) {
  const uint32_t u = bits_of(v);
  if (is_nan_bits(u)) return kE8m0Nan;
  if ((u >> 31) || u < 0x00600000u) return 0;  // below 1.5 * 2^-127
  if (u < 0x00800000u) return 1;
  const uint32_t c = (u >> 23) + ((u & 0x7FFFFFu) >= 0x400000u);
  return c > kE8m0Max ? kE8m0Max : c;
}

FN_HD float decode_e8m0(uint32_t c) {
  c &= 0xFFu;
  if (c == kE8m0Nan) return float_of(kF32CanonicalNaN);
  if (c == 0) return float_of(kF32Pow2m127);
  return float_of(c << 23);
}

// ---------------------------------------------------------------- the row reduction (§2)
// Number of strided partial sums P for a row of H elements: a power of two from H alone.
// part[p] = sum over k (increasing) of x[p + k*P]^2, then a pairwise tree
// (part[2j] + part[2j+1], level by level). See docs/numerics.md for the GPU mapping.
constexpr int64_t kMinPartials = 8;
constexpr int64_t kMaxPartials = 4096;
FN_HD int64_t reduction_partials(int64_t h) {
  int64_t p = kMinPartials;
  while (p * 2 <= h / 4 && p < kMaxPartials) p *= 2;
  return p;
}

// The canonical order, one element at a time: x(i) returns element i as f32; part has room for
// reduction_partials(h) floats. Host code (the reference and scalar paths of the CPU backend);
// vector and GPU code reproduce the same additions (docs/numerics.md §2).
template <class GetX>
inline float sum_squares_canonical(GetX x, int64_t h, float* part) {
  const int64_t p_count = reduction_partials(h);
  for (int64_t p = 0; p < p_count; ++p) part[p] = 0.0f;
  for (int64_t i = 0; i < h; ++i) {
    const float v = x(i);
    part[i % p_count] = add_rn(part[i % p_count], mul_rn(v, v));
  }
  for (int64_t n = p_count; n > 1; n /= 2)
    for (int64_t j = 0; j < n / 2; ++j) part[j] = add_rn(part[2 * j], part[2 * j + 1]);
  return part[0];
}

// ---------------------------------------------------------------- per-row formulas (§3)
// H as f32, rounded to nearest even (exact below 2^24).
FN_HD float length_f32(int64_t h) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __ll2float_rn(h);
#else
  return static_cast<float>(h);
#endif
}
// From the mean square ss / H: 1 / sqrt(mean + eps). A row whose mean square is not finite (an Inf
// or NaN element, or finite elements whose squares overflow f32, |x| >~ 1.8e19) gets NaN, so that
// every y of the row is NaN and the row's scale and codes say so (docs/numerics.md, "Edge policy"),
// instead of 1 / Inf = 0 normalizing the row to silent zeros.
FN_HD float inv_rms_of_mean(float mean, float eps) {
  const float d = sqrt_rn(add_rn(mean, eps));
  return (bits_of(d) & kF32AbsMask) >= kF32InfBits ? float_of(kF32CanonicalNaN) : div_rn(1.0f, d);
}
FN_HD float inv_rms(float ss, float h, float eps) { return inv_rms_of_mean(div_rn(ss, h), eps); }
// 1 / d for d a power of two whose reciprocal is a normal f32 (then exact: v * pow2_rcp(d) is the
// correctly rounded v / d for every v, subnormal results included), else 0.
FN_HD float pow2_rcp(float d) {
  const uint32_t b = bits_of(d), e = b >> 23;  // e > 255 for negative d
  return (b & 0x7FFFFFu) != 0 || e < 1 || e > 253 ? 0.0f : float_of((254u - e) << 23);
}
// inv_rms with rcp = pow2_rcp(h) computed once a call: ss * rcp where h is such a power of two (the
// same correctly rounded mean, no division), else the division.
FN_HD float inv_rms_rcp(float ss, float h, float rcp, float eps) {
  return inv_rms_of_mean(rcp != 0.0f ? mul_rn(ss, rcp) : div_rn(ss, h), eps);
}
FN_HD float norm_apply(float x, float inv, float gamma) { return mul_rn(mul_rn(x, inv), gamma); }

// Clamp to [-qclamp, qclamp]; NaN passes through (qclamp = +Inf is the identity).
FN_HD float clamp_sym(float v, float qclamp) {
  return v > qclamp ? qclamp : (v < -qclamp ? -qclamp : v);
}

enum class ScaleType : int { kF32 = 0, kF16 = 1, kBF16 = 2, kE8M0 = 3 };

FN_HD float decode_scale(ScaleType t, uint32_t code) {
  switch (t) {
    case ScaleType::kF16: return decode_f16(code);
    case ScaleType::kBF16: return decode_bf16(code);
    case ScaleType::kE8M0: return decode_e8m0(code);
    default: return decode_f32(code);
  }
}

struct DynamicScale {
  uint32_t stored;  // the scale's bits in its dtype (f32, f16, bf16 or e8m0)
  float r;          // the multiplier applied before encoding
};

// Dynamic scale of a row or group from amax_bits = max over the unit of (bits(y) & 0x7FFFFFFF)
// (an exact, order-free integer max; NaN and Inf sort above every finite value).
FN_HD DynamicScale dynamic_scale(uint32_t amax_bits, float qmax, float scale_ub, float min_scale,
                                 ScaleType t) {
  DynamicScale out;
  if (amax_bits >= kF32InfBits) {  // NaN or Inf in the unit: NaN scale, codes of y * 0
    out.stored = t == ScaleType::kF16 ? 0x7E00u
                 : t == ScaleType::kBF16 ? 0x7FC0u
                 : t == ScaleType::kE8M0 ? kE8m0Nan
                                         : kF32CanonicalNaN;
    out.r = 0.0f;
    return out;
  }
  float a = float_of(amax_bits);
  a = a < scale_ub ? a : scale_ub;
  float s = div_rn(a, qmax);
  s = s > min_scale ? s : min_scale;
  float sd = s;  // the scale as stored, decoded: s itself for f32 (tested first, the common case)
  if (t == ScaleType::kF32) {
    out.stored = bits_of(s);
  } else {
    switch (t) {
      case ScaleType::kF16: out.stored = encode_f16<false>(s); break;
      case ScaleType::kBF16: out.stored = encode_bf16<false>(s); break;
      default: out.stored = encode_e8m0_up(s); break;
    }
    sd = decode_scale(t, out.stored);
  }
  const float r = sd == 0.0f ? 0.0f : div_rn(1.0f, sd);
  out.r = (bits_of(r) & kF32AbsMask) >= kF32InfBits ? 0.0f : r;
  return out;
}

// ---------------------------------------------------------------- FP4 block scales (§3.2)
// y of a block of kNvfp4Block (kMxfp4Block) elements is encoded as q_i = enc_f4e2m1(y_i × r)
// with the block's scale code and multiplier r from these functions; amax_bits is the block's
// max of bits(y) & 0x7FFFFFFF (as for dynamic_scale). A block holding a NaN or Inf (amax_bits >=
// Inf's bits) gets the format's NaN scale and r = 0, so its codes are enc(y × 0) (the edge
// policy of rmsnorm_quant: never a finite scale for a non-finite block).
constexpr int64_t kNvfp4Block = 16;
constexpr int64_t kMxfp4Block = 32;

struct BlockScale {
  uint32_t code;  // f8e4m3fn (NVFP4) or e8m0 (MXFP4) code
  float r;        // the multiplier applied before encoding
};

// NVFP4's multiplier of a scale code: r = (sf == ±0) ? 0 : gs / dec(sf) (a function of the code
// and gs alone, so a kernel may tabulate it for all 256 codes once).
FN_HD float nvfp4_multiplier(uint32_t code, float gs) {
  return (code & f8e4m3fn::kMagMask) == 0 ? 0.0f : div_rn(gs, f8e4m3fn::decode(code));
}

// NVFP4: sf = enc_f8e4m3fn((gs × a) / 6); r = nvfp4_multiplier(sf, gs).
FN_HD BlockScale nvfp4_block_scale(uint32_t amax_bits, float gs) {
  BlockScale s;
  if (amax_bits >= kF32InfBits) {
    s.code = f8e4m3fn::kNan;
    s.r = 0.0f;
    return s;
  }
  s.code = f8e4m3fn::encode<false>(div_rn(mul_rn(gs, float_of(amax_bits)), 6.0f));
  s.r = nvfp4_multiplier(s.code, gs);
  return s;
}

// MXFP4: sf = enc_e8m0_up(a / 6); r = (sf == 0 and a == 0) ? 0 : 1 / dec(sf), an exact power of
// two (2^127 down to 2^-127).
FN_HD BlockScale mxfp4_block_scale(uint32_t amax_bits) {
  BlockScale s;
  if (amax_bits >= kF32InfBits) {
    s.code = kE8m0Nan;
    s.r = 0.0f;
    return s;
  }
  s.code = encode_e8m0_up(div_rn(float_of(amax_bits), 6.0f));
  s.r = (s.code == 0 && amax_bits == 0) ? 0.0f : div_rn(1.0f, decode_e8m0(s.code));
  return s;
}

// A quotient z / 6 for the FP4 block scales, without a division: q0 = rn(z × rn(1/6)), its exact
// remainder z − 6·q0 by one FMA, and q = rn(q0 + remainder × rn(1/6)) by another; where q0 is
// ±Inf, NaN or ±0 it is the result (so -0 stays -0: the correction would add +0 to it). q equals rn(z / 6) for every |z| >= 2^-125 (where the remainder is exact
// and the correction lands on the correctly rounded quotient) and for Inf and NaN; below, q and
// rn(z / 6) both lie far under the smallest nonzero e4m3 and e8m0 values and get the same codes.
// Proven for what the scales use: enc_f8e4m3fn(div6_for_scale(z)) == enc_f8e4m3fn(rn(z / 6))
// for all 2^32 z (NVFP4), and mxfp4_block_scale_finite equal to mxfp4_block_scale for every
// finite amax (tests/cpu/encoders_exhaustive_test.cc).
constexpr uint32_t kRcp6Bits = 0x3E2AAAABu;  // rn(1/6)
FN_HD float div6_for_scale(float z) {
  const float r6 = float_of(kRcp6Bits);
  const float q0 = mul_rn(z, r6);
  const float q = fma_rn(fma_rn(-q0, 6.0f, z), r6, q0);
  return (bits_of(q0) & kF32AbsMask) - 1u >= kF32InfBits - 1u ? q0 : q;  // q0 = ±0, ±Inf or NaN: q0
}

// mxfp4_block_scale for a finite amax (amax_bits < Inf's bits), with no general case of the
// encoder or the decoder, and a / 6 by div6_for_scale: v = rn(a / 6) (or, for a < 2^-125, a value
// with the same code) is non-negative and below 2^126 (a <= FLT_MAX), so
// enc_e8m0_up(v) is 0 for v <= 2^-127 and else the exponent field of v rounded up, (bits(v) +
// 0x7FFFFF) >> 23 (1 for v in (2^-127, 2^-126), at most 253); r = 1 / 2^(code - 127) =
// 2^(127 - code), a normal f32 with exponent field 254 - code (0 when a = 0). Proven equal to
// mxfp4_block_scale for every finite amax (tests/cpu/encoders_exhaustive_test.cc).
FN_HD BlockScale mxfp4_block_scale_finite(uint32_t amax_bits) {
  BlockScale s;
  const uint32_t v = bits_of(div6_for_scale(float_of(amax_bits)));
  s.code = v <= kF32Pow2m127 ? 0u : (v + 0x7FFFFFu) >> 23;
  s.r = amax_bits == 0 ? 0.0f : float_of((254u - s.code) << 23);
  return s;
}

// The 128x4 tiled ("swizzled") scale layout: byte offset of the scale of (row m, block k), with
// kt = ceil(blocks / 4) column tiles; tiles of 128 rows x 4 blocks are 512 bytes, rows inside a
// tile interleaved by 32.
// The offset is a row part plus a block part (kernels add the row part once a row).
FN_HD int64_t fp4_swizzled_row_offset(int64_t m, int64_t kt) {
  return (m >> 7) * kt * 512 + (m & 31) * 16 + ((m >> 5) & 3) * 4;
}
FN_HD int64_t fp4_swizzled_block_offset(int64_t k) { return (k >> 2) * 512 + (k & 3); }
FN_HD int64_t fp4_swizzled_offset(int64_t m, int64_t k, int64_t kt) {
  return fp4_swizzled_row_offset(m, kt) + fp4_swizzled_block_offset(k);
}
// Rows and block columns of the swizzled tensor: padded to 128 and to 4.
FN_HD int64_t fp4_swizzled_rows(int64_t rows) { return (rows + 127) / 128 * 128; }
FN_HD int64_t fp4_swizzled_tiles(int64_t blocks) { return (blocks + 3) / 4; }

}  // namespace math
}  // namespace fusednorm
