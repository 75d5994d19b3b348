// Compiled once per Highway target (foreach_target.h re-includes this file), then once more
// with HWY_ONCE for the dispatch tables and the oneTBB drivers.
// The CPU backend's row kernels: one HWY_DYNAMIC_DISPATCH per TBB row block, never inside a row.

#include <math.h>
#include <string.h>

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "backends/cpu/simd_math-inl.h"
#include "core/call.h"
#include "core/elements.h"
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fusednorm {
namespace HWY_NAMESPACE {

constexpr size_t kMaxLaneBytes = HWY_MAX_BYTES;  // widest vector of any target, in bytes

// A thread's scratch floats, grown on demand and kept for the thread's life.
HWY_INLINE float* Scratch(size_t slot, size_t n) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buf[5];
  thread_local size_t cap[5] = {0, 0, 0, 0, 0};
  if (cap[slot] < n) {
    buf[slot] = hwy::AllocateAligned<float>(n);
    cap[slot] = n;
  }
  return buf[slot].get();
}

// ---------------------------------------------------------------- cast

// Vector encode of one chunk to `dst` (u32 codes).
template <bool kKeepNanSign>
HWY_INLINE VU EncodeAny(DType t, VF v, bool e8m0_up) {
  switch (t) {
    case DType::kF32: return EncodeF32<kKeepNanSign>(v);
    case DType::kF16: return EncodeF16<kKeepNanSign>(v);
    case DType::kBF16: return EncodeBF16<kKeepNanSign>(v);
    case DType::kI8: return EncodeInt8(v);
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return EncodeMini<math::name, kKeepNanSign>(v);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kE8M0: return e8m0_up ? EncodeE8m0Up(v) : EncodeE8m0Rn(v);
    default: return SetU(0);
  }
}

void CastRows(const CastCall& c, int64_t row_begin, int64_t row_end) {
  constexpr int64_t kChunk = 256;  // a multiple of every target's lane count
  const DF df;
  const int64_t n_lanes = int64_t(hn::Lanes(df));
  HWY_ALIGN float tmp[kChunk];
  HWY_ALIGN uint32_t codes[kChunk];
  const int dst_bits = dtype_bits(c.dst_type);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const char* src = row_ptr(c.lead, c.src, r);
    char* dst = row_ptr(c.lead, c.dst, r);
    for (int64_t i0 = 0; i0 < c.cols; i0 += kChunk) {
      const int64_t n = std::min(kChunk, c.cols - i0);
      int64_t i = 0;
      if (c.src_type == DType::kF32 || c.src_type == DType::kF16 || c.src_type == DType::kBF16) {
        for (; i + n_lanes <= n; i += n_lanes) {
          const VF v = c.src_type == DType::kF32   ? InputLoader<float>::Load(src, i0 + i)
                       : c.src_type == DType::kF16 ? InputLoader<F16Tag>::Load(src, i0 + i)
                                                   : InputLoader<BF16Tag>::Load(src, i0 + i);
          hn::Store(v, df, tmp + i);
        }
      }
      for (; i < n; ++i) tmp[i] = decode(c.src_type, load_code(c.src_type, src, i0 + i));
      for (; i % n_lanes != 0; ++i) tmp[i] = 0.0f;
      for (int64_t j = 0; j < i; j += n_lanes)
        hn::Store(EncodeAny<true>(c.dst_type, hn::Load(df, tmp + j), c.e8m0_up), DU(), codes + j);
      int64_t j = 0;
      if (dst_bits >= 8 && n == kChunk) {
        for (; j < n; j += n_lanes) {
          const VU v = hn::Load(DU(), codes + j);
          if (dst_bits == 32) StoreCodes<4>(v, dst, i0 + j);
          else if (dst_bits == 16) StoreCodes<2>(v, dst, i0 + j);
          else StoreCodes<1>(v, dst, i0 + j);
        }
      }
      if (dst_bits == 4) {
        for (; j < n; j += 2) dst[(i0 + j) / 2] = char(codes[j] | (codes[j + 1] << 4));
      }
      for (; j < n; ++j) store_code(c.dst_type, dst, i0 + j, codes[j]);
    }
  }
}

// ---------------------------------------------------------------- rmsnorm_quant

// The input dtype: vector load as f32, and the residual sum's store-and-round.
template <class Tag, DType kType>
struct In {
  static constexpr DType kDType = kType;
  static constexpr int kBytes = kType == DType::kF32 ? 4 : 2;
  static HWY_INLINE VF Load(const char* row, int64_t i) { return InputLoader<Tag>::Load(row, i); }
  // Loads lanes [i, end) and zeros beyond (end - i < Lanes).
  static HWY_INLINE VF LoadUpTo(const char* row, int64_t i, int64_t end) {
    const int64_t n = int64_t(hn::Lanes(DF()));
    if (i + n <= end) return Load(row, i);
    HWY_ALIGN char buf[kMaxLaneBytes] = {};
    memcpy(buf, row + i * kBytes, size_t((end - i) * kBytes));
    return Load(buf, 0);
  }
  // Rounds v to the dtype, stores the codes, returns the rounded value as f32.
  static HWY_INLINE VF RoundStore(VF v, char* row, int64_t i, int64_t end) {
    const int64_t n = int64_t(hn::Lanes(DF()));
    VU code;
    if (kType == DType::kF32) code = EncodeF32<false>(v);
    else if (kType == DType::kF16) code = EncodeF16<false>(v);
    else code = EncodeBF16<false>(v);
    if (i + n <= end) {
      StoreCodes<kBytes>(code, row, i);
    } else {
      HWY_ALIGN char buf[kMaxLaneBytes];
      StoreCodes<kBytes>(code, buf, 0);
      memcpy(row + i * kBytes, buf, size_t((end - i) * kBytes));
    }
    if (kType == DType::kF32) return hn::BitCast(DF(), code);
    if (kType == DType::kF16) return DecodeF16(code);
    return hn::BitCast(DF(), hn::ShiftLeft<16>(code));
  }
};
using InF32 = In<float, DType::kF32>;
using InF16 = In<F16Tag, DType::kF16>;
using InBF16 = In<BF16Tag, DType::kBF16>;

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

// One level of the pairwise tree on 2 * Lanes consecutive partials: lane j of the result is
// lo[2j] + lo[2j+1] (j < Lanes/2), then hi's pairs (docs/numerics.md §2).
HWY_INLINE VF PairSums(VF lo, VF hi) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Add(lo, hi);
#else
  const DF df;
  return hn::Add(hn::ConcatEven(df, hi, lo), hn::ConcatOdd(df, hi, lo));
#endif
}

// Element i.. of x: the input, or with a residual the rounded sum in + res, written to res.
template <class InT, bool kRes>
HWY_INLINE VF LoadX(const char* in, char* res, int64_t i) {
  if (!kRes) return InT::Load(in, i);
  const int64_t n = int64_t(hn::Lanes(DF()));
  return InT::RoundStore(hn::Add(InT::Load(in, i), InT::Load(res, i)), res, i, i + n);
}
template <class InT, bool kRes>
HWY_NOINLINE VF LoadXUpTo(const char* in, char* res, int64_t i, int64_t end) {
  if (!kRes) return InT::LoadUpTo(in, i, end);
  return InT::RoundStore(hn::Add(InT::LoadUpTo(in, i, end), InT::LoadUpTo(res, i, end)), res, i, end);
}

// The residual update alone (quant-only rows).
template <class InT>
HWY_NOINLINE void ResidualRow(const char* in, char* res, int64_t h) {
  const int64_t n = int64_t(hn::Lanes(DF()));
  int64_t i = 0;
  for (; i + n <= h; i += n) (void)LoadX<InT, true>(in, res, i);
  if (i < h) (void)LoadXUpTo<InT, true>(in, res, i, h);
}

// Canonical sum of squares of a row (docs/numerics.md §2), fused with the residual update when
// kRes. The P strided partials live in registers, 8 vectors (8 * Lanes consecutive partials) at
// a time: for each such chunk, every step k adds x[k*P + ...]^2, then the first 3 tree levels run
// in registers (the tree pairs adjacent partials, so an aligned chunk reduces on its own) and
// the chunk's Lanes level-3 partials go to `part`; the remaining levels run there.
template <class InT, bool kRes>
HWY_NOINLINE float SumSquares(const char* in, char* res, int64_t h, float* part) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const int64_t p_count = math::reduction_partials(h);
  if (p_count < n || p_count % n != 0) {
    if (kRes) ResidualRow<InT>(in, res, h);
    const char* x = kRes ? res : in;
    HWY_ALIGN float lane[kMaxLaneBytes / 4];
    return math::sum_squares_canonical(
        [&](int64_t i) {
          hn::Store(InT::LoadUpTo(x, i, i + 1), df, lane);
          return lane[0];
        },
        h, part);
  }
  constexpr int64_t kK = 8;  // vectors of partials per chunk
  int64_t count = p_count;
  if (p_count >= kK * n) {
    for (int64_t c = 0; c < p_count; c += kK * n) {
      // Eight named accumulators (an array indexed in a loop with an early exit ends up on the
      // stack).
      VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
      const auto sq = [&](VF v) { return hn::Mul(v, v); };
      for (int64_t base = c; base < h; base += p_count) {
        if (base + kK * n <= h) {
          a0 = hn::Add(a0, sq(LoadX<InT, kRes>(in, res, base)));
          a1 = hn::Add(a1, sq(LoadX<InT, kRes>(in, res, base + n)));
          a2 = hn::Add(a2, sq(LoadX<InT, kRes>(in, res, base + 2 * n)));
          a3 = hn::Add(a3, sq(LoadX<InT, kRes>(in, res, base + 3 * n)));
          a4 = hn::Add(a4, sq(LoadX<InT, kRes>(in, res, base + 4 * n)));
          a5 = hn::Add(a5, sq(LoadX<InT, kRes>(in, res, base + 5 * n)));
          a6 = hn::Add(a6, sq(LoadX<InT, kRes>(in, res, base + 6 * n)));
          a7 = hn::Add(a7, sq(LoadX<InT, kRes>(in, res, base + 7 * n)));
        } else {  // the last step of a row whose length is not a multiple of P
          const auto part_sq = [&](int64_t k) {
            return base + k * n < h ? sq(LoadXUpTo<InT, kRes>(in, res, base + k * n, h)) : hn::Zero(df);
          };
          // Adding +0 to a partial (>= +0 or NaN) leaves it unchanged.
          a0 = hn::Add(a0, part_sq(0));
          a1 = hn::Add(a1, part_sq(1));
          a2 = hn::Add(a2, part_sq(2));
          a3 = hn::Add(a3, part_sq(3));
          a4 = hn::Add(a4, part_sq(4));
          a5 = hn::Add(a5, part_sq(5));
          a6 = hn::Add(a6, part_sq(6));
          a7 = hn::Add(a7, part_sq(7));
        }
      }
      const VF l1a = PairSums(a0, a1), l1b = PairSums(a2, a3), l1c = PairSums(a4, a5), l1d = PairSums(a6, a7);
      hn::Store(PairSums(PairSums(l1a, l1b), PairSums(l1c, l1d)), df, part + c / kK);
    }
    count = p_count / kK;
  } else {
    for (int64_t p = 0; p < p_count; p += n) hn::Store(hn::Zero(df), df, part + p);
    for (int64_t base = 0; base < h; base += p_count) {
      const int64_t stop = std::min(p_count, h - base);
      for (int64_t j = 0; j < stop; j += n) {
        const VF v = LoadXUpTo<InT, kRes>(in, res, base + j, h);
        hn::Store(hn::Add(hn::Load(df, part + j), hn::Mul(v, v)), df, part + j);
      }
    }
  }
#if HWY_TARGET != HWY_SCALAR
  for (; count >= 2 * n; count /= 2) {
    for (int64_t k = 0; k < count; k += 2 * n)
      hn::Store(PairSums(hn::Load(df, part + k), hn::Load(df, part + k + n)), df, part + k / 2);
  }
#endif
  for (; count > 1; count /= 2)
    for (int64_t j = 0; j < count / 2; ++j) part[j] = part[2 * j] + part[2 * j + 1];
  return part[0];
}

// Lane-wise max of bits(|.|) as integers: exact, and NaN / Inf sort above every finite value
// (VRANGEPS would be one instruction, but it returns the number when the other operand is a
// quiet NaN).
HWY_INLINE VI AbsMaxAcc(VI m, VF y) {
  const DI di;
  return hn::Max(m, hn::And(hn::BitCast(di, y), hn::Set(di, int32_t(math::kF32AbsMask))));
}

// Software prefetch (into L2) of the row(s) that the next row's first pass reads: the y pass
// asks for the first half of their bytes and the encode pass for the second half, each in step
// with its own progress over [0, h), so that the misses spread over the whole row and the first
// pass of the next row finds its data in cache.
struct NextRow {
  const char* p0 = nullptr;  // the next row's input (null: nothing to prefetch)
  const char* p1 = nullptr;  // its residual, or null
  int64_t elem_bytes = 0;    // bytes per element of those rows
  int64_t bytes = 0;         // bytes per row
  HWY_INLINE void Range(int64_t lo, int64_t hi) const {
    if (p0 == nullptr) return;
    for (int64_t b = (lo + 63) & ~int64_t(63); b < hi; b += 64) {
      __builtin_prefetch(p0 + b, 0, 2);
      if (p1 != nullptr) __builtin_prefetch(p1 + b, 0, 2);
    }
  }
  // The pass has reached elements [i, j) of the current row.
  HWY_INLINE void First(int64_t i, int64_t j) const { Range(i * elem_bytes / 2, j * elem_bytes / 2); }
  HWY_INLINE void Second(int64_t i, int64_t j) const {
    Range(bytes / 2 + i * elem_bytes / 2, bytes / 2 + j * elem_bytes / 2);
  }
};

// y over [begin, end) into y[begin...] (lanes past `end` of the last vector: whatever (x * inv) * g
// gives for x = g = 0); returns the max of bits(y) & 0x7FFFFFFF over [begin, end).
template <class InT>
HWY_INLINE uint32_t YAbsMax(const char* x, const float* g, VF inv, float* y, int64_t begin, int64_t end,
                            const NextRow& next) {
  const DF df;
  const DI di;
  const int64_t n = int64_t(hn::Lanes(df));
  VI m0 = hn::Zero(di), m1 = hn::Zero(di);
  int64_t i = begin;
  for (; i + 2 * n <= end; i += 2 * n) {
    next.First(i, i + 2 * n);
    const VF y0 = hn::Mul(hn::Mul(InT::Load(x, i), inv), hn::LoadU(df, g + i));
    const VF y1 = hn::Mul(hn::Mul(InT::Load(x, i + n), inv), hn::LoadU(df, g + i + n));
    hn::StoreU(y0, df, y + i);
    hn::StoreU(y1, df, y + i + n);
    m0 = AbsMaxAcc(m0, y0);
    m1 = AbsMaxAcc(m1, y1);
  }
  for (; i < end; i += n) {
    VF y0 = hn::Mul(hn::Mul(InT::LoadUpTo(x, i, end), inv), hn::LoadU(df, g + i));
    hn::StoreU(y0, df, y + i);
    if (i + n > end) y0 = hn::IfThenElseZero(hn::FirstN(df, size_t(end - i)), y0);  // lanes past the unit
    m0 = AbsMaxAcc(m0, y0);
  }
  return uint32_t(hn::GetLane(hn::MaxOfLanes(di, hn::Max(m0, m1))));
}

// Codes of y[begin, end) * rcp, clamped to [-qclamp, qclamp] when kClamp. kNoNaN: no y * rcp is
// NaN (a finite unit with a finite rcp >= 0), so the encoder's NaN branch is left out; with
// kNoNaN and !kSat, also its saturation step (every |y * rcp| is known to stay below the
// encoder's saturation threshold).
template <class OutT, bool kNoNaN, bool kSat, bool kClamp>
HWY_INLINE void EncodeUnit(const float* y, float rcp, float qclamp, char* out, int64_t begin, int64_t end,
                           const NextRow& next) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const VF vr = hn::Set(df, rcp), hi = hn::Set(df, qclamp), lo = hn::Set(df, -qclamp);
  const auto enc = [&](int64_t i) {
    VF v = hn::Mul(hn::LoadU(df, y + i), vr);
    if (kClamp) {
      // clamp_sym: NaN passes through (compare-and-select); without NaN, and with qclamp > 0
      // (no tie between signed zeros), min/max give the same values.
      if (kNoNaN) v = hn::Min(hn::Max(v, lo), hi);
      else v = hn::IfThenElse(hn::Gt(v, hi), hi, hn::IfThenElse(hn::Lt(v, lo), lo, v));
    }
    if (kNoNaN) return OutT::template EncodeNoNaN<kSat>(v);
    return OutT::Encode(v);
  };
  int64_t i = begin;
  for (; i + 4 * n <= end; i += 4 * n) {
    next.Second(i, i + 4 * n);
    StoreCodes4x1(enc(i), enc(i + n), enc(i + 2 * n), enc(i + 3 * n), out, i);
  }
  next.Second(i, end);
  for (; i + n <= end; i += n) StoreCodes<1>(enc(i), out, i);
  if (i < end) {
    HWY_ALIGN char buf[kMaxLaneBytes];
    StoreCodes<1>(enc(i), buf, 0);
    memcpy(out + i, buf, size_t(end - i));
  }
}

// Picks the encoder variant of a unit. amax: max of bits(|y|) over the unit (kF32InfBits and
// above: a NaN or Inf in y).
template <class OutT>
HWY_INLINE void EncodeUnitAny(uint32_t amax, bool clamp, const float* y, float rcp, float qclamp, char* out,
                              int64_t begin, int64_t end, const NextRow& next) {
  const uint32_t rcp_abs = math::bits_of(rcp) & math::kF32AbsMask;
  if (amax < math::kF32InfBits && rcp_abs < math::kF32InfBits) {
    // Finite y times a finite rcp: no y * rcp is NaN. Rounding is monotonic and symmetric, so
    // every |y * rcp| <= |amax * rcp|; a clamp bounds them by qclamp <= qmax_T (validation).
    if (clamp) {
      EncodeUnit<OutT, true, false, true>(y, rcp, qclamp, out, begin, end, next);
    } else if (math::bits_of(math::mul_rn(math::float_of(amax), math::float_of(rcp_abs))) < OutT::kNoSatBits) {
      EncodeUnit<OutT, true, false, false>(y, rcp, qclamp, out, begin, end, next);
    } else {
      EncodeUnit<OutT, true, true, false>(y, rcp, qclamp, out, begin, end, next);
    }
  } else {
    if (clamp) EncodeUnit<OutT, false, true, true>(y, rcp, qclamp, out, begin, end, next);
    else EncodeUnit<OutT, false, true, false>(y, rcp, qclamp, out, begin, end, next);
  }
}

// scale_row: the row's scales (tensor placement) or its output row (packed: bytes h..h+3).
// The y pass of a row in units of `unit` elements (the row, or its groups): y into y[0, h),
// amax[k] = the max of bits(|y|) & 0x7FFFFFFF over unit k.
template <class InT>
HWY_NOINLINE void YAbsMaxUnits(const char* x, const float* g, VF inv, float* y, int64_t h, int64_t unit,
                               uint32_t* amax, const NextRow& next) {
  for (int64_t b = 0, k = 0; b < h; b += unit, ++k) amax[k] = YAbsMax<InT>(x, g, inv, y, b, b + unit, next);
}

// The encode pass of a row in units (see YAbsMaxUnits), unit k with multiplier rcp[k].
template <class OutT>
HWY_NOINLINE void EncodeUnits(const float* y, const float* rcp, const uint32_t* amax, bool clamp, float qclamp,
                              char* out, int64_t h, int64_t unit, const NextRow& next) {
  for (int64_t b = 0, k = 0; b < h; b += unit, ++k)
    EncodeUnitAny<OutT>(amax[k], clamp, y, rcp[k], qclamp, out, b, b + unit, next);
}

HWY_INLINE void StoreScale(const RmsnormQuantCall& c, char* scale_row, int64_t group, uint32_t stored) {
  if (c.packed) {
    memcpy(scale_row + c.h, &stored, 4);  // little-endian hosts only
    return;
  }
  static constexpr DType kScaleDType[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kE8M0};
  store_code(kScaleDType[int(c.scale_type)], scale_row + group * c.scale_col_stride, 0, stored);
}

// g[i] = f32(w_i) + offset for i < h (quant-only: 1), zeros up to h_pad.
template <class Tag>
HWY_INLINE int64_t GammaPrimeT(const char* w, float offset, float* g, int64_t h) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const VF off = hn::Set(df, offset);
  int64_t i = 0;
  for (; i + n <= h; i += n) hn::Store(hn::Add(InputLoader<Tag>::Load(w, i), off), df, g + i);
  return i;
}
HWY_NOINLINE void GammaPrime(const RmsnormQuantCall& c, float* g, int64_t h_pad) {
  const int64_t h = c.h;
  int64_t i = 0;
  if (c.norm != FUSEDNORM_NORM_RMS) {
    for (; i < h; ++i) g[i] = 1.0f;
  } else {
    if (c.w_type == DType::kBF16) i = GammaPrimeT<BF16Tag>(c.weight, c.weight_offset, g, h);
    else if (c.w_type == DType::kF32) i = GammaPrimeT<float>(c.weight, c.weight_offset, g, h);
    else if (c.w_type == DType::kF16) i = GammaPrimeT<F16Tag>(c.weight, c.weight_offset, g, h);
    for (; i < h; ++i) g[i] = math::add_rn(decode(c.w_type, load_code(c.w_type, c.weight, i)), c.weight_offset);
  }
  for (; i < h_pad; ++i) g[i] = 0.0f;
}

// g: gamma' (GammaPrime), padded with zeros to a whole vector.
template <class InT, class OutT>
void RmsnormQuantRowsT(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end, const float* g) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const int64_t h = c.h;
  const int64_t h_pad = (h + n - 1) / n * n;
  float* part = Scratch(1, size_t(math::reduction_partials(h)));
  float* y = Scratch(2, size_t(h_pad));
  // The unit of a scale: the row in static and per-row modes (group == h), else each group.
  const int64_t unit = c.mode == FUSEDNORM_SCALE_STATIC ? h : c.group;
  const int64_t units = h / unit;
  // Per unit of a row: the max of bits(|y|) and the multiplier.
  uint32_t* amax = reinterpret_cast<uint32_t*>(Scratch(3, size_t(units)));
  float* rcp = Scratch(4, size_t(units));
  const float h_f = math::length_f32(h);
  const float static_rcp = c.mode == FUSEDNORM_SCALE_STATIC ? 1.0f / static_scale_value(c) : 0.0f;
  const bool clamp = !(c.qclamp == INFINITY);  // clamp_sym with +Inf is the identity

  for (int64_t r = row_begin; r < row_end; ++r) {
    const char* x = row_ptr(c.lead, c.in, r);
    char* out = row_ptr(c.lead, c.out, r);
    // Also past the block: the thread's next block usually starts there.
    NextRow next;
    if (r + 1 < c.lead.rows) {
      next.p0 = row_ptr(c.lead, c.in, r + 1);
      next.p1 = c.res.data != nullptr ? row_ptr(c.lead, c.res, r + 1) : nullptr;
      next.elem_bytes = InT::kBytes;
      next.bytes = h * InT::kBytes;
    }
    float inv_s = 1.0f;
    if (c.res.data != nullptr) {
      char* res = row_ptr(c.lead, c.res, r);
      if (c.norm == FUSEDNORM_NORM_RMS) inv_s = math::inv_rms(SumSquares<InT, true>(x, res, h, part), h_f, c.eps);
      else ResidualRow<InT>(x, res, h);
      x = res;  // the rounded sum is what gets normalized
    } else if (c.norm == FUSEDNORM_NORM_RMS) {
      inv_s = math::inv_rms(SumSquares<InT, false>(x, nullptr, h, part), h_f, c.eps);
    }
    const VF inv = hn::Set(df, inv_s);
    // The y pass of all units, then their scales (independent divisions, which pipeline), then
    // the codes.
    YAbsMaxUnits<InT>(x, g, inv, y, h, unit, amax, next);
    if (c.mode == FUSEDNORM_SCALE_STATIC) {
      rcp[0] = static_rcp;
    } else {
      char* scale_row = c.packed ? out : row_ptr(c.lead, c.scales, r);
      for (int64_t k = 0; k < units; ++k) {
        const math::DynamicScale s = math::dynamic_scale(amax[k], c.qmax, c.scale_ub, c.min_scale, c.scale_type);
        StoreScale(c, scale_row, k, s.stored);
        rcp[k] = s.r;
      }
    }
    EncodeUnits<OutT>(y, rcp, amax, clamp, c.qclamp, out, h, unit, next);
  }
}

template <class InT>
void RmsnormQuantRowsIn(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end, const float* g) {
  switch (c.out_type) {
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return RmsnormQuantRowsT<InT, OutMini<math::name>>(c, row_begin, row_end, g);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kI8: return RmsnormQuantRowsT<InT, OutInt8>(c, row_begin, row_end, g);
    default: return;  // validation admits no other output
  }
}

// call_id: unique per call (never 0), so that a thread decodes gamma' once per call, however
// many row blocks of the call it runs (the weights cannot change during a call).
void RmsnormQuantRows(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end, uint64_t call_id) {
  const int64_t n = int64_t(hn::Lanes(DF()));
  const int64_t h_pad = (c.h + n - 1) / n * n;
  // gamma' = f32(w) + offset; quant-only uses gamma' = 1 and inv = 1, which leaves y = x bit for
  // bit.
  thread_local uint64_t gamma_call = 0;
  float* g = Scratch(0, size_t(h_pad));
  if (gamma_call != call_id) {
    GammaPrime(c, g, h_pad);
    gamma_call = call_id;
  }
  switch (c.in_type) {
    case DType::kF32: return RmsnormQuantRowsIn<InF32>(c, row_begin, row_end, g);
    case DType::kF16: return RmsnormQuantRowsIn<InF16>(c, row_begin, row_end, g);
    default: return RmsnormQuantRowsIn<InBF16>(c, row_begin, row_end, g);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <atomic>

#include "backends/cpu/cpu_backend.h"

namespace fusednorm {

HWY_EXPORT(CastRows);
HWY_EXPORT(RmsnormQuantRows);

namespace {
// Rows per task: enough elements that a task outweighs its scheduling (results never depend on
// it: every row is computed alone).
int64_t grain_rows(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)); }

// rmsnorm_quant: blocks of >= 64Ki elements (a block costs a dispatch and a task, and its first
// row misses the prefetch), but at least ~4 blocks per thread when the rows allow it.
int64_t rmsnorm_grain_rows(int64_t rows, int64_t cols) {
  const int64_t want = std::max<int64_t>(1, 65536 / std::max<int64_t>(cols, 1));
  const int64_t threads = std::max<int64_t>(1, tbb::this_task_arena::max_concurrency());
  const int64_t cap = std::max<int64_t>(1, rows / (4 * threads));
  return std::min(want, cap);
}
}  // namespace

void cpu_cast(const CastCall& call) {
  if (call.cols == 0) return;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, call.lead.rows, grain_rows(call.cols)),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      HWY_DYNAMIC_DISPATCH(CastRows)(call, r.begin(), r.end());
                    });
}

void cpu_rmsnorm_quant(const RmsnormQuantCall& call) {
  if (call.h == 0) return;
  static std::atomic<uint64_t> next_call_id{1};
  const uint64_t call_id = next_call_id.fetch_add(1, std::memory_order_relaxed);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, call.lead.rows, rmsnorm_grain_rows(call.lead.rows, call.h)),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      HWY_DYNAMIC_DISPATCH(RmsnormQuantRows)(call, r.begin(), r.end(), call_id);
                    });
}

const char* cpu_target_name() {
  // Lower target bits are better; dispatch takes the best target both supported and compiled.
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(usable & -usable);
}

}  // namespace fusednorm
#endif  // HWY_ONCE
