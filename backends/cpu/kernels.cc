// Compiled once per Highway target (foreach_target.h re-includes this file), then once more
// with HWY_ONCE for the dispatch tables and the oneTBB drivers.
// The CPU backend's row kernels: one HWY_DYNAMIC_DISPATCH per TBB row block, never inside a row.

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
  thread_local hwy::AlignedFreeUniquePtr<float[]> buf[3];
  thread_local size_t cap[3] = {0, 0, 0};
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

template <class F>
struct OutMini {
  static HWY_INLINE VU Encode(VF v) { return EncodeMini<F, false>(v); }
};
struct OutInt8 {
  static HWY_INLINE VU Encode(VF v) { return EncodeInt8(v); }
};

// Canonical sum of squares of a row (docs/numerics.md §2): P strided partials held in `part`,
// one vector of partials at a time, then the pairwise tree as even/odd lane pairs.
template <class InT>
HWY_INLINE float SumSquares(const char* x, int64_t h, float* part) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const int64_t p_count = math::reduction_partials(h);
  if (p_count < n || p_count % n != 0) {
    HWY_ALIGN float lane[kMaxLaneBytes / 4];
    return math::sum_squares_canonical(
        [&](int64_t i) {
          hn::Store(InT::LoadUpTo(x, i, i + 1), df, lane);
          return lane[0];
        },
        h, part);
  }
  for (int64_t p = 0; p < p_count; p += n) hn::Store(hn::Zero(df), df, part + p);
  for (int64_t base = 0; base < h; base += p_count) {
    const int64_t stop = std::min(p_count, h - base);
    for (int64_t j = 0; j < stop; j += n) {
      const VF v = InT::LoadUpTo(x, base + j, h);
      hn::Store(hn::Add(hn::Load(df, part + j), hn::Mul(v, v)), df, part + j);
    }
  }
  int64_t count = p_count;
#if HWY_TARGET != HWY_SCALAR
  for (; count >= 2 * n; count /= 2) {
    for (int64_t k = 0; k < count; k += 2 * n) {
      const VF lo = hn::Load(df, part + k), hi = hn::Load(df, part + k + n);
      hn::Store(hn::Add(hn::ConcatEven(df, hi, lo), hn::ConcatOdd(df, hi, lo)), df, part + k / 2);
    }
  }
#endif
  for (; count > 1; count /= 2)
    for (int64_t j = 0; j < count / 2; ++j) part[j] = part[2 * j] + part[2 * j + 1];
  return part[0];
}

// y over [begin, end): (x * inv) * g, with zeros beyond `end` (g is zero-padded).
template <class InT>
HWY_INLINE VF Y(const char* x, const float* g, VF inv, int64_t i, int64_t end) {
  return hn::Mul(hn::Mul(InT::LoadUpTo(x, i, end), inv), hn::LoadU(DF(), g + i));
}

template <class InT>
HWY_INLINE uint32_t AbsMaxBits(const char* x, const float* g, VF inv, int64_t begin, int64_t end) {
  const DI di;
  const int64_t n = int64_t(hn::Lanes(di));
  VI m = hn::Zero(di);
  for (int64_t i = begin; i < end; i += n) {
    VI a = hn::And(hn::BitCast(di, Y<InT>(x, g, inv, i, end)), hn::Set(di, int32_t(math::kF32AbsMask)));
    if (i + n > end) a = hn::IfThenElseZero(hn::FirstN(di, size_t(end - i)), a);  // lanes past the unit
    m = hn::Max(m, a);
  }
  return uint32_t(hn::GetLane(hn::MaxOfLanes(di, m)));
}

template <class InT, class OutT>
HWY_INLINE void EncodeRange(const char* x, const float* g, VF inv, float rcp, float qclamp, char* out,
                            int64_t begin, int64_t end) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const VF vr = hn::Set(df, rcp), hi = hn::Set(df, qclamp), lo = hn::Set(df, -qclamp);
  for (int64_t i = begin; i < end; i += n) {
    VF v = hn::Mul(Y<InT>(x, g, inv, i, end), vr);
    // clamp_sym: NaN passes through (compare-and-select, not Min/Max).
    v = hn::IfThenElse(hn::Gt(v, hi), hi, hn::IfThenElse(hn::Lt(v, lo), lo, v));
    const VU codes = OutT::Encode(v);
    if (i + n <= end) {
      StoreCodes<1>(codes, out, i);
    } else {
      HWY_ALIGN char buf[kMaxLaneBytes];
      StoreCodes<1>(codes, buf, 0);
      memcpy(out + i, buf, size_t(end - i));
    }
  }
}

HWY_INLINE void StoreScale(const RmsnormQuantCall& c, int64_t row, int64_t group, uint32_t stored) {
  if (c.packed) {
    memcpy(row_ptr(c.lead, c.out, row) + c.h, &stored, 4);  // little-endian hosts only
    return;
  }
  static constexpr DType kScaleDType[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kE8M0};
  store_code(kScaleDType[int(c.scale_type)], row_ptr(c.lead, c.scales, row) + group * c.scale_col_stride, 0,
             stored);
}

template <class InT, class OutT>
void RmsnormQuantRowsT(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const int64_t h = c.h;
  const int64_t h_pad = (h + n - 1) / n * n;
  // gamma' = f32(w) + offset once per block; quant-only uses gamma' = 1 and inv = 1, which
  // leaves y = x bit for bit.
  float* g = Scratch(0, size_t(h_pad));
  for (int64_t i = 0; i < h; ++i)
    g[i] = c.norm == FUSEDNORM_NORM_RMS
               ? math::add_rn(decode(c.w_type, load_code(c.w_type, c.weight, i)), c.weight_offset)
               : 1.0f;
  for (int64_t i = h; i < h_pad; ++i) g[i] = 0.0f;
  float* part = Scratch(1, size_t(math::reduction_partials(h)));
  const float h_f = math::length_f32(h);
  const float static_rcp = c.mode == FUSEDNORM_SCALE_STATIC ? 1.0f / *c.static_scale : 0.0f;

  for (int64_t r = row_begin; r < row_end; ++r) {
    const char* x = row_ptr(c.lead, c.in, r);
    char* out = row_ptr(c.lead, c.out, r);
    if (c.res.data != nullptr) {
      char* res = row_ptr(c.lead, c.res, r);
      for (int64_t i = 0; i < h; i += n)
        InT::RoundStore(hn::Add(InT::LoadUpTo(x, i, h), InT::LoadUpTo(res, i, h)), res, i, h);
      x = res;  // the rounded sum is what gets normalized
    }
    float inv_s = 1.0f;
    if (c.norm == FUSEDNORM_NORM_RMS) inv_s = math::inv_rms(SumSquares<InT>(x, h, part), h_f, c.eps);
    const VF inv = hn::Set(df, inv_s);
    for (int64_t g0 = 0; g0 < h; g0 += c.group) {
      const int64_t g1 = g0 + c.group;
      float rcp = static_rcp;
      if (c.mode != FUSEDNORM_SCALE_STATIC) {
        const math::DynamicScale s =
            math::dynamic_scale(AbsMaxBits<InT>(x, g, inv, g0, g1), c.qmax, c.scale_ub, c.min_scale, c.scale_type);
        StoreScale(c, r, g0 / c.group, s.stored);
        rcp = s.r;
      }
      EncodeRange<InT, OutT>(x, g, inv, rcp, c.qclamp, out, g0, g1);
    }
  }
}

template <class InT>
void RmsnormQuantRowsIn(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end) {
  switch (c.out_type) {
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return RmsnormQuantRowsT<InT, OutMini<math::name>>(c, row_begin, row_end);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kI8: return RmsnormQuantRowsT<InT, OutInt8>(c, row_begin, row_end);
    default: return;  // validation admits no other output
  }
}

void RmsnormQuantRows(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end) {
  switch (c.in_type) {
    case DType::kF32: return RmsnormQuantRowsIn<InF32>(c, row_begin, row_end);
    case DType::kF16: return RmsnormQuantRowsIn<InF16>(c, row_begin, row_end);
    default: return RmsnormQuantRowsIn<InBF16>(c, row_begin, row_end);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "backends/cpu/cpu_backend.h"

namespace fusednorm {

HWY_EXPORT(CastRows);
HWY_EXPORT(RmsnormQuantRows);

namespace {
// Rows per task: enough elements that a task outweighs its scheduling (results never depend on
// it: every row is computed alone).
int64_t grain_rows(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)); }
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
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, call.lead.rows, grain_rows(call.h)),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      HWY_DYNAMIC_DISPATCH(RmsnormQuantRows)(call, r.begin(), r.end());
                    });
}

const char* cpu_target_name() {
  // Lower target bits are better; dispatch takes the best target both supported and compiled.
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(usable & -usable);
}

}  // namespace fusednorm
#endif  // HWY_ONCE
