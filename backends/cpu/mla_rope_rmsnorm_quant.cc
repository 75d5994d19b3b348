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

template <class InT, class OutT>
void MlaTokensT(const MlaCall& c, int64_t t0, int64_t t1, const float* g) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df)), l = c.rank, r = c.rope;
  float* part = Scratch(kMlaPartSlot, size_t(math::reduction_partials(l)));
  float* rot = Scratch(kMlaRotSlot, size_t((r + n - 1) / n * n));
  const VF ks = hn::Set(df, mla_k_scale(c));
  const float l_f = math::length_f32(l);
  for (int64_t t = t0; t < t1; ++t) {
    MlaSlot s;
    if (mla_locate(c, t, &s) != MlaLocate::kOk) continue;  // validated on the CPU: never
    const char* cs = c.cos_sin + s.pos * c.cs_stride;
    for (int64_t h = 0; h < c.heads; ++h) {
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
      StoreCodesUpTo<OutT::kBytes>(OutT::Encode(hn::Div(y, ks)), dst, i, l);
    }
    Rotate<InT>(c, kv + l * InT::kBytes, cs, rot);
    char* dst_rope = dst + l * OutT::kBytes;
    for (int64_t i = 0; i < r; i += n)
      StoreCodesUpTo<OutT::kBytes>(OutT::Encode(hn::Div(hn::LoadU(df, rot + i), ks)), dst_rope, i, r);
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
