// Compiled twice: as CUDA and as HIP (through mla_rope_rmsnorm_quant.cuh). mla_rope_rmsnorm_quant's
// kernel for the common case, the same bytes as the general kernel there:
// - 16-bit input (bf16, f16), interleaved pairs, a cache of the input's dtype or e4m3fn / e4m3fnuz
//   (one instantiation each: every load, conversion and store is straight-line code);
// - every view aligned for its vectors (q units of 16 bytes, kv and weight runs of 4 elements, the
//   cache's runs of 4 codes, 16-byte cos/sin rows);
// - L = 512 (DeepSeek-V2/V3, Kimi-K2: 128 partials, 4 steps), R of 8, 16, 32 or 64 (a rope pair a
//   lane at most; R / 8 divides 32) and Hq · R / 8 q units that fit the block.
// The host picks it from those facts alone (never from the token count: batch invariance).
//
// A token has 1 + Wq warp roles: role 0 writes its latent row, roles 1 .. Wq rotate its q units
// (kMlaFastUnits at most a lane, 32 lanes apart; lane l's units share one unit index u = l mod R/8
// and so one run of 8 cos/sin values); the roles are spread over blocks of a few warps
// (MlaFastShape). The warps share nothing and meet at no barrier: each locates the token itself
// (mla_position, mla_page_read / mla_page_check; every lane the same uniform reads), so no warp
// waits for another's index chain, and a warp's q loads (or latent loads) are in flight while its
// locate reads are. A token those reject is skipped whole by every warp (no q, no cache row), and
// counted once (role 0).
//
// The latent row's canonical sum (docs/numerics.md §2) in one warp: lane l owns partials 4l .. 4l+3
// (elements s·128 + 4l + e of the steps s < 4), each summed over the steps in order; the
// tree's first two levels in registers and the other five across lanes (shfl_xor 1 .. 16), the
// general kernel's tree exactly.
#pragma once

#include <stdint.h>

#include "backends/gpu/encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/io.cuh"
#include "backends/gpu/mla_table.cuh"
#include "backends/gpu/plan.h"
#include "backends/gpu/reduce.cuh"
#include "core/call_mla.h"
#include "math/rope_math.h"

namespace fusednorm {
namespace gpu {

// The tuning, measured on an H200 (Hq 128, bf16 cache; docs/performance.md): at most 4 q units a
// lane (2: T 4096 44.0 against 39.6 us, T 1 2.65 against 2.76 us), blocks of 3 warps (a token's
// 9 warps in one block: 43.0 us at T 4096; blocks of 1 warp: 47.0 us; of 2: as 3), 56 registers
// (48: 39.7-40.2 us; 40 spills, 42.9 us; 64: 40.5 us).
constexpr int kMlaFastUnits = 4;         // q units (8 elements) a lane at most
constexpr int kMlaFastBlockWarps = 3;    // warps a block (fewer where a token has fewer roles)
constexpr int kMlaFastRegisters = 56;    // a thread
constexpr int kMlaFastSteps = 4;         // L / 128: L = 512
constexpr int kMlaFastMaxWarps = 32;     // 1 + Wq

// The fast kernel's shape (host-computed from Hq and R). A token has 1 + Wq warp roles (role 0 its
// latent row, role w its q warp w), spread over `blocks` consecutive blocks of `warps` warps (role
// = block of the token · warps + warp; roles past Wq idle): blocks of a few warps, so that more
// tokens' warps are resident at once than with a token's whole block, and a short call's warps
// spread over several multiprocessors.
struct MlaFastShape {
  int32_t units;       // q units a lane: 1, 2 or 4
  int32_t total;       // Hq · R / 8
  int32_t unit_shift;  // log2(R / 8)
  int32_t q_warps;     // Wq = ceil(total / (32 · units))
  int32_t warps;       // warps a block
  uint32_t blocks;     // blocks a token
  DivU32 blocks_div;   // division by blocks
};

// Whether the call takes mla_fast_kernel, and its shape (every view's alignment checked by the
// caller, which passes the result as `aligned`).
inline bool mla_fast_shape(const MlaCall& c, bool aligned, MlaFastShape* f) {
  const bool dtypes = (c.in_type == DType::kBF16 || c.in_type == DType::kF16) &&
                      (c.w_type == DType::kF32 || c.w_type == c.in_type) &&
                      (c.cache_type == c.in_type || c.cache_type == DType::k_f8e4m3fn ||
                       c.cache_type == DType::k_f8e4m3fnuz);
  if (!aligned || !dtypes || c.neox || c.rank != 128 * kMlaFastSteps || c.rope < 8 || c.rope > 64 ||
      c.rope % 8 != 0 || 32 % (c.rope / 8) != 0)
    return false;
  const int64_t total = c.heads * (c.rope / 8);
  const int64_t units = std::min<int64_t>(kMlaFastUnits, std::max<int64_t>(1, (total + 255) / 256));
  const int64_t per = units == 3 ? 4 : units;  // 1, 2 or 4
  const int64_t q_warps = (total + 32 * per - 1) / (32 * per);
  if (q_warps + 1 > kMlaFastMaxWarps) return false;
  const int32_t roles = int32_t(q_warps) + 1;
  const int32_t w = std::min<int32_t>(roles, kMlaFastBlockWarps);
  f->units = int32_t(per);
  f->total = int32_t(total);
  f->unit_shift = __builtin_ctz(uint32_t(c.rope / 8));
  f->q_warps = int32_t(q_warps);
  f->warps = w;
  f->blocks = uint32_t((roles + w - 1) / w);
  f->blocks_div = DivU32::of(f->blocks);
  return true;
}

// Warps 1 .. Wq: the q units of token t. The token's cos/sin values and its page id are read
// together, the units rotated and encoded while the page id is on its way, and stored once it
// is checked (a rejected token writes nothing).
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
    x[k] = make_uint4(0, 0, 0, 0);
    if (k < f.units && unit < f.total)
      x[k] = FN_LOAD_RO(reinterpret_cast<const uint4*>(qt + (unit >> f.unit_shift) * c.q_stride_h));
  }
  MlaSlot s;
  if (mla_position(c, t, mla_guess(c, t), &s) != MlaLocate::kOk) return;
  float tab[8];
  mla_load_tab<true>(c, kVectors, c.cos_sin + s.pos * c.cs_stride, u, tab);
  const MlaPageRead pr = mla_page_read(c, s);
#pragma unroll
  for (int k = 0; k < kMlaFastUnits; ++k) {
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
    x[k] = make_uint4(o[0], o[1], o[2], o[3]);
  }
  if (mla_page_check(c, pr, &s) != MlaLocate::kOk) return;
  char* ot = c.q_out + t * c.qo_stride_t + 16 * u;
#pragma unroll
  for (int k = 0; k < kMlaFastUnits; ++k) {
    const int32_t unit = first + 32 * k;
    if (k < f.units && unit < f.total)
      FN_STORE_GLOBAL(reinterpret_cast<uint4*>(ot + (unit >> f.unit_shift) * c.qo_stride_h), x[k]);
  }
}

// Codes of four latent values (already divided by k_scale): two words (the input's dtype) or one
// (FP8); and their store at element i of the cache row.
template <DType kIn, DType kCache>
struct MlaFastCodes {
  static constexpr int kWords = kCache == kIn ? 2 : 1;
  static __device__ __forceinline__ void encode(const float v[4], uint32_t o[kWords]) {
    if constexpr (kCache == kIn) encode_words<kIn, 4>(v, o);
    else o[0] = encode4<kCache>(v);
  }
  static __device__ __forceinline__ void store(char* row, int32_t i, const uint32_t o[kWords]) {
    if constexpr (kCache == kIn) FN_STORE_GLOBAL(reinterpret_cast<uint2*>(row + 2 * i), make_uint2(o[0], o[1]));
    else FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(row + i), o[0]);
  }
  // A rotated pair: one word (re in the low half) or two codes.
  static __device__ __forceinline__ uint32_t encode2(const float v[2]) {
    if constexpr (kCache == kIn) {
      uint32_t o;
      encode_words<kIn, 2>(v, &o);
      return o;
    } else {
      return gpu::encode2<kCache>(v[0], v[1]);
    }
  }
  static __device__ __forceinline__ void store2(char* row, int32_t i, uint32_t o) {
    if constexpr (kCache == kIn) FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(row + 2 * i), o);
    else FN_STORE_GLOBAL(reinterpret_cast<uint16_t*>(row + i), uint16_t(o));
  }
};

// Warp 0: token t's latent row into its cache slot. The row's loads and the token's first index
// reads in flight together; then the position, the cos/sin values of the lane's pair and the page
// id read together; the sum, inv and every code computed while they are on their way; the stores
// once the page id is checked.
template <DType kIn, DType kCache>
__device__ __forceinline__ void mla_fast_kv(const MlaCall& c, int64_t t, int lane) {
  using In = InTraits<kIn>;
  using Codes = MlaFastCodes<kIn, kCache>;
  constexpr int S = kMlaFastSteps;
  constexpr int32_t L = 128 * kMlaFastSteps;
  const int32_t j = lane, pairs = int32_t(c.rope) / 2;  // the lane's rope pair: j < pairs
  const char* x = c.kv + t * c.kv_stride;
  uint2 raw[S];
#pragma unroll
  for (int s = 0; s < S; ++s) raw[s] = FN_LOAD_RO(reinterpret_cast<const uint2*>(x + 2 * (s * 128 + 4 * lane)));
  uint32_t rp = 0;
  if (j < pairs) rp = FN_LOAD_RO(reinterpret_cast<const uint32_t*>(x + 2 * (L + 2 * j)));
  // The lane's weights with its row: a load after inv would be one more round trip.
  const bool w32 = c.w_type == DType::kF32;
  uint4 wr[S];
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const int32_t i = s * 128 + 4 * lane;
    if (w32) {
      wr[s] = FN_LOAD_RO(reinterpret_cast<const uint4*>(c.weight + 4 * i));
    } else {
      const uint2 a = FN_LOAD_RO(reinterpret_cast<const uint2*>(c.weight + 2 * i));
      wr[s] = make_uint4(a.x, a.y, 0, 0);
    }
  }
  const float ks = mla_k_scale(c);
  MlaSlot slot;
  const bool pos_ok = mla_position(c, t, mla_guess(c, t), &slot) == MlaLocate::kOk;
  float cv = 0.0f, sv = 0.0f;
  MlaPageRead pr;
  if (pos_ok) {
    const char* cs = c.cos_sin + slot.pos * c.cs_stride;
    if (j < pairs) {
      if (c.cs_type == DType::kF32) {
        const uint2 a = FN_LOAD_RO(reinterpret_cast<const uint2*>(cs + 8 * j));
        cv = math::float_of(a.x), sv = math::float_of(a.y);
      } else {
        const uint32_t a = FN_LOAD_RO(reinterpret_cast<const uint32_t*>(cs + 4 * j));
        cv = InTraits<DType::kBF16>::get(&a, 0), sv = InTraits<DType::kBF16>::get(&a, 1);
      }
    }
    pr = mla_page_read(c, slot);
  }
  // The canonical sum: partial 4l + e over the steps in order, then the tree.
  float part[4];
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const uint32_t w[2] = {raw[s].x, raw[s].y};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float v = In::get(w, e), q = math::mul_rn(v, v);
      part[e] = s == 0 ? q : math::add_rn(part[e], q);
    }
  }
  float ss = math::add_rn(math::add_rn(part[0], part[1]), math::add_rn(part[2], part[3]));
  ss = warp_reduce<32>(ss, [](float a, float b) { return math::add_rn(a, b); });
  // ss / 512 as ss · 2^-9: the same correctly rounded quotient (subnormal, Inf and NaN included).
  static_assert(L == 512, "the divisor's reciprocal below");
  const float inv = math::inv_rms_of_mean(math::mul_rn(ss, 1.0f / 512.0f), c.eps);
  uint32_t codes[S][Codes::kWords];
#pragma unroll
  for (int s = 0; s < S; ++s) {
    float g[4];
    if (w32) {
      g[0] = math::float_of(wr[s].x), g[1] = math::float_of(wr[s].y);
      g[2] = math::float_of(wr[s].z), g[3] = math::float_of(wr[s].w);
    } else {
      const uint32_t w[2] = {wr[s].x, wr[s].y};
#pragma unroll
      for (int e = 0; e < 4; ++e) g[e] = In::get(w, e);  // the weight's dtype is kIn here
    }
    const uint32_t w[2] = {raw[s].x, raw[s].y};
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      v[e] = math::norm_apply(In::get(w, e), inv, math::add_rn(g[e], c.weight_offset));
    }
    mla_scale_n<4>(v, ks);
    Codes::encode(v, codes[s]);
  }
  const math::RopePair r = math::rope_rotate(In::get(&rp, 0), In::get(&rp, 1), cv, sv);
  float rv[2] = {r.re, r.im};
  mla_scale_n<2>(rv, ks);
  const uint32_t rcode = Codes::encode2(rv);
  if (!pos_ok || mla_page_check(c, pr, &slot) != MlaLocate::kOk) {
    if (lane == 0 && c.invalid_tokens != nullptr) atomicAdd(c.invalid_tokens, 1);
    return;
  }
  char* row = mla_cache_row(c, slot);
#pragma unroll
  for (int s = 0; s < S; ++s) Codes::store(row, s * 128 + 4 * lane, codes[s]);
  if (j < pairs) Codes::store2(row, L + 2 * j, rcode);
}

template <DType kIn, DType kCache>
__global__ void FN_KERNEL_BOUNDS(kMlaFastMaxWarps * 32, kMlaFastRegisters)
    mla_fast_kernel(FN_GRID_CONSTANT const MlaCall c, const MlaFastShape f) {
  const uint32_t token = f.blocks_div.div(blockIdx.x);
  const int role = int(blockIdx.x - token * f.blocks) * f.warps + int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  gpu_wait_for_previous_grid();
  gpu_allow_next_grid();
  if (role == 0) mla_fast_kv<kIn, kCache>(c, int64_t(token), lane);
  else if (role <= f.q_warps) mla_fast_q<kIn>(c, f, int64_t(token), role, lane);
}

}  // namespace gpu
}  // namespace fusednorm
