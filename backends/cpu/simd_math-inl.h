// Compiled once per Highway target (included after foreach_target.h by each operation's unit).
// Vector forms of the shared math in src/math/quant_math.h: the same bit algorithms, lane by
// lane, so that every target produces exactly the scalar functions' codes. The exhaustive tests
// (tests/cpu/encoders_exhaustive_test.cc) prove that over all 2^32 f32 inputs on every target.

#if defined(FUSEDNORM_CPU_SIMD_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FUSEDNORM_CPU_SIMD_MATH_INL_H_
#undef FUSEDNORM_CPU_SIMD_MATH_INL_H_
#else
#define FUSEDNORM_CPU_SIMD_MATH_INL_H_
#endif

#include "hwy/highway.h"
#include "math/quant_math.h"

HWY_BEFORE_NAMESPACE();
namespace fusednorm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;
using VI = hn::Vec<DI>;

// Unsigned lanes do the arithmetic (wrap-around is defined); signed views do the compares,
// always on values in [0, 2^31) where signed and unsigned order agree.
HWY_INLINE hn::Mask<DI> GtS(VU a, uint32_t b) {
  const DI di;
  return hn::Gt(hn::BitCast(di, a), hn::Set(di, int32_t(b)));
}
HWY_INLINE hn::Mask<DI> GeS(VU a, uint32_t b) { return GtS(a, b - 1); }
HWY_INLINE hn::Mask<DI> LtS(VU a, uint32_t b) {
  const DI di;
  return hn::Lt(hn::BitCast(di, a), hn::Set(di, int32_t(b)));
}
HWY_INLINE VU Sel(hn::Mask<DI> m, VU yes, VU no) {
  const DU du;
  const DI di;
  return hn::BitCast(du, hn::IfThenElse(m, hn::BitCast(di, yes), hn::BitCast(di, no)));
}
HWY_INLINE VU SetU(uint32_t v) { return hn::Set(DU(), v); }
// Bit by bit: mask ? yes : no (one vpternlog on AVX3; IfVecThenElse elsewhere wants lane masks).
HWY_INLINE VU BitSelect(VU mask, VU yes, VU no) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  return hn::IfVecThenElse(mask, yes, no);
#else
  return hn::Or(hn::And(mask, yes), hn::AndNot(mask, no));
#endif
}

// ---------------------------------------------------------------- encoders (codes in u32 lanes)
// MiniFloat<...>::encode for every input but NaN, lane-wise (NaN lanes: unspecified codes), in
// float arithmetic and without compares. The operations call it directly where the unit is known
// to hold no NaN; EncodeMini below adds the NaN branch, so the exhaustive test of EncodeMini
// (tests/cpu/encoders_exhaustive_test.cc, every target) covers it for all non-NaN inputs.
//   c = min(|v|, max finite) (saturation, Inf included; the format's grid rounds every value
//   between the largest finite and the saturation threshold MiniNoSatBits to it, so !kSaturate,
//   for callers that know every |v| is below the threshold, leaves the min out and changes no
//   code); d = max(c, 2^emin), whose binade b = E - 127 >= emin has the format's quantum
//   2^(b - m) (m mantissa bits; below 2^emin the subnormal quantum 2^(emin - m) is the same).
//   M = 2^(b + 23 - m) has that quantum as its f32 ulp, so rn(c + M') with M' = M + j ulps (j
//   even: the same grid, the same parity) is M + (j + k) ulps, k = rn(c / quantum), and the code
//   is k + 2^m (b - emin). Its low W bits (W = kSignShift, the magnitude's) are those of
//   bits(c + M') + (bits(M') >> (23 - m)) = j + k + 2^m (E + 23 - m) (mod 2^W; bits(M) is a
//   multiple of 2^W), which is the code for j = -2^m (23 - m + 127 + emin) mod 2^W
//   (MiniMagicOffset). The sign goes above it by one bit select (formats without a negative
//   zero: only on a nonzero code).
template <class F>
constexpr uint32_t MiniMagicOffset() {
  constexpr int64_t kW = int64_t(1) << F::kSignShift;
  constexpr int64_t kJ = -(int64_t(1) << F::kMan) * (23 - F::kMan + 127 + F::kEmin);
  return uint32_t(((kJ % kW) + kW) % kW);
}
template <class F>
constexpr uint32_t MiniNoSatBits() {
  // The midpoint between the largest finite and the next value of the format's grid (a tie there
  // rounds to the largest finite, whose mantissa is even in every format of formats.inc; the
  // threshold excludes it anyway).
  return F::kMaxBits + (1u << (F::kShift - 1));
}

template <class F, bool kSaturate = true>
HWY_INLINE VU EncodeMiniNoNaN(VF v) {
  const DF df;
  const DU du;
  const VU u = hn::BitCast(du, v);
  VF c = hn::BitCast(df, hn::And(u, SetU(math::kF32AbsMask)));
  if (kSaturate) c = hn::Min(c, hn::BitCast(df, SetU(F::kMaxBits)));
  const VU e = hn::And(hn::BitCast(du, hn::Max(c, hn::BitCast(df, SetU(F::kMinNormalBits)))), SetU(math::kF32InfBits));
  const VU m = hn::Add(e, SetU((uint32_t(F::kShift) << 23) + MiniMagicOffset<F>()));
  const VU code = hn::Add(hn::BitCast(du, hn::Add(c, hn::BitCast(df, m))), hn::ShiftRight<F::kShift>(m));
  const VU low = SetU(F::kMagMask);
  const VU sign = hn::ShiftRight<31 - F::kSignShift>(u);  // bit kSignShift: the sign; above: 0
  if (F::kNegZero) return BitSelect(low, code, sign);
  const VU mag = hn::And(code, low);
  return hn::Or(mag, hn::IfThenZeroElse(hn::Eq(mag, SetU(0)), hn::AndNot(low, sign)));
}

// MiniFloat<...>::encode, lane-wise.
template <class F, bool kKeepNanSign>
HWY_INLINE VU EncodeMini(VF v) {
  const DU du;
  const VU u = hn::BitCast(du, v);
  const VU a = hn::And(u, SetU(math::kF32AbsMask));
  const VU nan = (F::kNanHasSign && kKeepNanSign)
                     ? hn::Or(SetU(F::kNan), hn::ShiftLeft<F::kSignShift>(hn::ShiftRight<31>(u)))
                     : SetU(F::kNan);
  return Sel(GtS(a, math::kF32InfBits), nan, EncodeMiniNoNaN<F>(v));
}

// The f16 conversions below are a dozen vector operations each (x86 with F16C takes the hardware
// conversions instead: FN_F16C below). On the emulated target (EMU128,
// the fallback of CPUs without SSSE3: every operation a loop over 4 lanes) they are compiled out of
// line, once, instead of inlined into every unrolled load and store of the row loops: inlined,
// clang's ASan + UBSan build of the f16 rmsnorm_quant unit spent 163 of its 190 s of function
// optimization on that target's functions (-ftime-trace; docs/testing.md). The SIMD targets keep
// them inline.
#undef FN_F16_CONVERT
#if HWY_TARGET == HWY_EMU128
#define FN_F16_CONVERT inline HWY_NOINLINE
#else
#define FN_F16_CONVERT HWY_INLINE
#endif

// x86 with F16C (Highway's AVX2 and AVX3 targets): f16 codes to f32 by the hardware conversion,
// exact for every code but a signaling NaN, which it quiets (sets bit 22); decode_f16 keeps the
// code's quiet bit (bit 9) in bit 22, so NaN lanes take bit 22 from the code shifted left by 13.
// Proven equal to decode_f16 for all 65536 codes on every target (tests/unit/math_test.cc,
// "decoders"). Three to five operations where DecodeF16 takes about a dozen.
#undef FN_F16C
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define FN_F16C 1
#if HWY_TARGET <= HWY_AVX3
HWY_INLINE VF DecodeF16Packed(__m256i h) {
  // (The zero-masking forms with every lane set: the plain ones start from GCC's undefined
  // vector, which its -Wmaybe-uninitialized reports.)
  const __m512 v = _mm512_maskz_cvtph_ps(0xFFFF, h);
  const __m512i q = _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 13);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  // bit select: bit 22 from q, the others from v (0xD8: c ? b : a), in the NaN lanes only
  return VF{_mm512_castsi512_ps(
      _mm512_mask_ternarylogic_epi32(_mm512_castps_si512(v), nan, q, _mm512_set1_epi32(0x400000), 0xD8))};
}
#else
HWY_INLINE VF DecodeF16Packed(__m128i h) {
  const __m256 v = _mm256_cvtph_ps(h);
  const __m256i q = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 13);
  const __m256i m = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)), _mm256_set1_epi32(0x400000));
  const __m256i vi = _mm256_castps_si256(v);
  return VF{_mm256_castsi256_ps(_mm256_xor_si256(vi, _mm256_and_si256(_mm256_xor_si256(vi, q), m)))};
}
#endif
#endif

// rn to f16 of every lane, with every NaN the canonical 0x7E00 (encode_f16<false>), as packed
// 16-bit codes: the hardware conversion (round to nearest even, overflow to Inf, subnormal results
// rounded once: IEEE's rounding, as encode_f16's) with the NaN lanes replaced. Its NaN results
// keep the sign and the top payload bits and are quiet, as encode_f16<true>'s (EncodeF16 below).
// EncodeF16<true> is proven equal to encode_f16<true> for all 2^32 f32 inputs on every target (the
// exhaustive sweep's f16 casts); EncodeF16Packed differs from it only in the NaN lanes (an
// unordered compare: exactly those), which take encode_f16<false>'s 0x7E00. The rounding is the
// conversion's own (imm8), not MXCSR's; like every vector operation here it assumes the default
// floating-point environment (no flush to zero).
#if defined(FN_F16C)
constexpr int kF16Rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
#endif
#if defined(FN_F16C) && HWY_TARGET <= HWY_AVX3
HWY_INLINE __m256i EncodeF16PackedAny(VF v) { return _mm512_maskz_cvtps_ph(0xFFFF, v.raw, kF16Rne); }
HWY_INLINE __m256i EncodeF16Packed(VF v) {
  return _mm256_mask_mov_epi16(EncodeF16PackedAny(v), _mm512_cmp_ps_mask(v.raw, v.raw, _CMP_UNORD_Q),
                               _mm256_set1_epi16(0x7E00));
}
HWY_INLINE VU WidenF16Codes(__m256i h) { return VU{_mm512_maskz_cvtepu16_epi32(0xFFFF, h)}; }
#elif defined(FN_F16C)
HWY_INLINE __m128i EncodeF16PackedAny(VF v) { return _mm256_cvtps_ph(v.raw, kF16Rne); }
HWY_INLINE __m128i EncodeF16Packed(VF v) {
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v.raw, v.raw, _CMP_UNORD_Q));
  const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
  return _mm_blendv_epi8(EncodeF16PackedAny(v), _mm_set1_epi16(0x7E00), nan16);
}
HWY_INLINE VU WidenF16Codes(__m128i h) { return VU{_mm256_cvtepu16_epi32(h)}; }
#endif

template <bool kKeepNanSign>
FN_F16_CONVERT VU EncodeF16(VF v) {
#if defined(FN_F16C)
  return WidenF16Codes(kKeepNanSign ? EncodeF16PackedAny(v) : EncodeF16Packed(v));
#else
  const DF df;
  const DU du;
  const VU u = hn::BitCast(du, v);
  const VU sign = hn::And(hn::ShiftRight<16>(u), SetU(0x8000u));
  const VU a = hn::And(u, SetU(math::kF32AbsMask));
  const VU rnd = hn::Add(hn::Add(a, SetU(0xFFFu)), hn::And(hn::ShiftRight<13>(a), SetU(1)));
  const VU normal = hn::Sub(hn::ShiftRight<13>(rnd), SetU(112u << 10));
  const VU sub = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, a), hn::Set(df, 0.5f))), SetU(0x3F000000u));
  VU code = Sel(GeS(a, 0x38800000u), normal, sub);
  code = Sel(GeS(a, 0x477FF000u), SetU(0x7C00u), code);
  code = hn::Or(code, sign);
  const VU nan = kKeepNanSign ? hn::Or(hn::Or(sign, SetU(0x7E00u)), hn::And(hn::ShiftRight<13>(a), SetU(0x3FFu)))
                              : SetU(0x7E00u);
  return Sel(GtS(a, math::kF32InfBits), nan, code);
#endif
}

// The bf16 code (canonical NaN) of each lane in its high 16 bits; the low 16 bits are not zero.
HWY_INLINE VU EncodeBF16High(VF v) {
  const VU u = hn::BitCast(DU(), v);
  const VU a = hn::And(u, SetU(math::kF32AbsMask));
  const VU rounded = hn::Add(hn::Add(u, SetU(0x7FFFu)), hn::And(hn::ShiftRight<16>(u), SetU(1)));
  return Sel(GtS(a, math::kF32InfBits), SetU(0x7FC00000u), rounded);
}

template <bool kKeepNanSign>
HWY_INLINE VU EncodeBF16(VF v) {
  const VU u = hn::BitCast(DU(), v);
  const VU a = hn::And(u, SetU(math::kF32AbsMask));
  const VU rounded = hn::ShiftRight<16>(hn::Add(hn::Add(u, SetU(0x7FFFu)), hn::And(hn::ShiftRight<16>(u), SetU(1))));
  const VU nan = kKeepNanSign ? hn::Or(hn::ShiftRight<16>(u), SetU(0x40u)) : SetU(0x7FC0u);
  return Sel(GtS(a, math::kF32InfBits), nan, rounded);
}

template <bool kKeepNanSign>
HWY_INLINE VU EncodeF32(VF v) {
  const VU u = hn::BitCast(DU(), v);
  if (kKeepNanSign) return u;
  return Sel(GtS(hn::And(u, SetU(math::kF32AbsMask)), math::kF32InfBits), SetU(math::kF32CanonicalNaN), u);
}

// Two's complement byte in the low 8 bits of each lane; NaN lanes: unspecified codes.
// !kSaturate: the caller knows that every |v| < 127.5, where the clamp changes nothing that rn
// does not already give.
template <bool kSaturate = true>
HWY_INLINE VU EncodeInt8NoNaN(VF v) {
  const DF df;
  const DI di;
  const VF c = kSaturate ? hn::Min(hn::Max(v, hn::Set(df, -128.0f)), hn::Set(df, 127.0f)) : v;
  const VF r = hn::Sub(hn::Add(c, hn::Set(df, math::kRoundMagic)), hn::Set(df, math::kRoundMagic));
  return hn::And(hn::BitCast(DU(), hn::ConvertTo(di, r)), SetU(0xFFu));
}

// Two's complement byte in the low 8 bits of each lane.
HWY_INLINE VU EncodeInt8(VF v) {
  return hn::IfThenZeroElse(hn::RebindMask(DU(), hn::IsNaN(v)), EncodeInt8NoNaN(v));
}

HWY_INLINE VU EncodeE8m0Up(VF v) {
  const DI di;
  const VU u = hn::BitCast(DU(), v);
  const VU a = hn::And(u, SetU(math::kF32AbsMask));
  const VU nonzero_mant = hn::VecFromMask(DU(), hn::Ne(hn::And(u, SetU(0x7FFFFFu)), SetU(0)));
  VU code = hn::Sub(hn::ShiftRight<23>(u), nonzero_mant);  // mask is all-ones: subtracting adds 1
  code = Sel(LtS(a, 0x00800000u), SetU(1), code);
  code = Sel(GtS(a, 0x7F000000u), SetU(math::kE8m0Max), code);
  const auto zero = hn::Or(hn::Lt(hn::BitCast(di, u), hn::Zero(di)), hn::Not(GtS(a, math::kF32Pow2m127)));
  code = Sel(zero, SetU(0), code);
  return Sel(GtS(a, math::kF32InfBits), SetU(math::kE8m0Nan), code);
}

HWY_INLINE VU EncodeE8m0Rn(VF v) {
  const DI di;
  const VU u = hn::BitCast(DU(), v);
  const VU a = hn::And(u, SetU(math::kF32AbsMask));
  const VU up = hn::ShiftRight<22>(hn::And(u, SetU(0x400000u)));  // mantissa >= 0.5
  VU code = hn::Min(hn::Add(hn::ShiftRight<23>(a), up), SetU(math::kE8m0Max));
  code = Sel(LtS(a, 0x00800000u), SetU(1), code);
  const auto zero = hn::Or(hn::Lt(hn::BitCast(di, u), hn::Zero(di)), LtS(a, 0x00600000u));
  code = Sel(zero, SetU(0), code);
  return Sel(GtS(a, math::kF32InfBits), SetU(math::kE8m0Nan), code);
}

// ---------------------------------------------------------------- loads of input dtypes as f32
// n lanes of a row of f32 / f16 / bf16 starting at element i (n = Lanes(DF())).
template <class T>
struct InputLoader;

template <>
struct InputLoader<float> {
  static HWY_INLINE VF Load(const char* row, int64_t i) {
    return hn::LoadU(DF(), reinterpret_cast<const float*>(row) + i);
  }
};

HWY_INLINE VU LoadU16AsU32(const char* row, int64_t i) {
  const hn::Rebind<uint16_t, DU> d16;
  return hn::PromoteTo(DU(), hn::LoadU(d16, reinterpret_cast<const uint16_t*>(row) + i));
}

// decode_f16, lane-wise.
FN_F16_CONVERT VF DecodeF16(VU h) {
  const DF df;
  const VU sign = hn::ShiftLeft<16>(hn::And(h, SetU(0x8000u)));
  const VU e = hn::And(hn::ShiftRight<10>(h), SetU(0x1Fu));
  const VU m = hn::And(h, SetU(0x3FFu));
  const VU normal = hn::Or(hn::ShiftLeft<23>(hn::Add(e, SetU(112u))), hn::ShiftLeft<13>(m));
  const VU special = hn::Or(SetU(math::kF32InfBits), hn::ShiftLeft<13>(m));
  const VU sub = hn::BitCast(DU(), hn::Mul(hn::ConvertTo(df, hn::BitCast(DI(), m)), hn::Set(df, 5.9604644775390625e-8f)));
  VU mag = Sel(hn::RebindMask(DI(), hn::Eq(e, SetU(0))), sub, normal);
  mag = Sel(hn::RebindMask(DI(), hn::Eq(e, SetU(0x1Fu))), special, mag);
  return hn::BitCast(df, hn::Or(mag, sign));
}

struct F16Tag {};
struct BF16Tag {};

template <>
struct InputLoader<F16Tag> {
  static HWY_INLINE VF Load(const char* row, int64_t i) {
#if defined(FN_F16C) && HWY_TARGET <= HWY_AVX3
    return DecodeF16Packed(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
#elif defined(FN_F16C)
    return DecodeF16Packed(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
#else
    return DecodeF16(LoadU16AsU32(row, i));
#endif
  }
};
template <>
struct InputLoader<BF16Tag> {
  static HWY_INLINE VF Load(const char* row, int64_t i) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    // One word permutation puts bf16 j in the upper half of lane j and zeros the lower halves
    // (instead of a widening load and a shift).
    alignas(64) static constexpr uint16_t kIdx[32] = {0, 0, 1, 1, 2,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,
                                                      8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i));
    const __m512i idx = _mm512_load_si512(reinterpret_cast<const void*>(kIdx));
    return VF{_mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, idx, _mm512_castsi256_si512(h)))};
#else
    return hn::BitCast(DF(), hn::ShiftLeft<16>(LoadU16AsU32(row, i)));
#endif
  }
};

// A whole vector v of d at p: with the streaming (non-temporal) hint where `stream`, the vector is
// a whole number of 16-byte pieces (Highway's Stream writes 16 bytes at least) and p is aligned to
// its width; else a plain unaligned store. The same bytes either way; a call that streams ends
// each block of rows with a store fence (parallel_rows).
template <class D, typename T>
HWY_INLINE void StoreHint(hn::VFromD<D> v, D d, T* p, bool stream) {
#if HWY_TARGET != HWY_SCALAR
  constexpr size_t kVecBytes = hn::MaxLanes(D()) * sizeof(T);
  if constexpr (kVecBytes % 16 == 0) {
    if (stream && reinterpret_cast<uintptr_t>(p) % kVecBytes == 0 && hn::Lanes(d) * sizeof(T) == kVecBytes)
      return hn::Stream(v, d, p);
  }
#else
  (void)stream;
#endif
  hn::StoreU(v, d, p);
}

// Store n = Lanes(DF()) codes (u32 lanes) as elements of 4, 2 or 1 bytes (stream: StoreHint's).
template <int kBytes>
HWY_INLINE void StoreCodes(VU codes, char* row, int64_t i, bool stream = false) {
  const DU du;
  if (kBytes == 4) {
    StoreHint(codes, du, reinterpret_cast<uint32_t*>(row) + i, stream);
  } else if (kBytes == 2) {
    const hn::Rebind<uint16_t, DU> d16;
    StoreHint(hn::DemoteTo(d16, hn::BitCast(DI(), codes)), d16, reinterpret_cast<uint16_t*>(row) + i, stream);
  } else {
    const hn::Rebind<uint8_t, DU> d8;
    StoreHint(hn::DemoteTo(d8, hn::BitCast(DI(), codes)), d8, reinterpret_cast<uint8_t*>(row) + i, stream);
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// 4 * Lanes(DF()) one-byte codes (u32 lanes, each in [0, 255]) as bytes in order: the lanes of c0,
// then c1, c2, c3. Two saturating packs (exact on [0, 255]) and one lane permutation instead of a
// demotion per vector.
#if HWY_TARGET <= HWY_AVX3
HWY_INLINE __m512i PackBytes4x1(VU c0, VU c1, VU c2, VU c3) {
  const __m512i ab = _mm512_packs_epi32(c0.raw, c1.raw);  // per 128-bit block k: c0[4k..4k+3], c1[4k..]
  const __m512i cd = _mm512_packs_epi32(c2.raw, c3.raw);
  const __m512i b = _mm512_packus_epi16(ab, cd);          // dword 4k + v: lanes 4k..4k+3 of c_v
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(idx, b);
}
#else
HWY_INLINE __m256i PackBytes4x1(VU c0, VU c1, VU c2, VU c3) {
  const __m256i ab = _mm256_packs_epi32(c0.raw, c1.raw);
  const __m256i cd = _mm256_packs_epi32(c2.raw, c3.raw);
  const __m256i b = _mm256_packus_epi16(ab, cd);
  const __m256i idx = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  return _mm256_permutevar8x32_epi32(b, idx);
}
#endif
#endif

// Store 4 * Lanes(DF()) one-byte codes (u32 lanes, each in [0, 255]) to row[i...]: the lanes of
// c0, then c1, c2, c3 (stream: StoreHint's).
HWY_INLINE void StoreCodes4x1(VU c0, VU c1, VU c2, VU c3, char* row, int64_t i, bool stream = false) {
  uint8_t* p = reinterpret_cast<uint8_t*>(row + i);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  StoreHint(hn::Vec512<uint8_t>{PackBytes4x1(c0, c1, c2, c3)}, hn::Full512<uint8_t>(), p, stream);
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  StoreHint(hn::Vec256<uint8_t>{PackBytes4x1(c0, c1, c2, c3)}, hn::Full256<uint8_t>(), p, stream);
#elif HWY_ARCH_X86 && (HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3)
  const __m128i ab = _mm_packs_epi32(c0.raw, c1.raw);
  const __m128i cd = _mm_packs_epi32(c2.raw, c3.raw);
  StoreHint(hn::Vec128<uint8_t>{_mm_packus_epi16(ab, cd)}, hn::Full128<uint8_t>(), p, stream);
#else
  (void)p;
  const int64_t n = int64_t(hn::Lanes(DU()));
  StoreCodes<1>(c0, row, i, stream);
  StoreCodes<1>(c1, row, i + n, stream);
  StoreCodes<1>(c2, row, i + 2 * n, stream);
  StoreCodes<1>(c3, row, i + 3 * n, stream);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#endif  // FUSEDNORM_CPU_SIMD_MATH_INL_H_
