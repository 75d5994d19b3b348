// Compiled once per Highway target (included after foreach_target.h by each operation's unit).
// The row machinery every CPU operation shares: thread scratch, input loads (with the residual
// add), the canonical sum of squares (docs/numerics.md §2), gamma', the integer |y| max and the
// next-row prefetch. The operations' own passes live in their units (rmsnorm_quant.cc, ...).

#if defined(FUSEDNORM_CPU_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FUSEDNORM_CPU_ROWS_INL_H_
#undef FUSEDNORM_CPU_ROWS_INL_H_
#else
#define FUSEDNORM_CPU_ROWS_INL_H_
#endif

#include <string.h>

#include <algorithm>

#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_math-inl.h"
#include "core/call.h"
#include "core/elements.h"
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"

// A lambda that a row loop calls for each vector or block, inlined whatever the compiler's
// per-unit inlining budget says (GCC 12 can leave such a leaf out of line in a large unit, at
// up to 1.5x the row's time): `[&](...) FN_LAMBDA_INLINE {...}`.
#ifndef FN_LAMBDA_INLINE
#if defined(__GNUC__) || defined(__clang__)
#define FN_LAMBDA_INLINE __attribute__((always_inline))
#else
#define FN_LAMBDA_INLINE
#endif
#endif

HWY_BEFORE_NAMESPACE();
namespace fusednorm {
namespace HWY_NAMESPACE {

constexpr size_t kMaxLaneBytes = HWY_MAX_BYTES;  // widest vector of any target, in bytes

constexpr size_t kScratchSlots = 8;  // slots 0 .. 7
// A thread's scratch floats (slot < kScratchSlots; slot 0 is the per-call gamma' cache of
// the operation running on the thread), grown on demand and kept for the thread's life.
HWY_INLINE float* Scratch(size_t slot, size_t n) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buf[kScratchSlots];
  thread_local size_t cap[kScratchSlots] = {};
  if (cap[slot] < n) {
    buf[slot] = hwy::AllocateAligned<float>(n);
    cap[slot] = n;
  }
  return buf[slot].get();
}

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
  // The dtype's codes of v (rounded, NaN canonical), in u32 lanes.
  static HWY_INLINE VU Encode(VF v) {
    if (kType == DType::kF32) return EncodeF32<false>(v);
    if (kType == DType::kF16) return EncodeF16<false>(v);
    return EncodeBF16<false>(v);
  }
  // Rounds v to the dtype, stores the codes, returns the rounded value as f32.
  static HWY_INLINE VF RoundStore(VF v, char* row, int64_t i, int64_t end) {
    const int64_t n = int64_t(hn::Lanes(DF()));
#if defined(FN_F16C)
    if (kType == DType::kF16) {  // the packed codes stored and converted back (simd_math-inl.h)
      const auto h = EncodeF16Packed(v);
      memcpy(row + i * kBytes, &h, size_t((std::min(end, i + n) - i) * kBytes));
      return DecodeF16Packed(h);
    }
#endif
    const VU code = Encode(v);
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
  // RoundStore of two whole vectors at i and i + Lanes, without the rounded values (stream:
  // StoreHint's). bf16 on AVX3: the two vectors' rounded high halves in one two-source word
  // permutation and one store (where two demotions, each a pack and a permutation, stored them
  // apart).
  static HWY_INLINE void RoundStore2(VF v0, VF v1, char* row, int64_t i, bool stream = false) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    if (kType == DType::kBF16) {
      const __m512i idx = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                           25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
      const __m512i w = _mm512_permutex2var_epi16(EncodeBF16High(v0).raw, idx, EncodeBF16High(v1).raw);
      const hn::Full512<uint16_t> d16;
      StoreHint(hn::Vec512<uint16_t>{w}, d16, reinterpret_cast<uint16_t*>(row) + i, stream);
      return;
    }
#endif
#if defined(FN_F16C) && HWY_TARGET <= HWY_AVX3
    if (kType == DType::kF16) {
      const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(EncodeF16Packed(v0)), EncodeF16Packed(v1), 1);
      StoreHint(hn::Vec512<uint16_t>{w}, hn::Full512<uint16_t>(), reinterpret_cast<uint16_t*>(row) + i, stream);
      return;
    }
#elif defined(FN_F16C)
    if (kType == DType::kF16) {
      const __m256i w = _mm256_set_m128i(EncodeF16Packed(v1), EncodeF16Packed(v0));
      StoreHint(hn::Vec256<uint16_t>{w}, hn::Full256<uint16_t>(), reinterpret_cast<uint16_t*>(row) + i, stream);
      return;
    }
#endif
    const int64_t n = int64_t(hn::Lanes(DF()));
    StoreCodes<kBytes>(Encode(v0), row, i, stream);
    StoreCodes<kBytes>(Encode(v1), row, i + n, stream);
  }
};
using InF32 = In<float, DType::kF32>;
using InF16 = In<F16Tag, DType::kF16>;
using InBF16 = In<BF16Tag, DType::kBF16>;

// One level of a tree on 2 * Lanes consecutive lanes: lane j of the result is op(lo[2j],
// lo[2j+1]) (j < Lanes/2), then hi's pairs.
template <class D, class Op>
HWY_INLINE hn::VFromD<D> PairLevel(D d, hn::VFromD<D> lo, hn::VFromD<D> hi, const Op& op) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return op(lo, hi);
#else
  return op(hn::ConcatEven(d, hi, lo), hn::ConcatOdd(d, hi, lo));
#endif
}
// The pairwise tree's level on partials: lo[2j] + lo[2j+1] (docs/numerics.md §2).
HWY_INLINE VF PairSums(VF lo, VF hi) {
  return PairLevel(DF(), lo, hi, [](VF a, VF b) { return hn::Add(a, b); });
}

// A pairwise tree over the kN vectors leaf(first) .. leaf(first + kN - 1), depth first (at most
// log2(kN) + 1 vectors live, all in registers): pair(a, b) is the next level of a then b
// (PairSums, or rmsnorm_fp4's PairMax). With kN = Lanes leaves that each hold one quantity's Lanes
// values at the same tree level, the root's lane k is quantity first + k's root.
template <int kN, class Leaf, class Pair>
HWY_INLINE auto PairTree(const Leaf& leaf, int64_t first, const Pair& pair) {
  if constexpr (kN == 1) {
    return leaf(first);
  } else {
    const auto lo = PairTree<kN / 2>(leaf, first, pair);
    return pair(lo, PairTree<kN / 2>(leaf, first + kN / 2, pair));
  }
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

#if HWY_TARGET != HWY_SCALAR
// The canonical partial sums of a row whose P partials fill one, two or four vectors (Lanes <= P
// <= 4 Lanes), taken through the tree's levels above them to one vector of Lanes values (the
// level log2(P / Lanes) nodes, in order): every step's x^2 added in order, then PairSums(a, b),
// the tree's next level of a then b. Fused with the residual update when kRes.
template <class InT, bool kRes>
HWY_INLINE VF SumSquaresVector(const char* in, char* res, int64_t h, int64_t p_count) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  const auto sq = [&](int64_t i) {  // x[i..]^2, +0 past h (adding +0 leaves a partial unchanged)
    if (i >= h) return hn::Zero(df);
    const VF v = i + n <= h ? LoadX<InT, kRes>(in, res, i) : LoadXUpTo<InT, kRes>(in, res, i, h);
    return hn::Mul(v, v);
  };
  for (int64_t base = 0; base < h; base += p_count) {
    a0 = hn::Add(a0, sq(base));
    if (p_count >= 2 * n) a1 = hn::Add(a1, sq(base + n));
    if (p_count >= 4 * n) {
      a2 = hn::Add(a2, sq(base + 2 * n));
      a3 = hn::Add(a3, sq(base + 3 * n));
    }
  }
  if (p_count >= 4 * n) {
    a0 = PairSums(a0, a1);
    a1 = PairSums(a2, a3);
  }
  if (p_count >= 2 * n) a0 = PairSums(a0, a1);
  return a0;
}
#endif

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
#if HWY_TARGET != HWY_SCALAR
  } else if (p_count <= 4 * n) {
    // One, two or four vectors of partials (short rows, heads of qk_rmsnorm): the steps and the
    // whole tree in registers. PairSums(a, a) is the next level of a alone in its low half, so
    // log2(Lanes) of them leave the root in lane 0.
    VF a0 = SumSquaresVector<InT, kRes>(in, res, h, p_count);
    for (int64_t lanes = n; lanes > 1; lanes /= 2) a0 = PairSums(a0, a0);
    return hn::GetLane(a0);
#endif
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

// Software prefetch (into L2) of the row(s) that the next row's first pass reads, asked for by the
// row's last pass (the codes) in step with its progress over [0, h), so that the misses spread
// over that pass and the next row's sum of squares finds its data in cache. (Half of them asked
// for by the y pass and half by the codes' pass measured up to 13% slower on bf16 rows of 4096
// and 8192, f32 mixed: docs/performance.md.) Passes take it by value: a copy whose fields stay
// in registers (through a reference, any store of the pass's outputs might alias it, and its
// fields were loaded again at every step).
struct NextRow {
  const char* p0 = nullptr;  // the next row's input (null: nothing to prefetch)
  const char* p1 = nullptr;  // its residual, or null
  int64_t elem_bytes = 0;    // bytes per element of those rows
  HWY_INLINE void Range(int64_t lo, int64_t hi) const {
    if (p0 == nullptr) return;
    for (int64_t b = (lo + 63) & ~int64_t(63); b < hi; b += 64) {
      __builtin_prefetch(p0 + b, 0, 2);
      if (p1 != nullptr) __builtin_prefetch(p1 + b, 0, 2);
    }
  }
  // The codes' pass has reached elements [i, j) of the current row (0 <= i <= j).
  HWY_INLINE void Step(int64_t i, int64_t j) const { Range(i * elem_bytes, j * elem_bytes); }
};

// y over [begin, end) into y[begin...] (lanes past `end` of the last vector: whatever (x * inv) * g
// gives for x = g = 0); returns the max of bits(y) & 0x7FFFFFFF over [begin, end). !kStore: the
// maximum only, y not written (y may be null).
template <class InT, bool kStore = true>
HWY_INLINE uint32_t YAbsMax(const char* x, const float* g, VF inv, float* y, int64_t begin, int64_t end) {
  const DF df;
  const DI di;
  const int64_t n = int64_t(hn::Lanes(df));
  VI m0 = hn::Zero(di), m1 = hn::Zero(di);
  int64_t i = begin;
  for (; i + 2 * n <= end; i += 2 * n) {
    const VF y0 = hn::Mul(hn::Mul(InT::Load(x, i), inv), hn::LoadU(df, g + i));
    const VF y1 = hn::Mul(hn::Mul(InT::Load(x, i + n), inv), hn::LoadU(df, g + i + n));
    if (kStore) {
      hn::StoreU(y0, df, y + i);
      hn::StoreU(y1, df, y + i + n);
    }
    m0 = AbsMaxAcc(m0, y0);
    m1 = AbsMaxAcc(m1, y1);
  }
  for (; i < end; i += n) {
    VF y0 = hn::Mul(hn::Mul(InT::LoadUpTo(x, i, end), inv), hn::LoadU(df, g + i));
    if (kStore) hn::StoreU(y0, df, y + i);
    if (i + n > end) y0 = hn::IfThenElseZero(hn::FirstN(df, size_t(end - i)), y0);  // lanes past the unit
    m0 = AbsMaxAcc(m0, y0);
  }
  return uint32_t(hn::GetLane(hn::MaxOfLanes(di, hn::Max(m0, m1))));
}

// The maximum of bits(|y|) over a row of h elements, y not kept (per-row scales: the codes are
// computed from x again, StaticRow): a y buffer beside x and gamma' (32 + 16 + 32 KiB at H 8192,
// bf16 in) would not stay in L1.
template <class InT>
HWY_NOINLINE uint32_t RowAbsMax(const char* x, const float* g, VF inv, int64_t h) {
  return YAbsMax<InT, false>(x, g, inv, nullptr, 0, h);
}

// The y pass of a row in units of `unit` elements (the row, or its groups): y into y[0, h),
// amax[k] = the max of bits(|y|) & 0x7FFFFFFF over unit k.
template <class InT>
HWY_NOINLINE void YAbsMaxUnits(const char* x, const float* g, VF inv, float* y, int64_t h, int64_t unit,
                               uint32_t* amax) {
  for (int64_t b = 0, k = 0; b < h; b += unit, ++k) amax[k] = YAbsMax<InT>(x, g, inv, y, b, b + unit);
}

// A max tree's level: the max of lanes 2j and 2j+1 (of lo, then of hi).
HWY_INLINE VU PairMax(VU lo, VU hi) {
  return PairLevel(DU(), lo, hi, [](VU a, VU b) { return hn::Max(a, b); });
}

// y = (x × inv) × g over the row into y, and amax[b] = max of bits(|y|) over block b (the blocks
// of rmsnorm_fp4, the groups of rmsnorm_quant; YAbsMaxUnits' maxima). Vectors lie
// inside blocks (block >= Lanes). Lanes blocks at a time: each block's lane-wise max of its
// vectors is a leaf of a PairMax tree (PairTree, rows-inl.h) whose root holds the Lanes blocks'
// maxima in block order; blocks past the row are zero leaves. Integer maxima: order-free.
// !kStore: the maxima only, y not written (y may be null). kVecs: vectors a block where known at
// compile time, else 0 (a loop a leaf). Only blocks of one vector take 1 (NVFP4 on 16-lane
// targets: a loop of one trip cost its control and alignment padding every vector: NVFP4 bf16 at
// 4096 x 8192 13% faster, docs/results/cpu_ab_fp4_one_vector_leaf.txt); 2 (MXFP4 there) measured
// 6-12% slower than the loop, and is not made.
template <class InT, bool kStore, int kVecs>
HWY_INLINE void YBlockMaxT(const char* x, const float* g, VF inv, float* y, int64_t h, int64_t block,
                           uint32_t* amax) {
  const DF df;
  const DU du;
  const DI di;
  constexpr int kL = int(HWY_LANES(float));
  const int64_t n = int64_t(hn::Lanes(df));
  const int64_t blocks = h / block;
  const VI abs_mask = hn::Set(di, int32_t(math::kF32AbsMask));
  const auto one = [&](int64_t i, VI m) FN_LAMBDA_INLINE {
    const VF v = hn::Mul(hn::Mul(InT::Load(x, i), inv), hn::LoadU(df, g + i));
    if (kStore) hn::StoreU(v, df, y + i);
    return hn::Max(m, hn::And(hn::BitCast(di, v), abs_mask));
  };
  const auto leaf = [&](int64_t b) FN_LAMBDA_INLINE {
    VI m = hn::Zero(di);
    if (b >= blocks) return hn::BitCast(du, m);
    if constexpr (kVecs > 0) {
      for (int k = 0; k < kVecs; ++k) m = one(b * block + k * n, m);
    } else {
      for (int64_t i = b * block; i < (b + 1) * block; i += n) m = one(i, m);
    }
    return hn::BitCast(du, m);
  };
  // amax has room for a whole number of vectors (the caller pads it): the root goes there as is.
  for (int64_t b = 0; b < blocks; b += n) {
    if (n == kL) {
      hn::StoreU(PairTree<kL>(leaf, b, PairMax), du, amax + b);
    } else {  // a scalable target's fewer lanes: each block's lanes reduced on their own
      for (int64_t k = 0; k < n; ++k) amax[b + k] = hn::GetLane(hn::MaxOfLanes(du, leaf(b + k)));
    }
  }
}
template <class InT, bool kStore = true>
HWY_NOINLINE void YBlockMax(const char* x, const float* g, VF inv, float* y, int64_t h, int64_t block,
                            uint32_t* amax) {
  if (block == int64_t(hn::Lanes(DF()))) return YBlockMaxT<InT, kStore, 1>(x, g, inv, y, h, block, amax);
  YBlockMaxT<InT, kStore, 0>(x, g, inv, y, h, block, amax);
}

// The start of a normalized row: with a residual, x = in + res rounded to the input dtype and
// written to res (returns res, the row to normalize), else returns in; *inv = inv_rms of that row
// from the canonical sum of squares (rms), else 1.
template <class InT>
HWY_INLINE const char* NormRow(const char* in, char* res, bool rms, int64_t h, float h_f, float eps, float* part,
                               float* inv) {
  *inv = 1.0f;
  if (res != nullptr) {
    if (rms) *inv = math::inv_rms(SumSquares<InT, true>(in, res, h, part), h_f, eps);
    else ResidualRow<InT>(in, res, h);
    return res;
  }
  if (rms) *inv = math::inv_rms(SumSquares<InT, false>(in, nullptr, h, part), h_f, eps);
  return in;
}

// The start of row r of a call that normalizes rows of `in` with an optional in-place residual
// (rmsnorm_quant's and rmsnorm_fp4's call structs): the next row's input (and residual) into
// *next for the passes to prefetch, then NormRow. Returns the row to normalize; *inv its inv_rms.
template <class InT, class Call>
HWY_INLINE const char* StartRow(const Call& c, int64_t r, float h_f, float* part, NextRow* next, float* inv) {
  if (r + 1 < c.lead.rows) {
    next->p0 = row_ptr(c.lead, c.in, r + 1);
    next->p1 = c.res.data != nullptr ? row_ptr(c.lead, c.res, r + 1) : nullptr;
    next->elem_bytes = InT::kBytes;
  }
  return NormRow<InT>(row_ptr(c.lead, c.in, r), c.res.data != nullptr ? row_ptr(c.lead, c.res, r) : nullptr,
                      c.norm == FUSEDNORM_NORM_RMS, c.h, h_f, c.eps, part, inv);
}

// g[i] = f32(w_i) + offset for i < h, zeros up to h_pad.
template <class Tag>
HWY_INLINE int64_t GammaPrimeT(const char* w, float offset, float* g, int64_t h) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const VF off = hn::Set(df, offset);
  int64_t i = 0;
  for (; i + n <= h; i += n) hn::Store(hn::Add(InputLoader<Tag>::Load(w, i), off), df, g + i);
  return i;
}
// w == nullptr (quant-only): g[i] = 1.
inline HWY_NOINLINE void GammaPrime(DType w_type, const char* w, float offset, float* g, int64_t h, int64_t h_pad) {
  int64_t i = 0;
  if (w == nullptr) {
    for (; i < h; ++i) g[i] = 1.0f;
  } else {
    if (w_type == DType::kBF16) i = GammaPrimeT<BF16Tag>(w, offset, g, h);
    else if (w_type == DType::kF32) i = GammaPrimeT<float>(w, offset, g, h);
    else if (w_type == DType::kF16) i = GammaPrimeT<F16Tag>(w, offset, g, h);
    for (; i < h; ++i) g[i] = math::add_rn(decode(w_type, load_code(w_type, w, i)), offset);
  }
  for (; i < h_pad; ++i) g[i] = 0.0f;
}

// gamma' of the call for this thread (Scratch slot 0), padded with zeros to a whole vector: made
// once per call (call_id: unique per call, never 0), however many row blocks of the call the
// thread runs (the weights cannot change during a call). w == nullptr: quant-only, gamma' = 1,
// which with inv = 1 leaves y = x bit for bit. finite (where asked): whether every gamma' is
// finite, likewise found once per call.
inline const float* CallGamma(DType w_type, const char* w, float offset, int64_t h, uint64_t call_id,
                              bool* finite = nullptr) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const int64_t h_pad = (h + n - 1) / n * n;
  thread_local uint64_t gamma_call = 0, finite_call = 0;
  thread_local bool gamma_finite = true;
  float* g = Scratch(0, size_t(h_pad));
  if (gamma_call != call_id) {
    GammaPrime(w_type, w, offset, g, h, h_pad);
    gamma_call = call_id;
  }
  if (finite != nullptr) {
    if (finite_call != call_id) {
      VI m = hn::Zero(DI());
      for (int64_t i = 0; i < h_pad; i += n) m = AbsMaxAcc(m, hn::Load(df, g + i));
      gamma_finite = hn::AllTrue(df, hn::RebindMask(df, LtS(hn::BitCast(DU(), m), math::kF32InfBits)));
      finite_call = call_id;
    }
    *finite = gamma_finite;
  }
  return g;
}

}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#endif  // FUSEDNORM_CPU_ROWS_INL_H_
