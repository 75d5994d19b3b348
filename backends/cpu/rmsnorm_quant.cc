// rmsnorm_quant on the CPU: per row the residual add and canonical sum of squares (rows-inl.h),
// then per unit (row or group) the y pass with |y| max, the scale (shared math), the codes.
// Compiled once per input dtype, so that the dtypes' kernels compile in parallel: CMakeLists.txt
// compiles this file once for each with FUSEDNORM_CPU_IN (f32, f16, bf16) and FUSEDNORM_CPU_IN_T
// (InF32, InF16, InBF16) defined (an object library each). Each compile: once per Highway target
// (foreach_target.h re-includes this file), then once more with HWY_ONCE for the dispatch table
// and the oneTBB driver, cpu_rmsnorm_quant_<FUSEDNORM_CPU_IN> (cpu_backend.h).
#if !defined(FUSEDNORM_CPU_IN) || !defined(FUSEDNORM_CPU_IN_T)
#error "backends/cpu/rmsnorm_quant.cc is compiled by CMakeLists.txt with FUSEDNORM_CPU_IN and FUSEDNORM_CPU_IN_T defined"
#endif

#include <math.h>
#include <string.h>

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/rmsnorm_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "backends/cpu/rows-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fusednorm {
namespace HWY_NAMESPACE {

// Output encoders. EncodeNoNaN<kSaturate>: inputs are never NaN, and with !kSaturate every |v|
// has bits below kNoSatBits (then the saturation step cannot change a code).
template <class F>
struct OutMini {
  static constexpr uint32_t kNoSatBits = MiniNoSatBits<F>();
  static HWY_INLINE VU Encode(VF v) { return EncodeMini<F, false>(v); }
  template <bool kSaturate>
  static HWY_INLINE VU EncodeNoNaN(VF v) { return EncodeMiniNoNaN<F, kSaturate>(v); }
};
struct OutInt8 {
  static constexpr uint32_t kNoSatBits = 0x42FF0000u;  // 127.5
  static HWY_INLINE VU Encode(VF v) { return EncodeInt8(v); }
  template <bool kSaturate>
  static HWY_INLINE VU EncodeNoNaN(VF v) { return EncodeInt8NoNaN<kSaturate>(v); }
};

// clamp_sym(v, qclamp) with lo = -qclamp, hi = qclamp: NaN passes through (compare-and-select);
// kNoNaN (no lane is NaN): min/max, the same values with qclamp > 0 (no tie between signed zeros).
template <bool kNoNaN>
HWY_INLINE VF ClampSym(VF v, VF lo, VF hi) {
  if (kNoNaN) return hn::Min(hn::Max(v, lo), hi);
  return hn::IfThenElse(hn::Gt(v, hi), hi, hn::IfThenElse(hn::Lt(v, lo), lo, v));
}

// Codes of y[begin, end) * rcp, clamped to [-qclamp, qclamp] when kClamp. kNoNaN: no y * rcp is
// NaN (a finite unit with a finite rcp >= 0), so the encoder's NaN branch is left out; with
// kNoNaN and !kSat, also its saturation step (every |y * rcp| is known to stay below the
// encoder's saturation threshold).
template <class OutT, bool kNoNaN, bool kSat, bool kClamp>
HWY_INLINE void EncodeUnit(const float* y, float rcp, float qclamp, char* out, int64_t begin, int64_t end,
                           NextRow next, bool stream) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const VF vr = hn::Set(df, rcp), hi = hn::Set(df, qclamp), lo = hn::Set(df, -qclamp);
  const auto enc = [&](int64_t i) {
    VF v = hn::Mul(hn::LoadU(df, y + i), vr);
    if (kClamp) v = ClampSym<kNoNaN>(v, lo, hi);
    if (kNoNaN) return OutT::template EncodeNoNaN<kSat>(v);
    return OutT::Encode(v);
  };
  int64_t i = begin;
  for (; i + 4 * n <= end; i += 4 * n) {
    next.Step(i, i + 4 * n);
    StoreCodes4x1(enc(i), enc(i + n), enc(i + 2 * n), enc(i + 3 * n), out, i, stream);
  }
  next.Step(i, end);
  for (; i + n <= end; i += n) StoreCodes<1>(enc(i), out, i, stream);
  if (i < end) {
    HWY_ALIGN char buf[kMaxLaneBytes];
    StoreCodes<1>(enc(i), buf, 0);
    memcpy(out + i, buf, size_t(end - i));
  }
}

// Whether a unit's y * rcp are never NaN: finite y (amax, the max of bits(|y|) over the unit, below
// kF32InfBits) times a finite rcp.
HWY_INLINE bool UnitFinite(uint32_t amax, float rcp) {
  return amax < math::kF32InfBits && (math::bits_of(rcp) & math::kF32AbsMask) < math::kF32InfBits;
}
// For a finite unit: whether every |y * rcp| stays below the encoder's saturation threshold.
// Rounding is monotonic and symmetric, so every |y * rcp| <= |amax * rcp|.
template <class OutT>
HWY_INLINE bool UnitBelowSat(uint32_t amax, float rcp) {
  return math::bits_of(math::mul_rn(math::float_of(amax), math::float_of(math::bits_of(rcp) & math::kF32AbsMask))) <
         OutT::kNoSatBits;
}

// Picks the encoder variant of a unit. amax: max of bits(|y|) over the unit (kF32InfBits and
// above: a NaN or Inf in y).
template <class OutT>
HWY_INLINE void EncodeUnitAny(uint32_t amax, bool clamp, const float* y, float rcp, float qclamp, char* out,
                              int64_t begin, int64_t end, NextRow next, bool stream) {
  if (UnitFinite(amax, rcp)) {
    // No y * rcp is NaN; a clamp bounds them by qclamp <= qmax_T (validation).
    if (clamp) {
      EncodeUnit<OutT, true, false, true>(y, rcp, qclamp, out, begin, end, next, stream);
    } else if (UnitBelowSat<OutT>(amax, rcp)) {
      EncodeUnit<OutT, true, false, false>(y, rcp, qclamp, out, begin, end, next, stream);
    } else {
      EncodeUnit<OutT, true, true, false>(y, rcp, qclamp, out, begin, end, next, stream);
    }
  } else {
    if (clamp) EncodeUnit<OutT, false, true, true>(y, rcp, qclamp, out, begin, end, next, stream);
    else EncodeUnit<OutT, false, true, false>(y, rcp, qclamp, out, begin, end, next, stream);
  }
}

// The codes of a row of h elements (a multiple of Lanes) from enc(i), the codes of the vector at
// element i: four vectors to a store, asking for the next row as it goes (NextRow::Step).
template <class Enc>
HWY_INLINE void StoreRowCodes(const Enc& enc, char* out, int64_t h, NextRow next, bool stream) {
  const int64_t n = int64_t(hn::Lanes(DF()));
  int64_t i = 0;
  for (; i + 4 * n <= h; i += 4 * n) {
    next.Step(i, i + 4 * n);
    StoreCodes4x1(enc(i), enc(i + n), enc(i + 2 * n), enc(i + 3 * n), out, i, stream);
  }
  next.Step(i, h);
  for (; i < h; i += n) StoreCodes<1>(enc(i), out, i, stream);
}

// The encode pass of a row of groups of at least a vector (group = 2^shift >= Lanes), every group
// known finite with a finite multiplier and below the encoder's saturation threshold (the
// conditions under which EncodeUnitAny takes EncodeUnit<OutT, true, false, false>, which computes
// the same codes): one loop over the row, each vector's multiplier that of its group, four
// vectors to a store (instead of a loop, its set-up and its tail a group).
template <class OutT>
HWY_NOINLINE void EncodeGroupsNoSat(const float* y, const float* rcp, int shift, char* out, int64_t h, NextRow next,
                                    bool stream) {
  const DF df;
  const auto enc = [&](int64_t i) FN_LAMBDA_INLINE {
    return OutT::template EncodeNoNaN<false>(hn::Mul(hn::LoadU(df, y + i), hn::Set(df, rcp[i >> shift])));
  };
  StoreRowCodes(enc, out, h, next, stream);
}

// EncodeGroupsNoSat's codes from x instead of the y buffer: y = (x * inv) * g computed again, the
// same operations in the same order as the y pass, so the same codes.
template <class InT, class OutT>
HWY_NOINLINE void EncodeGroupsNoSatFromX(const char* x, const float* g, VF inv, const float* rcp, int shift, char* out,
                                         int64_t h, NextRow next, bool stream) {
  const DF df;
  const auto enc = [&](int64_t i) FN_LAMBDA_INLINE {
    const VF y = hn::Mul(hn::Mul(InT::Load(x, i), inv), hn::LoadU(df, g + i));
    return OutT::template EncodeNoNaN<false>(hn::Mul(y, hn::Set(df, rcp[i >> shift])));
  };
  StoreRowCodes(enc, out, h, next, stream);
}

// The encode pass of a row in units (see YAbsMaxUnits), unit k with multiplier rcp[k]; stream:
// the codes with streaming stores (stream_outputs).
template <class OutT>
HWY_NOINLINE void EncodeUnits(const float* y, const float* rcp, const uint32_t* amax, bool clamp, float qclamp,
                              char* out, int64_t h, int64_t unit, NextRow next, bool stream) {
  for (int64_t b = 0, k = 0; b < h; b += unit, ++k)
    EncodeUnitAny<OutT>(amax[k], clamp, y, rcp[k], qclamp, out, b, b + unit, next, stream);
}

// A row's codes in one pass: those of ((x * inv) * g) * rcp straight from x, clamped to
// [-qclamp, qclamp] when `clamp` (a branch a vector, the same for the whole row: one
// instantiation fewer per format and input). The same products in the same order as the y pass
// and the encode pass. A static scale needs neither the y buffer nor the row's amax; a per-row
// scale takes it after RowAbsMax. kNoNaN: no product is NaN (static: x, inv, g and rcp are finite
// and rcp > 0, and one that overflows to +-Inf saturates as any large value does; per-row:
// UnitFinite); !kSat (with kNoNaN): every |product| below the encoder's saturation threshold, or
// clamped (EncodeUnitAny's conditions; the same codes as with the saturation step).
template <class InT, class OutT, bool kNoNaN, bool kSat = true>
HWY_NOINLINE void StaticRow(const char* x, const float* g, VF inv, float rcp_s, bool clamp, float qclamp, char* out,
                            int64_t h, NextRow next, bool stream) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const VF rcp = hn::Set(df, rcp_s), hi = hn::Set(df, qclamp), lo = hn::Set(df, -qclamp);
  const auto enc = [&](VF xv, int64_t i) {
    VF v = hn::Mul(hn::Mul(hn::Mul(xv, inv), hn::LoadU(df, g + i)), rcp);
    if (clamp) v = ClampSym<kNoNaN>(v, lo, hi);
    if (kNoNaN) return OutT::template EncodeNoNaN<kSat>(v);
    return OutT::Encode(v);
  };
  int64_t i = 0;
  for (; i + 4 * n <= h; i += 4 * n) {
    next.Step(i, i + 4 * n);
    StoreCodes4x1(enc(InT::Load(x, i), i), enc(InT::Load(x, i + n), i + n), enc(InT::Load(x, i + 2 * n), i + 2 * n),
                  enc(InT::Load(x, i + 3 * n), i + 3 * n), out, i, stream);
  }
  next.Step(i, h);
  for (; i + n <= h; i += n) StoreCodes<1>(enc(InT::Load(x, i), i), out, i, stream);
  if (i < h) {
    HWY_ALIGN char buf[kMaxLaneBytes];
    StoreCodes<1>(enc(InT::LoadUpTo(x, i, h), i), buf, 0);
    memcpy(out + i, buf, size_t(h - i));
  }
}

// dynamic_scale (shared math) of units [0, full) of a row with f32 scales, Lanes units at a time
// (full: a multiple of Lanes): the same operations in the same order, lane-wise, each one exact
// IEEE arithmetic or a select, so the same bits. Scale bits into stored[k], multipliers into
// rcp[k]; returns whether every one of those units is finite with a finite multiplier and below
// the encoder's saturation threshold (UnitFinite and UnitBelowSat of each).
template <class OutT>
HWY_NOINLINE bool DynamicScalesF32(const uint32_t* amax, int64_t full, float qmax, float scale_ub, float min_scale,
                                   uint32_t* stored, float* rcp) {
  const DF df;
  const DU du;
  const int64_t n = int64_t(hn::Lanes(df));
  const VF ub = hn::Set(df, scale_ub), lo = hn::Set(df, min_scale), q = hn::Set(df, qmax), zero = hn::Zero(df);
  auto ok = hn::FirstN(df, size_t(n));
  for (int64_t k = 0; k < full; k += n) {
    const VU am = hn::LoadU(du, amax + k);
    const auto bad = hn::RebindMask(df, GeS(am, math::kF32InfBits));  // NaN or Inf in the unit
    VF a = hn::BitCast(df, am);
    a = hn::IfThenElse(hn::Lt(a, ub), a, ub);
    VF sc = hn::Div(a, q);
    sc = hn::IfThenElse(hn::Gt(sc, lo), sc, lo);
    VF r = hn::IfThenZeroElse(hn::Eq(sc, zero), hn::Div(hn::Set(df, 1.0f), sc));
    r = hn::IfThenZeroElse(hn::RebindMask(df, GeS(hn::And(hn::BitCast(du, r), SetU(math::kF32AbsMask)),
                                                  math::kF32InfBits)), r);
    r = hn::IfThenZeroElse(bad, r);
    hn::StoreU(hn::IfThenElse(hn::RebindMask(du, bad), SetU(math::kF32CanonicalNaN), hn::BitCast(du, sc)), du,
               stored + k);
    hn::StoreU(r, df, rcp + k);
    // UnitBelowSat: every |y × r| <= amax × |r| (r is finite here, 0 where the unit is not).
    const VU prod = hn::BitCast(du, hn::Mul(hn::BitCast(df, am), hn::Abs(r)));
    ok = hn::And(ok, hn::AndNot(bad, hn::RebindMask(df, LtS(prod, OutT::kNoSatBits))));
  }
  return hn::AllTrue(df, ok);
}

HWY_INLINE void StoreScale(const RmsnormQuantCall& c, char* scale_row, int64_t group, uint32_t stored) {
  if (c.packed) {
    memcpy(scale_row + c.h, &stored, 4);  // little-endian hosts only
    return;
  }
  static constexpr DType kScaleDType[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kE8M0};
  store_code(kScaleDType[int(c.scale_type)], scale_row + group * c.scale_col_stride, 0, stored);
}

// The f32 scales stored[0, count) of a row's groups (DynamicScalesF32's bits): contiguous ones in
// one copy. Group scales are never packed (validation).
HWY_INLINE void StoreGroupScalesF32(const RmsnormQuantCall& c, char* scale_row, const uint32_t* stored, int64_t count) {
  if (c.scale_col_stride == 4) {
    memcpy(scale_row, stored, size_t(count) * 4);
  } else {
    for (int64_t k = 0; k < count; ++k) StoreScale(c, scale_row, k, stored[k]);
  }
}

// g: gamma' (GammaPrime), padded with zeros to a whole vector; g_finite: whether every gamma' is
// finite (found for static scales only); stream: the codes with streaming stores (stream_outputs).
template <class InT, class OutT>
void RmsnormQuantRowsT(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end, const float* g, bool g_finite,
                       bool stream) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const int64_t h = c.h;
  const int64_t h_pad = (h + n - 1) / n * n;
  float* part = Scratch(1, size_t(math::reduction_partials(h)));
  float* y = Scratch(2, size_t(h_pad));
  // The unit of a dynamic scale: the row in per-row mode (group == h), else each group.
  const int64_t unit = c.mode == FUSEDNORM_SCALE_STATIC ? h : c.group;
  const int64_t units = h / unit;
  const bool vector_groups = unit < h && unit >= n;  // groups of whole vectors (a power of two >= Lanes)
  const bool clamp = !(c.qclamp == INFINITY);  // clamp_sym with +Inf is the identity
  // Per-row scales from x twice (RowAbsMax, then StaticRow) where x, gamma' and a y buffer of the
  // row would outgrow L1: beyond it the y buffer's traffic to L2 costs more than computing y again
  // (docs/performance.md, "CPU: y again beyond L1"). Not f16 input: its vector decode (a dozen
  // operations) costs more than the buffer, and with F16C's conversion (simd_math-inl.h) the
  // second pass from x measured no faster (residual rows 7% slower at H 8192).
  const bool beyond_l1 = InT::kDType != DType::kF16 && h * (InT::kBytes + 8) > l1_data_bytes();
  const bool per_row_from_x = unit == h && beyond_l1;
  // Groups likewise, for f32 input (bf16's groups measured no faster) in the common case (f32
  // scales, no clamp): their maxima, their scales, the codes from x again; a row with a group that
  // is not finite or saturates takes the y buffer's passes after all (its y pass run again).
  const bool groups_from_x = vector_groups && beyond_l1 && InT::kDType == DType::kF32 &&
                             c.scale_type == math::ScaleType::kF32 && units >= n && units % n == 0 && !clamp;
  // Per unit of a row: the max of bits(|y|) and the multiplier.
  uint32_t* amax = reinterpret_cast<uint32_t*>(Scratch(3, size_t((units + n - 1) / n * n)));  // YBlockMax: whole vectors
  float* rcp = Scratch(4, size_t(units));
  uint32_t* stored = reinterpret_cast<uint32_t*>(Scratch(5, size_t(units)));  // DynamicScalesF32's
  const float h_f = math::length_f32(h);
  const float static_rcp = c.mode == FUSEDNORM_SCALE_STATIC ? 1.0f / static_scale_value(c) : 0.0f;
  // Static scale: normalized rows whose inv is finite have finite x (a NaN or Inf in x makes the
  // sum of squares, then inv, NaN); with finite weights and a finite rcp > 0 no product is NaN.
  const uint32_t rcp_bits = math::bits_of(static_rcp);
  const bool static_no_nan = c.mode == FUSEDNORM_SCALE_STATIC && c.norm == FUSEDNORM_NORM_RMS && rcp_bits != 0 &&
                             rcp_bits < math::kF32InfBits && g_finite;

  for (int64_t r = row_begin; r < row_end; ++r) {
    char* out = row_ptr(c.lead, c.out, r);
    // The next row is prefetched also past the block: the thread's next block usually starts there.
    NextRow next;
    float inv_s = 1.0f;
    const char* x = StartRow<InT>(c, r, h_f, part, &next, &inv_s);
    const VF inv = hn::Set(df, inv_s);
    if (c.mode == FUSEDNORM_SCALE_STATIC) {
      const bool no_nan = static_no_nan && (math::bits_of(inv_s) & math::kF32AbsMask) < math::kF32InfBits;
      if (no_nan) StaticRow<InT, OutT, true>(x, g, inv, static_rcp, clamp, c.qclamp, out, h, next, stream);
      else StaticRow<InT, OutT, false>(x, g, inv, static_rcp, clamp, c.qclamp, out, h, next, stream);
      continue;
    }
    char* scale_row = c.packed ? out : row_ptr(c.lead, c.scales, r);
    if constexpr (InT::kDType != DType::kF16) {
      if (per_row_from_x) {
        // Per-row: the row's maximum, its scale, the codes from x again (no y buffer).
        const uint32_t am = RowAbsMax<InT>(x, g, inv, h);
        const math::DynamicScale s = math::dynamic_scale(am, c.qmax, c.scale_ub, c.min_scale, c.scale_type);
        StoreScale(c, scale_row, 0, s.stored);
        if (!UnitFinite(am, s.r)) {
          StaticRow<InT, OutT, false>(x, g, inv, s.r, clamp, c.qclamp, out, h, next, stream);
        } else if (clamp || UnitBelowSat<OutT>(am, s.r)) {
          StaticRow<InT, OutT, true, false>(x, g, inv, s.r, clamp, c.qclamp, out, h, next, stream);
        } else {
          StaticRow<InT, OutT, true>(x, g, inv, s.r, clamp, c.qclamp, out, h, next, stream);
        }
        continue;
      }
      if (groups_from_x) {
        YBlockMax<InT, false>(x, g, inv, nullptr, h, unit, amax);
        if (DynamicScalesF32<OutT>(amax, units, c.qmax, c.scale_ub, c.min_scale, stored, rcp)) {
          StoreGroupScalesF32(c, scale_row, stored, units);
          EncodeGroupsNoSatFromX<InT, OutT>(x, g, inv, rcp, __builtin_ctzll(uint64_t(unit)), out, h, next, stream);
          continue;
        }
      }
    }
    // Otherwise the y pass of all units (the row, or its groups) into the y buffer, then their
    // scales (independent divisions, which pipeline), then the codes.
    // Groups of at least a vector: Lanes groups' maxima reduced together (YBlockMax's tree), not
    // a horizontal max a group.
    if (vector_groups) YBlockMax<InT>(x, g, inv, y, h, unit, amax);
    else YAbsMaxUnits<InT>(x, g, inv, y, h, unit, amax);
    bool no_sat = !clamp;  // every unit under EncodeUnitAny's EncodeUnit<OutT, true, false, false>
    int64_t k0 = 0;
    if (vector_groups && c.scale_type == math::ScaleType::kF32 && units >= n) {
      // Groups of whole vectors: amax was written as whole vectors (YBlockMax).
      k0 = units / n * n;
      no_sat = DynamicScalesF32<OutT>(amax, k0, c.qmax, c.scale_ub, c.min_scale, stored, rcp) && no_sat;
      StoreGroupScalesF32(c, scale_row, stored, k0);
    }
    for (int64_t k = k0; k < units; ++k) {
      const math::DynamicScale s = math::dynamic_scale(amax[k], c.qmax, c.scale_ub, c.min_scale, c.scale_type);
      StoreScale(c, scale_row, k, s.stored);
      rcp[k] = s.r;
      no_sat = no_sat && UnitFinite(amax[k], s.r) && UnitBelowSat<OutT>(amax[k], s.r);
    }
    if (vector_groups && no_sat) EncodeGroupsNoSat<OutT>(y, rcp, __builtin_ctzll(uint64_t(unit)), out, h, next, stream);
    else EncodeUnits<OutT>(y, rcp, amax, clamp, c.qclamp, out, h, unit, next, stream);
  }
}

template <class InT>
void RmsnormQuantRowsIn(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end, const float* g,
                        bool g_finite, bool stream) {
  switch (c.out_type) {
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return RmsnormQuantRowsT<InT, OutMini<math::name>>(c, row_begin, row_end, g, g_finite, stream);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kI8: return RmsnormQuantRowsT<InT, OutInt8>(c, row_begin, row_end, g, g_finite, stream);
    default: return;  // validation admits no other output
  }
}

// This unit's input dtype (static: each unit has its own).
static void RmsnormQuantRows(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end, uint64_t call_id,
                             bool stream) {
  bool g_finite = false;
  const float* g = CallGamma(c.w_type, c.norm == FUSEDNORM_NORM_RMS ? c.weight : nullptr, c.weight_offset, c.h, call_id,
                             c.mode == FUSEDNORM_SCALE_STATIC ? &g_finite : nullptr);
  RmsnormQuantRowsIn<FUSEDNORM_CPU_IN_T>(c, row_begin, row_end, g, g_finite, stream);
}

}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/parallel.h"

namespace fusednorm {

HWY_EXPORT(RmsnormQuantRows);

// cpu_rmsnorm_quant_f32, _f16 or _bf16.
void HWY_CONCAT(cpu_rmsnorm_quant_, FUSEDNORM_CPU_IN)(const RmsnormQuantCall& call) {
  if (call.h == 0) return;
  const uint64_t call_id = next_call_id();
  // Every output format is one byte an element (packed scales: 4 more a row).
  const bool stream = stream_outputs(call.lead.rows * (call.h + (call.packed ? 4 : 0)));
  parallel_rows(call.lead.rows, block_rows(call.lead.rows, call.h),
                [&](int64_t r0, int64_t r1) { HWY_DYNAMIC_DISPATCH(RmsnormQuantRows)(call, r0, r1, call_id, stream); });
}

}  // namespace fusednorm
#endif  // HWY_ONCE
