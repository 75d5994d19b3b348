// Compiled once per Highway target (included from kernels.cc after foreach_target.h).
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

// ---------------------------------------------------------------- encoders (codes in u32 lanes)
// MiniFloat<...>::encode for every input but NaN, lane-wise (NaN lanes: unspecified codes).
// The operations call it directly where the unit is known to hold no NaN; EncodeMini below adds
// the NaN branch, so the exhaustive test of EncodeMini covers this function for all non-NaN inputs.
//   normal:    ((a + 2^(s-1) - 1 + lsb) >> s) - rebias, computed as (a + 2^(s-1) - 1 - (rebias << s)
//              + lsb) >> s: for a >= 2^emin the sum never borrows, so the two are equal;
//   saturate:  min(code, max_code): the normal code is non-decreasing in a and equals max_code at
//              a = largest finite, so every a above it (Inf included) gives >= max_code, and every
//              a at or below it gives <= max_code (subnormal codes are <= 2^man < max_code).
template <class F>
HWY_INLINE VU EncodeMiniNoNaN(VF v) {
  const DF df;
  const DU du;
  const DI di;
  const VU u = hn::BitCast(du, v);
  const VU a = hn::And(u, SetU(math::kF32AbsMask));
  const VU lsb = hn::And(hn::ShiftRight<F::kShift>(a), SetU(1));
  const VU rnd = hn::Add(hn::Add(a, SetU(((1u << (F::kShift - 1)) - 1u) - (F::kRebias << F::kShift))), lsb);
  const VU normal = hn::ShiftRight<F::kShift>(rnd);
  const VF magic = hn::BitCast(df, SetU(F::kSubMagicBits));
  const VU sub = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, a), magic)), SetU(F::kSubMagicBits));
  VU code = Sel(GeS(a, F::kMinNormalBits), normal, sub);
  code = hn::BitCast(du, hn::Min(hn::BitCast(di, code), hn::Set(di, int32_t(F::kMaxCodeBits))));
  const VU sign_bit = SetU(1u << F::kSignShift);
  if (F::kNegZero) return hn::OrAnd(code, hn::ShiftRight<31 - F::kSignShift>(u), sign_bit);
  const VU sgn = hn::And(hn::ShiftRight<31 - F::kSignShift>(u), sign_bit);
  return hn::Or(code, hn::IfThenZeroElse(hn::Eq(code, SetU(0)), sgn));
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

template <bool kKeepNanSign>
HWY_INLINE VU EncodeF16(VF v) {
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
HWY_INLINE VU EncodeInt8NoNaN(VF v) {
  const DF df;
  const DI di;
  const VF c = hn::Min(hn::Max(v, hn::Set(df, -128.0f)), hn::Set(df, 127.0f));
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
HWY_INLINE VF DecodeF16(VU h) {
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
  static HWY_INLINE VF Load(const char* row, int64_t i) { return DecodeF16(LoadU16AsU32(row, i)); }
};
template <>
struct InputLoader<BF16Tag> {
  static HWY_INLINE VF Load(const char* row, int64_t i) {
    return hn::BitCast(DF(), hn::ShiftLeft<16>(LoadU16AsU32(row, i)));
  }
};

// Store n = Lanes(DF()) codes (u32 lanes) as elements of 4, 2 or 1 bytes.
template <int kBytes>
HWY_INLINE void StoreCodes(VU codes, char* row, int64_t i) {
  const DU du;
  if (kBytes == 4) {
    hn::StoreU(codes, du, reinterpret_cast<uint32_t*>(row) + i);
  } else if (kBytes == 2) {
    const hn::Rebind<uint16_t, DU> d16;
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(DI(), codes)), d16, reinterpret_cast<uint16_t*>(row) + i);
  } else {
    const hn::Rebind<uint8_t, DU> d8;
    hn::StoreU(hn::DemoteTo(d8, hn::BitCast(DI(), codes)), d8, reinterpret_cast<uint8_t*>(row) + i);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#endif  // FUSEDNORM_CPU_SIMD_MATH_INL_H_
