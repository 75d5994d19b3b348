// Compiled twice: as CUDA and as HIP (through mla_rope_rmsnorm_quant.cuh). mla_rope_rmsnorm_quant's
// kernel for the common case, the same bytes as the general kernel there:
// - 16-bit input (bf16, f16), interleaved pairs, a cache of the input's dtype or e4m3fn / e4m3fnuz
//   (one instantiation each: every load, conversion and store is straight-line code);
// - every view aligned for its vectors (q units of 16 bytes, kv and weight runs of 4 elements, the
//   cache's runs of 4 codes, 16-byte cos/sin rows);
// - L a whole number of 128-element steps with P = reduction_partials(L) = 128 (L 512 .. 896, e.g.
//   DeepSeek's 512), R / 8 dividing 32 (R 8 .. 256) and Hq · R / 8 q units that fit the block.
// The host picks it from those facts alone (never from the token count: batch invariance).
//
// A block is a token: warp 0 writes its latent row, warps 1 .. Wq rotate its q units (kUnits at
// most a lane, 32 lanes apart; lane l's units share one unit index u = l mod R/8 and so one run of
// 8 cos/sin values). The warps share nothing and meet at no barrier: each locates the token itself
// (mla_locate, every lane the same uniform reads), so no warp waits for another's index chain, and
// a warp's q loads (or latent loads) are in flight while its locate reads are. A token rejected by
// mla_locate is skipped whole by every warp (no q, no cache row), and counted once (warp 0).
//
// The latent row's canonical sum (docs/numerics.md §2) in one warp: lane l owns partials 4l .. 4l+3
// (elements s·128 + 4l + e of steps s < S = L / 128), each summed over the steps in order; the
// tree's first two levels in registers and the other five across lanes (shfl_xor 1 .. 16), the
// general kernel's tree exactly.
#pragma once

#include <stdint.h>

#include "backends/gpu/encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/io.cuh"
#include "backends/gpu/reduce.cuh"
#include "core/call_mla.h"
#include "math/rope_math.h"

namespace fusednorm {
namespace gpu {

constexpr int kMlaFastUnits = 4;      // q units (8 elements) a lane at most
constexpr int kMlaFastSteps = 7;      // L / 128 at most
constexpr int kMlaFastPairs = 4;      // rope pairs of the latent row a lane at most (R <= 256)
constexpr int kMlaFastMaxWarps = 32;  // 1 + Wq

// The fast kernel's shape (host-computed from Hq and R).
struct MlaFastShape {
  int32_t units;       // q units a lane: 1, 2 or 4
  int32_t total;       // Hq · R / 8
  int32_t unit_shift;  // log2(R / 8)
  int32_t q_warps;     // Wq = ceil(total / (32 · units))
};

// Whether the call takes mla_fast_kernel, and its shape (every view's alignment checked by the
// caller, which passes the result as `aligned`).
inline bool mla_fast_shape(const MlaCall& c, bool aligned, MlaFastShape* f) {
  const bool dtypes = (c.in_type == DType::kBF16 || c.in_type == DType::kF16) &&
                      (c.w_type == DType::kF32 || c.w_type == c.in_type) &&
                      (c.cache_type == c.in_type || c.cache_type == DType::k_f8e4m3fn ||
                       c.cache_type == DType::k_f8e4m3fnuz);
  if (!aligned || !dtypes || c.neox || c.rank % 128 != 0 || math::reduction_partials(c.rank) != 128 ||
      c.rope < 8 || c.rope > 256 || c.rope % 8 != 0 || 32 % (c.rope / 8) != 0)
    return false;
  const int64_t total = c.heads * (c.rope / 8);
  const int64_t units = std::min<int64_t>(kMlaFastUnits, std::max<int64_t>(1, (total + 255) / 256));
  const int64_t per = units == 3 ? 4 : units;  // 1, 2 or 4
  const int64_t warps = (total + 32 * per - 1) / (32 * per);
  if (warps + 1 > kMlaFastMaxWarps) return false;
  f->units = int32_t(per);
  f->total = int32_t(total);
  f->unit_shift = __builtin_ctz(uint32_t(c.rope / 8));
  f->q_warps = int32_t(warps);
  return true;
}

// Warps 1 .. Wq: the q units of token t.
template <DType kIn>
__device__ __forceinline__ void mla_fast_q(const MlaCall& c, const MlaFastShape& f, int64_t t, int warp, int lane) {
  using In = InTraits<kIn>;
  const int32_t first = (warp - 1) * 32 * f.units + lane;
  const int32_t u = first & ((1 << f.unit_shift) - 1);  // every unit of the lane (32 is a multiple of R / 8)
  const char* qt = c.q + t * c.q_stride_t + 16 * u;
  uint4 x[kMlaFastUnits];
#pragma unroll
  for (int k = 0; k < kMlaFastUnits; ++k) {
    const int32_t unit = first + 32 * k;
    if (k < f.units && unit < f.total)
      x[k] = FN_LOAD_RO(reinterpret_cast<const uint4*>(qt + (unit >> f.unit_shift) * c.q_stride_h));
  }
  // The token's cos/sin values are read before its page id is checked (both reads in flight
  // together); a rejected token writes nothing either way.
  MlaSlot s;
  if (mla_position(c, t, mla_guess(c, t), &s) != MlaLocate::kOk) return;
  const char* cs = c.cos_sin + s.pos * c.cs_stride;
  float tab[8];
  if (c.cs_type == DType::kF32) {
    const uint4 a = FN_LOAD_RO(reinterpret_cast<const uint4*>(cs) + 2 * u);
    const uint4 b = FN_LOAD_RO(reinterpret_cast<const uint4*>(cs) + 2 * u + 1);
    const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int k = 0; k < 8; ++k) tab[k] = math::float_of(w[k]);
  } else {
    const uint4 a = FN_LOAD_RO(reinterpret_cast<const uint4*>(cs) + u);
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int k = 0; k < 8; ++k) tab[k] = InTraits<DType::kBF16>::get(w, k);
  }
  if (mla_page(c, &s) != MlaLocate::kOk) return;
  char* ot = c.q_out + t * c.qo_stride_t + 16 * u;
#pragma unroll
  for (int k = 0; k < kMlaFastUnits; ++k) {
    const int32_t unit = first + 32 * k;
    if (k >= f.units || unit >= f.total) break;
    const uint32_t w[4] = {x[k].x, x[k].y, x[k].z, x[k].w};
    float v[8];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const math::RopePair r = math::rope_rotate(In::get(w, 2 * p), In::get(w, 2 * p + 1), tab[2 * p], tab[2 * p + 1]);
      v[2 * p] = r.re;
      v[2 * p + 1] = r.im;
    }
    uint32_t o[4];
    encode_words<kIn, 8>(v, o);
    FN_STORE_GLOBAL(reinterpret_cast<uint4*>(ot + (unit >> f.unit_shift) * c.qo_stride_h), make_uint4(o[0], o[1], o[2], o[3]));
  }
}

// Four latent values (already divided by k_scale) as cache codes at element i of the cache row.
template <DType kIn, DType kCache>
__device__ __forceinline__ void mla_fast_store4(char* row, int32_t i, const float v[4]) {
  if constexpr (kCache == kIn) {
    uint32_t o[2];
    encode_words<kIn, 4>(v, o);
    FN_STORE_GLOBAL(reinterpret_cast<uint2*>(row + 2 * i), make_uint2(o[0], o[1]));
  } else {
    FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(row + i), encode4<kCache>(v));
  }
}
// A rotated pair (re at element i, im at i + 1).
template <DType kIn, DType kCache>
__device__ __forceinline__ void mla_fast_store2(char* row, int32_t i, const float v[2]) {
  if constexpr (kCache == kIn) {
    uint32_t o;
    encode_words<kIn, 2>(v, &o);
    FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(row + 2 * i), o);
  } else {
    FN_STORE_GLOBAL(reinterpret_cast<uint16_t*>(row + i), uint16_t(encode2<kCache>(v[0], v[1])));
  }
}

// Warp 0: token t's latent row into its cache slot.
template <DType kIn, DType kCache>
__device__ __forceinline__ void mla_fast_kv(const MlaCall& c, int64_t t, int lane) {
  using In = InTraits<kIn>;
  const int32_t L = int32_t(c.rank), S = L >> 7, pairs = int32_t(c.rope) / 2;
  const char* x = c.kv + t * c.kv_stride;
  uint2 raw[kMlaFastSteps];
#pragma unroll
  for (int s = 0; s < kMlaFastSteps; ++s)
    if (s < S) raw[s] = FN_LOAD_RO(reinterpret_cast<const uint2*>(x + 2 * (s * 128 + 4 * lane)));
  uint32_t rp[kMlaFastPairs];
#pragma unroll
  for (int m = 0; m < kMlaFastPairs; ++m) {
    const int32_t j = lane + 32 * m;
    if (j < pairs) rp[m] = FN_LOAD_RO(reinterpret_cast<const uint32_t*>(x + 2 * (L + 2 * j)));
  }
  const int wb = c.w_type == DType::kF32 ? 4 : 2;
  for (int32_t b = lane * 128; b < L * wb; b += 32 * 128) gpu_prefetch_l1(c.weight + b);
  const float ks = mla_k_scale(c);
  // The position, then the cos/sin values of the lane's pairs and the page id, read together.
  MlaSlot slot;
  bool ok = mla_position(c, t, mla_guess(c, t), &slot) == MlaLocate::kOk;
  float cv[kMlaFastPairs], sv[kMlaFastPairs];
  if (ok) {
    const char* cs = c.cos_sin + slot.pos * c.cs_stride;
#pragma unroll
    for (int m = 0; m < kMlaFastPairs; ++m) {
      const int32_t j = lane + 32 * m;
      if (j >= pairs) break;
      if (c.cs_type == DType::kF32) {
        const uint2 a = FN_LOAD_RO(reinterpret_cast<const uint2*>(cs + 8 * j));
        cv[m] = math::float_of(a.x), sv[m] = math::float_of(a.y);
      } else {
        const uint32_t a = FN_LOAD_RO(reinterpret_cast<const uint32_t*>(cs + 4 * j));
        cv[m] = InTraits<DType::kBF16>::get(&a, 0), sv[m] = InTraits<DType::kBF16>::get(&a, 1);
      }
    }
  }
  ok = ok && mla_page(c, &slot) == MlaLocate::kOk;
  if (!ok) {
    if (lane == 0 && c.invalid_tokens != nullptr) atomicAdd(c.invalid_tokens, 1);
    return;
  }
  // The canonical sum: partial 4l + e over the steps in order, then the tree.
  float part[4];
#pragma unroll
  for (int s = 0; s < kMlaFastSteps; ++s) {
    if (s >= S) break;
    const uint32_t w[2] = {raw[s].x, raw[s].y};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float v = In::get(w, e), q = math::mul_rn(v, v);
      part[e] = s == 0 ? q : math::add_rn(part[e], q);
    }
  }
  float ss = math::add_rn(math::add_rn(part[0], part[1]), math::add_rn(part[2], part[3]));
  ss = warp_reduce<32>(ss, [](float a, float b) { return math::add_rn(a, b); });
  const float inv = math::inv_rms(ss, math::length_f32(c.rank), c.eps);
  char* row = mla_cache_row(c, slot);
#pragma unroll
  for (int s = 0; s < kMlaFastSteps; ++s) {
    if (s >= S) break;
    const int32_t i = s * 128 + 4 * lane;
    float g[4];
    if (c.w_type == DType::kF32) {
      const uint4 a = FN_LOAD_RO(reinterpret_cast<const uint4*>(c.weight + 4 * i));
      g[0] = math::float_of(a.x), g[1] = math::float_of(a.y), g[2] = math::float_of(a.z), g[3] = math::float_of(a.w);
    } else {
      const uint2 a = FN_LOAD_RO(reinterpret_cast<const uint2*>(c.weight + 2 * i));
      const uint32_t w[2] = {a.x, a.y};
#pragma unroll
      for (int e = 0; e < 4; ++e) g[e] = In::get(w, e);  // the weight's dtype is kIn here
    }
    const uint32_t w[2] = {raw[s].x, raw[s].y};
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      v[e] = math::norm_apply(In::get(w, e), inv, math::add_rn(g[e], c.weight_offset));
      if (ks != 1.0f) v[e] = math::div_rn(v[e], ks);
    }
    mla_fast_store4<kIn, kCache>(row, i, v);
  }
#pragma unroll
  for (int m = 0; m < kMlaFastPairs; ++m) {
    const int32_t j = lane + 32 * m;
    if (j >= pairs) break;
    const math::RopePair r = math::rope_rotate(In::get(&rp[m], 0), In::get(&rp[m], 1), cv[m], sv[m]);
    float v[2] = {r.re, r.im};
    if (ks != 1.0f) v[0] = math::div_rn(v[0], ks), v[1] = math::div_rn(v[1], ks);
    mla_fast_store2<kIn, kCache>(row, L + 2 * j, v);
  }
}

#ifndef FN_MLA_FAST_REGS
#define FN_MLA_FAST_REGS 64
#endif
template <DType kIn, DType kCache>
__global__ void FN_KERNEL_BOUNDS(kMlaFastMaxWarps * 32, FN_MLA_FAST_REGS)
    mla_fast_kernel(FN_GRID_CONSTANT const MlaCall c, const MlaFastShape f) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int64_t t = int64_t(blockIdx.x);
  gpu_wait_for_previous_grid();
  gpu_allow_next_grid();
  if (warp == 0) mla_fast_kv<kIn, kCache>(c, t, lane);
  else mla_fast_q<kIn>(c, f, t, warp, lane);
}

}  // namespace gpu
}  // namespace fusednorm
