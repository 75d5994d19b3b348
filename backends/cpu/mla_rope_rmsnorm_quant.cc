// Compiled once per Highway target (foreach_target.h re-includes this file), then once more
// with HWY_ONCE for the dispatch table and the oneTBB driver.
// mla_rope_rmsnorm_quant on the CPU: per token, its slot (core/call_mla.h), the rotation of each q
// head, then the latent row: the canonical sum of squares (rows-inl.h), y = (x * inv) * g', the
// rotation of its rope part, and both encoded (v / k_scale) into the cache row.

#include <string.h>

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/mla_rope_rmsnorm_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "backends/cpu/rows-inl.h"
#include "core/call_mla.h"
#include "hwy/highway.h"
#include "math/rope_math.h"

HWY_BEFORE_NAMESPACE();
namespace fusednorm {
namespace HWY_NAMESPACE {

// Scratch slots of this operation (rows-inl.h's Scratch; rmsnorm_quant uses 0 to 4): gamma' of
// the call, the sum of squares' partials, one rotated rope vector.
constexpr size_t kMlaGammaSlot = 5, kMlaPartSlot = 6, kMlaRotSlot = 7;

// Cache element encoders (NaN canonical): FP8 (saturating), bf16, f16, f32.
template <class F>
struct CacheMini {
  static constexpr int kBytes = 1;
  static HWY_INLINE VU Encode(VF v) { return EncodeMini<F, false>(v); }
};
struct CacheBF16 {
  static constexpr int kBytes = 2;
  static HWY_INLINE VU Encode(VF v) { return EncodeBF16<false>(v); }
};
struct CacheF16 {
  static constexpr int kBytes = 2;
  static HWY_INLINE VU Encode(VF v) { return EncodeF16<false>(v); }
};
struct CacheF32 {
  static constexpr int kBytes = 4;
  static HWY_INLINE VU Encode(VF v) { return EncodeF32<false>(v); }
};

// Codes of lanes [i, end) to row (end - i <= Lanes).
template <int kBytes>
HWY_INLINE void StoreCodesUpTo(VU codes, char* row, int64_t i, int64_t end) {
  if (i + int64_t(hn::Lanes(DF())) <= end) {
    StoreCodes<kBytes>(codes, row, i);
    return;
  }
  HWY_ALIGN char buf[kMaxLaneBytes];
  StoreCodes<kBytes>(codes, buf, 0);
  memcpy(row + i * kBytes, buf, size_t((end - i) * kBytes));
}

// Lanes of the cos/sin table row from element i.
HWY_INLINE VF LoadCs(DType cs_type, const char* cs, int64_t i) {
  if (cs_type == DType::kF32) return InputLoader<float>::Load(cs, i);
  return InputLoader<BF16Tag>::Load(cs, i);
}

// The R elements of rope vector `x` rotated by table row `cs` into rot[0, R) (f32), every element
// read before any is written by the caller (q may be rotated in place). math::rope_rotate lane by
// lane: re' = re*c + -(im*s), im' = re*s + im*c (the sum's operands commute exactly; NaN is
// canonical after encoding).
template <class InT>
HWY_NOINLINE void Rotate(const MlaCall& c, const char* x, const char* cs, float* rot) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df)), r = c.rope, half = r / 2;
#if HWY_TARGET != HWY_SCALAR
  if (!c.neox && r % n == 0) {
    const DU du;
    // Even lanes (re) get -(im*s): the sign bit in even lanes.
    const VU even_sign = hn::ShiftLeft<31>(hn::AndNot(hn::Iota(du, 0), hn::Set(du, 1u)));
    for (int64_t i = 0; i < r; i += n) {
      const VF v = InT::Load(x, i), t = LoadCs(c.cs_type, cs, i);
      const VF cos = hn::DupEven(t), sin = hn::DupOdd(t);
      const VF cross = hn::BitCast(df, hn::Xor(hn::BitCast(du, hn::Mul(hn::Reverse2(df, v), sin)), even_sign));
      hn::Store(hn::Add(hn::Mul(v, cos), cross), df, rot + i);
    }
    return;
  }
  if (c.neox && half % n == 0) {
    for (int64_t j = 0; j < half; j += n) {
      const VF re = InT::Load(x, j), im = InT::Load(x, j + half);
      const VF t0 = LoadCs(c.cs_type, cs, 2 * j), t1 = LoadCs(c.cs_type, cs, 2 * j + n);
      const VF cos = hn::ConcatEven(df, t1, t0), sin = hn::ConcatOdd(df, t1, t0);
      hn::Store(hn::Add(hn::Mul(re, cos), hn::Neg(hn::Mul(im, sin))), df, rot + j);
      hn::Store(hn::Add(hn::Mul(re, sin), hn::Mul(im, cos)), df, rot + j + half);
    }
    return;
  }
#endif
  // Vectors wider than the pairs' run (R < 2 * Lanes or R/2 < Lanes): the shared math, one pair
  // at a time.
  (void)n;
  (void)half;
  const bool neox = c.neox != 0;
  for (int64_t j = 0; j < r / 2; ++j) {
    const int64_t i0 = math::rope_re_index(j, r, neox), i1 = math::rope_im_index(j, r, neox);
    const math::RopePair p =
        math::rope_rotate(decode(InT::kDType, load_code(InT::kDType, x, i0)),
                          decode(InT::kDType, load_code(InT::kDType, x, i1)), decode(c.cs_type, load_code(c.cs_type, cs, 2 * j)),
                          decode(c.cs_type, load_code(c.cs_type, cs, 2 * j + 1)));
    rot[i0] = p.re;
    rot[i1] = p.im;
  }
}

// The q rows are most of the bytes a call moves, read and written once: the hardware prefetcher
// alone leaves a thread's loads waiting on memory (in RotateQWords about half of the samples of
// `perf record` sat on the first load). QAhead asks for the q row of the head kMlaPrefetchBytes
// of q rows later in the call's order (heads of a token, then the next token), one head a step,
// into L2 (prefetcht1: with q a strided view of [T, Hq, 192], 5.6-5.9 ms at Hq 128, T 4096, 2
// threads, against 6.7-7.1 ms into L1 and 11-23 ms non-temporal; compact q about the same).
constexpr int64_t kMlaPrefetchBytes = 16384;
class QAhead {
 public:
  HWY_INLINE QAhead(const MlaCall& c, int64_t token, int in_bytes)
      : q_(c.q), st_(c.q_stride_t), sh_(c.q_stride_h), heads_(c.heads), tokens_(c.tokens), bytes_(c.rope * in_bytes) {
    const int64_t ahead = std::max<int64_t>(1, kMlaPrefetchBytes / bytes_);
    t_ = heads_ > 0 ? token + ahead / heads_ : tokens_;  // no heads: nothing to ask for
    h_ = heads_ > 0 ? ahead % heads_ : 0;
    row_ = t_ < tokens_ ? q_ + t_ * st_ + h_ * sh_ : q_;
  }
  // Asks for the next head's row, then moves on a head.
  HWY_INLINE void Step() {
    if (t_ < tokens_) {
      const uintptr_t p = reinterpret_cast<uintptr_t>(row_);
      for (uintptr_t line = p & ~uintptr_t(63); line < p + uintptr_t(bytes_); line += 64)
        __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 2);
    }
    row_ += sh_;
    if (++h_ == heads_) {
      h_ = 0;
      ++t_;
      row_ = t_ < tokens_ ? q_ + t_ * st_ : q_;  // no address past the tensor is formed
    }
  }

 private:
  const char* q_;
  int64_t st_, sh_, heads_, tokens_, bytes_;
  int64_t t_, h_;    // the head Step asks for
  const char* row_;  // its row
};

#if HWY_TARGET != HWY_SCALAR
// Whether RotateQWords serves this call: bf16 q with interleaved pairs, R / 2 a whole number of
// vectors, every head's row (in and out) at a 4-byte boundary.
HWY_INLINE bool QWordsFit(const MlaCall& c) {
  const int64_t n = int64_t(hn::Lanes(DU()));
  const uint64_t any = uint64_t(reinterpret_cast<uintptr_t>(c.q)) | uint64_t(reinterpret_cast<uintptr_t>(c.q_out)) |
                       uint64_t(c.q_stride_t | c.q_stride_h | c.qo_stride_t | c.qo_stride_h);
  return c.in_type == DType::kBF16 && !c.neox && (c.rope / 2) % n == 0 && any % 4 == 0;
}

// EncodeBF16High of a non-NaN v: its bf16 (RNE) in the high half.
HWY_INLINE VU RoundBF16High(VF v) {
  const VU u = hn::BitCast(DU(), v);
  return hn::Add(hn::Add(u, SetU(0x7FFFu)), hn::And(hn::ShiftRight<16>(u), SetU(1)));
}

// Token t's bf16 q heads (QWordsFit) rotated as 32-bit words, a pair a word (re in the low half,
// im in the high half): re and im of Lanes pairs as two f32 vectors (a shift, a mask), the
// rotation on them, both rounded (EncodeBF16High) and put back into words. The products, sums and
// rounding of Rotate + RoundStore (math::rope_rotate lane by lane; re*c - im*s is re*c + -(im*s)
// in IEEE arithmetic), with no lane shuffles and no f32 scratch row. cosp, sinp: the token's cos
// and sin, a pair a lane. A vector of words is read before it is written (q may be rotated in
// place; pairs never cross vectors).
HWY_NOINLINE void RotateQWords(const MlaCall& c, int64_t t, const float* cosp, const float* sinp) {
  const DF df;
  const DU du;
  const int64_t n = int64_t(hn::Lanes(du)), pairs = c.rope / 2;
  const VU hi = SetU(0xFFFF0000u);
  QAhead ahead(c, t, 2);
  const char* q = c.q + t * c.q_stride_t;
  char* q_out = c.q_out + t * c.qo_stride_t;
  const int64_t heads = c.heads, sh = c.q_stride_h, so = c.qo_stride_h;
  for (int64_t h = 0; h < heads; ++h) {
    ahead.Step();
    const uint32_t* x = reinterpret_cast<const uint32_t*>(q + h * sh);
    uint32_t* out = reinterpret_cast<uint32_t*>(q_out + h * so);
    for (int64_t j = 0; j < pairs; j += n) {
      const VU w = hn::LoadU(du, x + j);
      const VF re = hn::BitCast(df, hn::ShiftLeft<16>(w)), im = hn::BitCast(df, hn::And(w, hi));
      const VF cs = hn::LoadU(df, cosp + j), sn = hn::LoadU(df, sinp + j);
      const VF re2 = hn::Sub(hn::Mul(re, cs), hn::Mul(im, sn));
      const VF im2 = hn::Add(hn::Mul(re, sn), hn::Mul(im, cs));
      VU lo_bits = RoundBF16High(re2), hi_bits = RoundBF16High(im2);
      if (HWY_UNLIKELY(!hn::AllFalse(df, hn::IsNaN(hn::Add(re2, im2))))) {  // a NaN in either
        lo_bits = EncodeBF16High(re2);
        hi_bits = EncodeBF16High(im2);
      }
      hn::StoreU(hn::Or(hn::ShiftRight<16>(lo_bits), hn::And(hi_bits, hi)), du, out + j);
    }
  }
}
#endif

template <class InT, class OutT>
void MlaTokensT(const MlaCall& c, int64_t t0, int64_t t1, const float* g) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df)), l = c.rank, r = c.rope;
  float* part = Scratch(kMlaPartSlot, size_t(math::reduction_partials(l)));
  float* rot = Scratch(kMlaRotSlot, size_t((r + n - 1) / n * n));
  // v / k_scale (one correctly rounded division a value, 36 vector divisions a row of 576 at 16
  // lanes): v itself where k_scale is 1, v times the exact reciprocal where it is a power of two
  // (math::pow2_rcp: the same quotient), else the division.
  const float k = mla_k_scale(c), k_rcp = math::pow2_rcp(k);
  const VF ks = hn::Set(df, k), kr = hn::Set(df, k_rcp);
  const auto scaled = [&](VF v) { return k == 1.0f ? v : k_rcp != 0.0f ? hn::Mul(v, kr) : hn::Div(v, ks); };
  const float l_f = math::length_f32(l);
#if HWY_TARGET != HWY_SCALAR
  const bool words = QWordsFit(c);
  float* cosp = rot;  // rot (R floats) is free until the latent row's rotation
  float* sinp = rot + r / 2;
#else
  constexpr bool words = false;
#endif
  for (int64_t t = t0; t < t1; ++t) {
    MlaSlot s;
    if (mla_locate(c, t, &s) != MlaLocate::kOk) continue;  // validated on the CPU: never
    const char* cs = c.cos_sin + s.pos * c.cs_stride;
#if HWY_TARGET != HWY_SCALAR
    if (words) {
      for (int64_t j = 0; j < r / 2; ++j) {
        cosp[j] = decode(c.cs_type, load_code(c.cs_type, cs, 2 * j));
        sinp[j] = decode(c.cs_type, load_code(c.cs_type, cs, 2 * j + 1));
      }
      RotateQWords(c, t, cosp, sinp);
    }
#endif
    QAhead ahead(c, t, InT::kBytes);
    for (int64_t h = 0; h < (words ? 0 : c.heads); ++h) {
      ahead.Step();
      Rotate<InT>(c, c.q + t * c.q_stride_t + h * c.q_stride_h, cs, rot);
      char* out = c.q_out + t * c.qo_stride_t + h * c.qo_stride_h;
      for (int64_t i = 0; i < r; i += n) (void)InT::RoundStore(hn::LoadU(df, rot + i), out, i, r);
    }
    // The latent row: norm of [0, L), rotation of [L, L + R), codes of v / k_scale.
    const char* kv = c.kv + t * c.kv_stride;
    char* dst = mla_cache_row(c, s);
    const VF inv = hn::Set(df, math::inv_rms(SumSquares<InT, false>(kv, nullptr, l, part), l_f, c.eps));
    for (int64_t i = 0; i < l; i += n) {
      const VF y = hn::Mul(hn::Mul(InT::LoadUpTo(kv, i, l), inv), hn::LoadU(df, g + i));
      StoreCodesUpTo<OutT::kBytes>(OutT::Encode(scaled(y)), dst, i, l);
    }
    Rotate<InT>(c, kv + l * InT::kBytes, cs, rot);
    char* dst_rope = dst + l * OutT::kBytes;
    for (int64_t i = 0; i < r; i += n)
      StoreCodesUpTo<OutT::kBytes>(OutT::Encode(scaled(hn::LoadU(df, rot + i))), dst_rope, i, r);
  }
}

template <class InT>
void MlaTokensIn(const MlaCall& c, int64_t t0, int64_t t1, const float* g) {
  switch (c.cache_type) {
#define FN_MINIFLOAT(name, ...)                                                               \
  case DType::k_##name:                                                                       \
    if constexpr (DType::k_##name != DType::k_f4e2m1) MlaTokensT<InT, CacheMini<math::name>>(c, t0, t1, g); \
    return;
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kBF16: return MlaTokensT<InT, CacheBF16>(c, t0, t1, g);
    case DType::kF16: return MlaTokensT<InT, CacheF16>(c, t0, t1, g);
    case DType::kF32: return MlaTokensT<InT, CacheF32>(c, t0, t1, g);
    default: return;  // validation admits no other cache dtype
  }
}

// call_id: unique per call (never 0): a thread decodes gamma' once per call (parallel.h).
void MlaTokens(const MlaCall& c, int64_t t0, int64_t t1, uint64_t call_id) {
  const int64_t n = int64_t(hn::Lanes(DF()));
  const int64_t l_pad = (c.rank + n - 1) / n * n;
  thread_local uint64_t gamma_call = 0;
  float* g = Scratch(kMlaGammaSlot, size_t(l_pad));
  if (gamma_call != call_id) {
    GammaPrime(c.w_type, c.weight, c.weight_offset, g, c.rank, l_pad);
    gamma_call = call_id;
  }
  switch (c.in_type) {
    case DType::kF32: return MlaTokensIn<InF32>(c, t0, t1, g);
    case DType::kF16: return MlaTokensIn<InF16>(c, t0, t1, g);
    default: return MlaTokensIn<InBF16>(c, t0, t1, g);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/parallel.h"

namespace fusednorm {

HWY_EXPORT(MlaTokens);

void cpu_mla_rope_rmsnorm_quant(const MlaCall& call) {
  if (call.tokens == 0) return;
  const uint64_t call_id = next_call_id();
  const int64_t cols = call.heads * call.rope + call.rank + call.rope;  // elements a token touches
  parallel_rows(call.tokens, block_rows(call.tokens, cols),
                [&](int64_t t0, int64_t t1) { HWY_DYNAMIC_DISPATCH(MlaTokens)(call, t0, t1, call_id); });
}

}  // namespace fusednorm
#endif  // HWY_ONCE
