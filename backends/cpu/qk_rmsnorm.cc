// Compiled once per Highway target (foreach_target.h re-includes this file), then once more
// with HWY_ONCE for the dispatch table and the oneTBB driver.
// qk_rmsnorm on the CPU (docs/numerics.md §5): one row function for stats, apply and the fused
// form. Each side (q, k) of a row is a run of RMS groups (the whole row, or each head): per group
// the canonical sum of squares (rows-inl.h SumSquares) or the caller's statistic, inv_rms from the
// shared math, then out = rn((x * inv) * g') in one pass (FP8 outputs: enc(y * (1 / scale))).

#include <string.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/qk_rmsnorm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "backends/cpu/rows-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fusednorm {
namespace HWY_NAMESPACE {

// The outputs: the input dtype (rounded, NaN canonical), or an FP8 format: enc(y * rcp). Store2
// stores two whole vectors (stream: StoreHint's); Store one vector or the row's tail.
template <class InT>
struct OutSame {
  static constexpr int kBytes = InT::kBytes;
  static HWY_INLINE void Store(VF y, VF, char* out, int64_t i, int64_t end) { (void)InT::RoundStore(y, out, i, end); }
  static HWY_INLINE void Store2(VF y0, VF y1, VF, char* out, int64_t i, bool stream) {
    InT::RoundStore2(y0, y1, out, i, stream);
  }
};
template <class F>
struct OutFp8 {
  static constexpr int kBytes = 1;
  static HWY_INLINE VU Codes(VF y, VF rcp) { return EncodeMini<F, false>(hn::Mul(y, rcp)); }
  static HWY_INLINE void Store(VF y, VF rcp, char* out, int64_t i, int64_t end) {
    const VU code = Codes(y, rcp);
    if (i + int64_t(hn::Lanes(DF())) <= end) return StoreCodes<1>(code, out, i);
    HWY_ALIGN char buf[kMaxLaneBytes];
    StoreCodes<1>(code, buf, 0);
    memcpy(out + i, buf, size_t(end - i));
  }
  static HWY_INLINE void Store2(VF y0, VF y1, VF rcp, char* out, int64_t i, bool stream) {
    const int64_t n = int64_t(hn::Lanes(DF()));
    StoreCodes<1>(Codes(y0, rcp), out, i, stream);
    StoreCodes<1>(Codes(y1, rcp), out, i + n, stream);
  }
};

// `groups` consecutive groups of n_elems elements from x, group h: out = (x * inv[h]) * g as OutT
// stores it (g: a group's gamma', the same for every group; rcp: FP8's 1 / scale; stream:
// StoreHint's). out may be x (in place: each vector is read before it is written). One call for a
// row's heads: the constants are set up once, not once a head.
template <class InT, class OutT>
HWY_NOINLINE void QkApplyGroups(const char* x, const float* g, const float* inv_of, int64_t groups, float rcp_s,
                                char* out, int64_t n_elems, bool stream) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const VF rcp = hn::Set(df, rcp_s);
  for (int64_t h = 0; h < groups; ++h, x += n_elems * InT::kBytes, out += n_elems * OutT::kBytes) {
    const VF inv = hn::Set(df, inv_of[h]);
    int64_t i = 0;
    for (; i + 2 * n <= n_elems; i += 2 * n) {
      const VF y0 = hn::Mul(hn::Mul(InT::Load(x, i), inv), hn::LoadU(df, g + i));
      const VF y1 = hn::Mul(hn::Mul(InT::Load(x, i + n), inv), hn::LoadU(df, g + i + n));
      OutT::Store2(y0, y1, rcp, out, i, stream);
    }
    for (; i < n_elems; i += n)
      OutT::Store(hn::Mul(hn::Mul(InT::LoadUpTo(x, i, n_elems), inv), hn::LoadU(df, g + i)), rcp, out, i, n_elems);
  }
}

// Whether HeadSums serves groups of `group` elements: their P partials fill one, two or four
// vectors (SumSquares's register path) of a fixed-width target.
HWY_INLINE bool HeadSumsFit(int64_t group) {
#if HWY_TARGET == HWY_SCALAR
  (void)group;
  return false;
#else
  const int64_t n = int64_t(hn::Lanes(DF())), p_count = math::reduction_partials(group);
  return n == int64_t(HWY_LANES(float)) && p_count >= n && p_count <= 4 * n && p_count % n == 0;
#endif
}

#if HWY_TARGET != HWY_SCALAR
// The canonical sums of squares of groups [h0, h0 + Lanes) of a row side x, lane k = group h0 + k
// (+0 past `groups`), for groups that HeadSumsFit: each group's steps and the first levels of its
// tree in registers (SumSquaresVector, as SumSquares computes them), then the last log2(Lanes) levels
// of the Lanes groups together (PairTree of PairSums: PairSums(a, b) is the next level of both),
// where SumSquares runs them for one group at a time.
template <class InT>
HWY_INLINE VF HeadSums(const char* x, int64_t group, int64_t groups, int64_t h0) {
  const DF df;
  const int64_t p_count = math::reduction_partials(group);
  const auto leaf = [&](int64_t h) {
    if (h >= groups) return hn::Zero(df);
    return SumSquaresVector<InT, false>(x + h * group * InT::kBytes, nullptr, group, p_count);
  };
  return PairTree<int(HWY_LANES(float))>(leaf, h0, [](VF a, VF b) { return PairSums(a, b); });
}

#endif

// qk_inv_rms of Lanes statistics: the same correctly rounded operations (division, addition,
// square root, division), lane by lane.
HWY_INLINE VF QkInvRms(const QkRmsnormCall& c, const QkSide& s, VF stat) {
  const DF df;
  const DU du;
  const VF mean = c.mean_squares ? stat : hn::Div(stat, hn::Set(df, s.divisor));
  const VF d = hn::Sqrt(hn::Add(mean, hn::Set(df, c.eps)));
  const auto bad = hn::RebindMask(df, GeS(hn::And(hn::BitCast(du, d), hn::Set(du, math::kF32AbsMask)), math::kF32InfBits));
  return hn::IfThenElse(bad, hn::BitCast(df, hn::Set(du, math::kF32CanonicalNaN)), hn::Div(hn::Set(df, 1.0f), d));
}

// One side of rows [r0, r1): j = 0 (q) or 1 (k); g: gamma' of the side's group (padded); stream:
// the outputs with streaming stores (stream_outputs).
template <class InT, class OutT>
void QkSideRows(const QkRmsnormCall& c, const QkSide& s, int j, int64_t r0, int64_t r1, const float* g, bool stream) {
  float* part = Scratch(1, size_t(math::reduction_partials(s.group)));
  const int64_t n = int64_t(hn::Lanes(DF()));
  const int64_t groups = s.width / s.group;
  float* inv = Scratch(2, size_t((groups + n - 1) / n * n));  // per group: the sum, then inv
  const bool head_sums = groups > 1 && HeadSumsFit(s.group);
  const int64_t group_bytes = s.group * InT::kBytes;
  const float rcp = c.kind != QkKind::kStats && c.out_type != c.in_type ? qk_out_rcp(c, j) : 1.0f;
  const int64_t row_bytes = s.width * InT::kBytes;
  for (int64_t r = r0; r < r1; ++r) {
    const char* x = row_ptr(c.lead, s.in, r);
    // The next row into L2 while this one is computed (also past the block: the thread's next
    // block usually starts there). Stats read a row in P-element pieces, which the hardware
    // prefetchers follow poorly, and ask for the whole next row at once (1.9x faster stats, 1.24x
    // fused at 2048 x (4096 + 512) bf16 on one AVX3 core). The fused form asks for it in step
    // with its apply pass instead, a piece before each piece of the pass: a burst of a whole row's
    // prefetches stalls on the core's outstanding misses, which the pass's streaming stores also
    // hold (heads of 128, 2 threads: 1.15-1.2x faster in pieces of 2 to 4 heads than in bursts of
    // 16 heads with the sums, 1.4x than with no prefetch). Apply reads in order and is left alone.
    const char* next = r + 1 < c.lead.rows ? row_ptr(c.lead, s.in, r + 1) : nullptr;
    const auto prefetch_next = [&](int64_t b0, int64_t b1) {
      if (next != nullptr)
        for (int64_t b = b0; b < b1; b += 64) __builtin_prefetch(next + b, 0, 2);
    };
    if (c.kind == QkKind::kStats) {
      prefetch_next(0, row_bytes);
      const uint32_t ss = math::encode_f32<false>(SumSquares<InT, false>(x, nullptr, s.width, part));
      memcpy(row_ptr(c.lead, c.stats, r) + 4 * j, &ss, 4);
      continue;
    }
    char* out = row_ptr(c.lead, s.out, r);
    if (c.kind == QkKind::kApply) {
      float stat;
      memcpy(&stat, row_ptr(c.lead, c.stats, r) + 4 * j, 4);
      const float inv_row = qk_inv_rms(c, s, stat);
      QkApplyGroups<InT, OutT>(x, g, &inv_row, 1, rcp, out, s.width, stream);
      continue;
    }
    // Every group's sum, then every inv (independent divisions and square roots, which
    // pipeline; Lanes at a time for heads), then the apply pass: one head's latency does not wait
    // for another's.
#if HWY_TARGET == HWY_SCALAR
    (void)head_sums;  // HeadSumsFit is false there
#else
    if (head_sums) {
      for (int64_t h = 0; h < groups; h += n) hn::Store(QkInvRms(c, s, HeadSums<InT>(x, s.group, groups, h)), DF(), inv + h);
    } else
#endif
    {
      for (int64_t h = 0; h < groups; ++h) inv[h] = SumSquares<InT, false>(x + h * group_bytes, nullptr, s.group, part);
      for (int64_t h = 0; h < groups; ++h) inv[h] = qk_inv_rms(c, s, inv[h]);
    }
    // The apply pass in pieces: 1024 elements of a whole row, or whole heads of about 1 KiB.
    const int64_t piece_groups = groups == 1 ? 1 : std::max<int64_t>(1, 1024 / group_bytes);
    const int64_t piece = groups == 1 ? 1024 : piece_groups * s.group;
    for (int64_t i = 0; i < s.width; i += piece) {
      const int64_t len = std::min(piece, s.width - i);
      prefetch_next(i * InT::kBytes, (i + len) * InT::kBytes);
      if (groups == 1)
        QkApplyGroups<InT, OutT>(x + i * InT::kBytes, g + i, inv, 1, rcp, out + i * OutT::kBytes, len, stream);
      else
        QkApplyGroups<InT, OutT>(x + i * InT::kBytes, g, inv + i / s.group, len / s.group, rcp, out + i * OutT::kBytes,
                                 s.group, stream);
    }
  }
}

template <class InT>
void QkSideRowsIn(const QkRmsnormCall& c, const QkSide& s, int j, int64_t r0, int64_t r1, const float* g,
                  bool stream) {
  switch (c.kind == QkKind::kStats ? c.in_type : c.out_type) {
    case DType::k_f8e4m3fn: return QkSideRows<InT, OutFp8<math::f8e4m3fn>>(c, s, j, r0, r1, g, stream);
    case DType::k_f8e4m3fnuz: return QkSideRows<InT, OutFp8<math::f8e4m3fnuz>>(c, s, j, r0, r1, g, stream);
    default: return QkSideRows<InT, OutSame<InT>>(c, s, j, r0, r1, g, stream);
  }
}

// gamma' of both sides, once per call and thread (the weights cannot change during a call); the
// buffers are this unit's own, so other operations' per-call caches are never disturbed.
const float* QkGamma(const QkSide& s, int j, float offset, uint64_t call_id) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buf[2];
  thread_local size_t cap[2] = {};
  thread_local uint64_t call[2] = {};
  const int64_t n = int64_t(hn::Lanes(DF()));
  const int64_t pad = (s.group + n - 1) / n * n;
  if (cap[j] < size_t(pad)) {
    buf[j] = hwy::AllocateAligned<float>(size_t(pad));
    cap[j] = size_t(pad);
    call[j] = 0;
  }
  if (call[j] != call_id) {
    GammaPrime(s.w_type, s.weight, offset, buf[j].get(), s.group, pad);
    call[j] = call_id;
  }
  return buf[j].get();
}

void QkRmsnormRows(const QkRmsnormCall& c, int64_t r0, int64_t r1, uint64_t call_id, bool stream) {
  for (int j = 0; j < 2; ++j) {
    const QkSide& s = j == 0 ? c.q : c.k;
    const float* g = c.kind == QkKind::kStats ? nullptr : QkGamma(s, j, c.weight_offset, call_id);
    switch (c.in_type) {
      case DType::kF32: QkSideRowsIn<InF32>(c, s, j, r0, r1, g, stream); break;
      case DType::kF16: QkSideRowsIn<InF16>(c, s, j, r0, r1, g, stream); break;
      default: QkSideRowsIn<InBF16>(c, s, j, r0, r1, g, stream); break;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/parallel.h"

namespace fusednorm {

HWY_EXPORT(QkRmsnormRows);

void cpu_qk_rmsnorm(const QkRmsnormCall& call) {
  // No rows: nothing to do (and a row's width is then unbounded by any allocation: no sums of it).
  if (call.lead.rows == 0) return;
  const uint64_t call_id = next_call_id();
  const int64_t elems = call.lead.rows * (call.q.width + call.k.width);
  const bool stream = call.kind != QkKind::kStats && stream_outputs(elems * (dtype_bits(call.out_type) / 8));
  parallel_rows(call.lead.rows, block_rows(call.lead.rows, call.q.width + call.k.width),
                [&](int64_t r0, int64_t r1) { HWY_DYNAMIC_DISPATCH(QkRmsnormRows)(call, r0, r1, call_id, stream); });
}

}  // namespace fusednorm
#endif  // HWY_ONCE
