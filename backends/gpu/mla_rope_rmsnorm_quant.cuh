// Compiled twice: as CUDA and as HIP, in a generated unit of its own (FUSEDNORM_GPU_OPS).
// mla_rope_rmsnorm_quant on the GPU: the general kernel (one instantiation per input dtype) and
// the launcher (declared in ops.h, in the table of plugin.cuh), which takes mla_fast.cuh's kernel
// for the calls it serves (16-bit input, L = 512, aligned views: the DeepSeek shapes) and this one
// for every other call.
//
// Grid: one dimension, Q = ceil(Hq * R / 8 / (kMlaThreads * U)) consecutive blocks a token (U = 1
// or kMlaQUnits units of 8 q elements a thread, kMlaThreads apart); the token's first block also
// writes its latent kv row, so no block waits on a row of its own while holding an SM's slot. From
// the call's shapes only, never from the token count: a token's bytes do not depend on the other
// tokens (batch invariance). Launched with programmatic dependent launch (sm_90): the grid waits
// for the previous kernel's memory at its start. Thread 0 of a block locates the token
// (mla_position, then mla_page: core/call_mla.h), which checks every index value it reads, pulls
// the token's cos/sin row into L1 between the two, and hands the slot to the block through shared
// memory at the barrier that also gathers the latent row's sum (one thread's divisions and index
// reads, not every thread's); the token's first block also pulls the weights into L1 before that
// barrier. The latent row's loads and stores branch on the weight and cache dtypes once for a
// thread's batch of elements, not once an element. A token it rejects is skipped whole (no
// q, no cache write), and counted once (by its first block) in invalid_tokens when the caller gave
// it: the kernel never writes outside q/q_out and the cache whatever the indices hold (fusednorm.h,
// "Index values"). The divisions by Q and by R / 8 are DivU32's multiplications (plan.h).
// The latent row's sum of squares is the canonical one (docs/numerics.md §2): thread i owns
// partials [i*pv, i*pv + pv) (pv = max(1, P / kMlaThreads)), each summed over its steps in order,
// then the pairwise tree in registers, across lanes (shfl_xor) and across warps
// (row_reduce_finish); threads past P hold +0 (exact). The rotation is the shared math's; the
// codes are encode.cuh's (hardware conversions proven equal to the shared encoders).
#pragma once

#include <stdint.h>

#include "backends/gpu/encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/host.cuh"
#include "backends/gpu/io.cuh"
#include "backends/gpu/launch.cuh"
#include "backends/gpu/mla_fast.cuh"
#include "backends/gpu/mla_table.cuh"
#include "backends/gpu/ops.h"
#include "backends/gpu/plan.h"
#include "backends/gpu/reduce.cuh"
#include "core/call_mla.h"
#include "math/rope_math.h"

namespace fusednorm {
namespace gpu {

constexpr int kMlaThreads = 256;
constexpr int kMlaQUnits = 4;  // q units of 8 elements a thread
constexpr int kMlaMaxPv = 16;  // P <= 4096 = 16 * kMlaThreads

// Access widths of the call's views (plan.h's Access), from the host.
struct MlaAccess {
  int32_t q, q_out, cs;  // vectors of one unit (8 elements, or two runs of 4 with neox)
  int32_t kv, w, cache;  // elements
  uint32_t q_blocks;     // blocks a token (grid layout above)
  DivU32 q_blocks_div;   // division by q_blocks
  DivU32 units_div;      // division by R / 8 (q units a head)
  int32_t same_unit;     // kMlaThreads is a multiple of R / 8: a thread's q units share their cos/sin
};

// Element i of a row of dtype t as f32.
__device__ __forceinline__ float mla_load(DType t, const char* row, int32_t i, int32_t access) {
  if (t == DType::kF32) return math::float_of(load_elem<4>(row, i, access));
  const uint32_t h = load_elem<2>(row, i, access);
  return t == DType::kBF16 ? math::decode_bf16(h) : math::decode_f16(h);
}

// Elements idx[k] of a row of dtype t as f32 (idx[k] < 0: none, 0), the dtype's branch taken once
// for the kN (a short call runs each of these code paths once: one copy of the loads, not kN).
template <int kN>
__device__ __forceinline__ void mla_load_n(DType t, const char* row, const int32_t idx[kN], int32_t access,
                                           float v[kN]) {
  if (t == DType::kF32) {
#pragma unroll
    for (int k = 0; k < kN; ++k) v[k] = idx[k] >= 0 ? math::float_of(load_elem<4>(row, idx[k], access)) : 0.0f;
  } else if (t == DType::kBF16) {
#pragma unroll
    for (int k = 0; k < kN; ++k) v[k] = idx[k] >= 0 ? math::decode_bf16(load_elem<2>(row, idx[k], access)) : 0.0f;
  } else {
#pragma unroll
    for (int k = 0; k < kN; ++k) v[k] = idx[k] >= 0 ? math::decode_f16(load_elem<2>(row, idx[k], access)) : 0.0f;
  }
}

// The cache's codes of v[k] (v / k_scale already) at elements idx[k] of the cache row (idx[k] < 0:
// none), NaN canonical; FP8 by encode.cuh's encoders (the hardware conversion where the device has
// one, proven equal to the shared math's). One branch on the cache dtype for the kN.
template <int kN>
__device__ __forceinline__ void mla_store_n(const MlaCall& c, char* row, const int32_t idx[kN], const float v[kN],
                                            int32_t access) {
  const auto each = [&](auto store) {
#pragma unroll
    for (int k = 0; k < kN; ++k)
      if (idx[k] >= 0) store(idx[k], v[k]);
  };
  switch (c.cache_type) {
    case DType::kBF16: return each([&](int32_t i, float x) { store_elem<2>(row, i, math::encode_bf16<false>(x), access); });
    case DType::kF16: return each([&](int32_t i, float x) { store_elem<2>(row, i, math::encode_f16<false>(x), access); });
    case DType::kF32: return each([&](int32_t i, float x) { store_elem<4>(row, i, math::encode_f32<false>(x), access); });
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name:         \
    return each([&](int32_t i, float x) { store_elem<1>(row, i, encode1<DType::k_##name>(x), access); });
#include "math/formats.inc"
#undef FN_MINIFLOAT
    default: return;  // validation admits no other cache dtype
  }
}

// A unit of 8 elements of one q head: 4 pairs j = 4u .. 4u+3 and their 8 table values at 8u.
// load() reads the elements (interleaved: 8 at 8u; neox: 4 at 4u, then 4 at R/2 + 4u) and needs
// no index value, so it is issued before the token's slot is known; finish() rotates and stores.
template <DType kIn>
struct QUnit {
  using In = InTraits<kIn>;
  static constexpr int kB = In::kBytes, kHalf = Vec<kB, 4>::kWords;
  uint32_t w[Vec<kB, 8>::kWords];

  __device__ __forceinline__ void load(const MlaCall& c, const MlaAccess& a, const char* x, int32_t u) {
    const int32_t r = int32_t(c.rope);
    if (!c.neox) {
      load_vec<kB, 8>(x, 8 * u, r, a.q, w);
    } else {
      load_vec<kB, 4>(x, 4 * u, r, a.q, w);
      load_vec<kB, 4>(x, r / 2 + 4 * u, r, a.q, w + kHalf);
    }
  }

  // tab: the unit's 8 cos/sin values (mla_load_tab).
  __device__ __forceinline__ void finish(const MlaCall& c, const MlaAccess& a, char* o, const float tab[8],
                                         int32_t u) const {
    const int32_t r = int32_t(c.rope);
    uint32_t out[Vec<kB, 8>::kWords];
    if (!c.neox) {
      float v[8];  // re, im of pair k at 2k, 2k + 1
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const math::RopePair p = math::rope_rotate(In::get(w, 2 * k), In::get(w, 2 * k + 1), tab[2 * k], tab[2 * k + 1]);
        v[2 * k] = p.re;
        v[2 * k + 1] = p.im;
      }
      encode_words<kIn, 8>(v, out);
      store_vec<kB, 8>(o, 8 * u, r, a.q_out, out);
      return;
    }
    float re[4], im[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const math::RopePair p = math::rope_rotate(In::get(w, k), In::get(w + kHalf, k), tab[2 * k], tab[2 * k + 1]);
      re[k] = p.re;
      im[k] = p.im;
    }
    encode_words<kIn, 4>(re, out);
    encode_words<kIn, 4>(im, out + kHalf);
    store_vec<kB, 4>(o, 4 * u, r, a.q_out, out);
    store_vec<kB, 4>(o, r / 2 + 4 * u, r, a.q_out, out + kHalf);
  }
};

// A token's latent row, by a whole block (the token's first q block): the canonical sum of
// squares (thread i owns partials [i*pv, i*pv + pv), pv = max(1, P / kMlaThreads); each summed
// over its steps in order), then, once inv and the token's slot are known, the codes of
// norm(x) / k_scale of [0, L) and of the rotation of [L, L + R).
template <DType kIn>
struct MlaKvRow {
  static constexpr int kSteps = 8;  // a step's loads issued together where pv = 1 (S <= 8 there)
  static constexpr int kBatch = 4;  // latent elements a thread loads together before their stores

  // This thread's partial sum of squares, its 1 .. pv partials combined pairwise.
  static __device__ __forceinline__ float partial(const MlaCall& c, const MlaAccess& a, const char* x) {
    const int32_t l = int32_t(c.rank), tid = int32_t(threadIdx.x);
    const int32_t p_count = int32_t(math::reduction_partials(l));
    const int32_t pv = p_count > kMlaThreads ? p_count / kMlaThreads : 1;
    if (pv == 1) {
      // One partial (L < 2048): its steps' loads at once, summed in order (+0 past L: exact).
      float v[kSteps];
      const auto load = [&](auto access) {
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          const int32_t i = tid + s * p_count;
          v[s] = tid < p_count && i < l ? mla_load(kIn, x, i, decltype(access)::value) : 0.0f;
        }
      };
      if (a.kv != kBytesOnly) load(IntConstant<kElements>());
      else load(IntConstant<kBytesOnly>());
      float sum = 0.0f;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) sum = math::add_rn(sum, math::mul_rn(v[s], v[s]));
      return sum;
    }
    float part[kMlaMaxPv];
#pragma unroll
    for (int k = 0; k < kMlaMaxPv; ++k) {
      part[k] = 0.0f;
      const int32_t p = tid * pv + k;
      if (k < pv && p < p_count)
        for (int32_t i = p; i < l; i += p_count) {
          const float v = mla_load(kIn, x, i, a.kv);
          part[k] = math::add_rn(part[k], math::mul_rn(v, v));
        }
    }
#pragma unroll
    for (int n = kMlaMaxPv; n > 1; n /= 2)
#pragma unroll
      for (int j = 0; j < n / 2; ++j) part[j] = math::add_rn(part[2 * j], part[2 * j + 1]);
    return part[0];
  }

  static __device__ __forceinline__ void write(const MlaCall& c, const MlaAccess& a, const char* x, float inv,
                                               char* dst, const char* cs) {
    const int32_t l = int32_t(c.rank), r = int32_t(c.rope), tid = int32_t(threadIdx.x);
    const float ks = mla_k_scale(c);
    for (int32_t i0 = tid; i0 < l; i0 += kMlaThreads * kBatch) {
      int32_t idx[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) idx[k] = i0 + k * kMlaThreads < l ? i0 + k * kMlaThreads : -1;
      float xv[kBatch], wv[kBatch];
      const auto load = [&](auto access) {
        mla_load_n<kBatch>(kIn, x, idx, decltype(access)::value, xv);
        mla_load_n<kBatch>(c.w_type, c.weight, idx, decltype(access)::value, wv);
      };
      if (a.kv != kBytesOnly && a.w != kBytesOnly) load(IntConstant<kElements>());
      else load(IntConstant<kBytesOnly>());
#pragma unroll
      for (int k = 0; k < kBatch; ++k) xv[k] = math::norm_apply(xv[k], inv, math::add_rn(wv[k], c.weight_offset));
      mla_scale_n<kBatch>(xv, ks);
      mla_store_n<kBatch>(c, dst, idx, xv, a.cache);
    }
    const bool neox = c.neox != 0;
    for (int32_t j = tid; j < r / 2; j += kMlaThreads) {
      const int32_t idx[2] = {l + int32_t(math::rope_re_index(j, r, neox)), l + int32_t(math::rope_im_index(j, r, neox))};
      const int32_t tdx[2] = {2 * j, 2 * j + 1};
      float xv[2], tab[2];
      mla_load_n<2>(kIn, x, idx, a.kv, xv);
      mla_load_n<2>(c.cs_type, cs, tdx, a.cs, tab);
      const math::RopePair p = math::rope_rotate(xv[0], xv[1], tab[0], tab[1]);
      float v[2] = {p.re, p.im};
      mla_scale_n<2>(v, ks);
      mla_store_n<2>(c, dst, idx, v, a.cache);
    }
  }
};

// Registers: 48 a thread for 2-byte inputs (5 blocks a multiprocessor; without the cap ptxas took
// 64), 72 for f32 (its q units take twice the registers; 64 spilled).
template <DType kIn, int kUnits>
__global__ void FN_KERNEL_BOUNDS(kMlaThreads, kIn == DType::kF32 ? 72 : 48)
    mla_rope_rmsnorm_quant_kernel(FN_GRID_CONSTANT const MlaCall c, const MlaAccess a) {
  constexpr int kWarp = kGpuWarp;
  __shared__ __align__(16) float red[kMlaThreads / kWarp];
  __shared__ int64_t where[2];
  __shared__ int32_t where_ok;
  const uint32_t token = a.q_blocks_div.div(blockIdx.x), qpart = blockIdx.x - token * a.q_blocks;
  const int64_t t = int64_t(token);
  const bool kv = qpart == 0;  // the token's first q block writes its latent row too
  // Programmatic dependent launch (sm_90): every read below waits for the previous kernel's memory;
  // the next kernel may start its launch at once.
  gpu_wait_for_previous_grid();
  gpu_allow_next_grid();
  // kUnits units a thread, kMlaThreads apart: their loads, the latent row's and the token's first
  // index reads are in flight together.
  const int32_t units = int32_t(c.rope / 8), total = int32_t(c.heads) * units;
  const int32_t first = int32_t(qpart) * kMlaThreads * kUnits + int32_t(threadIdx.x);
  QUnit<kIn> q[kUnits];
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const int32_t unit = first + k * kMlaThreads;
    if (unit >= total) break;
    const int32_t h = int32_t(a.units_div.div(uint32_t(unit))), u = unit - h * units;
    q[k].load(c, a, c.q + t * c.q_stride_t + h * c.q_stride_h, u);
  }
  MlaGuess g;
  if (threadIdx.x == 0) g = mla_guess(c, t);
  const char* x = c.kv + t * c.kv_stride;
  // The weights write() reads after the barrier: into L1 now, a line a thread (no register held
  // across the barrier).
  if (kv)
    for (int64_t b = int64_t(threadIdx.x) * 128; b < c.rank * (c.w_type == DType::kF32 ? 4 : 2); b += kMlaThreads * 128)
      gpu_prefetch_l1(c.weight + b);
  const float part = kv ? MlaKvRow<kIn>::partial(c, a, x) : 0.0f;
  // Thread 0 locates the token (the first block counts a rejected one) before the barrier that also
  // gathers the warps' sums (row_reduce_finish: every warp then combines them in the canonical
  // order and evaluates inv).
  if (threadIdx.x == 0) {
    MlaSlot s;
    bool ok = mla_position(c, t, g, &s) == MlaLocate::kOk;
    if (ok)  // the token's cos/sin row into L1 while the page table is read
      for (int64_t b = 0; b < c.rope * (c.cs_type == DType::kF32 ? 4 : 2); b += 128)
        gpu_prefetch_l1(c.cos_sin + s.pos * c.cs_stride + b);
    ok = ok && mla_page(c, &s) == MlaLocate::kOk;
    where_ok = ok ? 1 : 0;
    where[0] = s.pos;
    where[1] = mla_cache_row(c, s) - c.cache;
    if (!ok && kv && c.invalid_tokens != nullptr) atomicAdd(c.invalid_tokens, 1);
  }
  float inv = 0.0f;
  if (kv) {
    const float l_f = math::length_f32(c.rank), eps = c.eps;
    inv = row_reduce_finish<kWarp, false, true>(
        part, int32_t(threadIdx.x), kMlaThreads, 0, red, [](float u, float v) { return math::add_rn(u, v); },
        [&](float ss) { return math::inv_rms(ss, l_f, eps); }, static_cast<float*>(nullptr));
  } else {
    __syncthreads();
  }
  if (!where_ok) return;  // the whole block
  const char* cs = c.cos_sin + where[0] * c.cs_stride;
  if (first < total) {
    float tab[8];
    if (a.same_unit) mla_load_tab(c, a.cs, cs, first - int32_t(a.units_div.div(uint32_t(first))) * units, tab);
    // One copy of the unit's code, run kUnits times (q[0] is the next unit: the others move down
    // after each): a short call executes each instruction of this kernel about once, so code
    // size, not arithmetic, sets its time (docs/performance.md).
#pragma unroll 1
    for (int k = 0; k < kUnits; ++k) {
      const int32_t unit = first + k * kMlaThreads;
      if (unit >= total) break;
      const int32_t h = int32_t(a.units_div.div(uint32_t(unit))), u = unit - h * units;
      if (!a.same_unit) mla_load_tab(c, a.cs, cs, u, tab);
      q[0].finish(c, a, c.q_out + t * c.qo_stride_t + h * c.qo_stride_h, tab, u);
#pragma unroll
      for (int m = 0; m + 1 < kUnits; ++m) q[m] = q[m + 1];
    }
  }
  if (kv) MlaKvRow<kIn>::write(c, a, x, inv, c.cache + where[1], cs);
}

// ---------------------------------------------------------------- host

template <DType kIn>
gpuError_t mla_launch(int units_a_thread, const DeviceFacts& dev, unsigned grid, gpuStream_t s, const MlaCall& c,
                      const MlaAccess& a) {
  if (units_a_thread == 1) return launch_pdl(mla_rope_rmsnorm_quant_kernel<kIn, 1>, dev, grid, kMlaThreads, 0, s, c, a);
  return launch_pdl(mla_rope_rmsnorm_quant_kernel<kIn, kMlaQUnits>, dev, grid, kMlaThreads, 0, s, c, a);
}

// The widest access of a view of `n` rows `stride` bytes apart at `data`.
inline int32_t mla_access(const void* data, int64_t n, int64_t stride, int elem_bytes, int vec_bytes) {
  LeadShape lead;
  lead.ndim = 1;
  lead.dims[0] = n;
  RowView v;
  v.data = static_cast<char*>(const_cast<void*>(data));
  v.strides[0] = stride;
  return access_for(lead, v, elem_bytes, vec_bytes);
}
// The same for q-like views [T, Hq] (two leading strides).
inline int32_t mla_access2(const void* data, int64_t t, int64_t st, int64_t h, int64_t sh, int elem_bytes,
                           int vec_bytes) {
  return std::min(mla_access(data, t, st, elem_bytes, vec_bytes), mla_access(data, h, sh, elem_bytes, vec_bytes));
}

fusednorm_status mla_rope_rmsnorm_quant(const MlaCall* call, int32_t device, void* stream, char* msg, size_t n) {
  const MlaCall& c = *call;
  const int64_t units = c.heads * (c.rope / 8);
  // kMlaQUnits units a thread where every thread of a q block gets that many (Hq * R >= 8192,
  // e.g. Hq 128 with R 64), else 1. H200, Hq 128, bf16: T 4096 63.0 against 82.3 µs with one unit
  // a thread (four blocks a token), T 16384 222 against 309; one unit is faster only in decode
  // (T 1: 5.7 against 6.9 µs), where the token's q work is spread over four blocks.
  const int qu = units >= kMlaThreads * kMlaQUnits ? kMlaQUnits : 1;
  const int64_t q_blocks = (units + kMlaThreads * qu - 1) / (kMlaThreads * qu);
  if (c.tokens > INT32_MAX / q_blocks || c.rank + c.rope > (int64_t(1) << 30))
    return say(FUSEDNORM_UNSUPPORTED, msg, n,
               "T = %lld, Hq = %lld, L = %lld, R = %lld: the " FN_GPU_VENDOR
               " kernel supports T * ceil(Hq * R / %d) < 2^31 blocks and L + R <= 2^30",
               (long long)c.tokens, (long long)c.heads, (long long)c.rank, (long long)c.rope, 8 * kMlaThreads * qu);
  if (c.tokens == 0) return FUSEDNORM_SUCCESS;
  DeviceGuard guard(device);
  if (guard.error != gpuSuccess) return vendor_error(guard.error, "selecting the device", msg, n);
  const int in_bytes = c.in_type == DType::kF32 ? 4 : 2, cs_bytes = c.cs_type == DType::kF32 ? 4 : 2;
  const int unit_elems = c.neox ? 4 : 8;  // one vector of q: 8 elements, or 4 per half with neox
  MlaAccess a;
  a.q = mla_access2(c.q, c.tokens, c.q_stride_t, c.heads, c.q_stride_h, in_bytes, unit_elems * in_bytes);
  a.q_out = mla_access2(c.q_out, c.tokens, c.qo_stride_t, c.heads, c.qo_stride_h, in_bytes, unit_elems * in_bytes);
  a.cs = mla_access(c.cos_sin, c.max_pos, c.cs_stride, cs_bytes, 8 * cs_bytes);
  a.kv = mla_access(c.kv, c.tokens, c.kv_stride, in_bytes, in_bytes);
  a.w = mla_access(c.weight, 1, 0, c.w_type == DType::kF32 ? 4 : 2, c.w_type == DType::kF32 ? 4 : 2);
  const int cache_bytes = dtype_bits(c.cache_type) / 8;
  a.cache = std::min(mla_access(c.cache, c.num_pages, c.cache_page_stride, cache_bytes, cache_bytes),
                     mla_access(c.cache, c.page_size, c.cache_slot_stride, cache_bytes, cache_bytes));
  a.q_blocks = uint32_t(q_blocks);
  a.q_blocks_div = DivU32::of(uint32_t(q_blocks));
  a.units_div = DivU32::of(uint32_t(c.rope / 8));
  a.same_unit = kMlaThreads % (c.rope / 8) == 0 ? 1 : 0;
  const gpuStream_t s = static_cast<gpuStream_t>(stream);
  const DeviceFacts& dev = g_devices[size_t(device)];
  gpuError_t e;
  // The fast kernel (mla_fast.cuh) where the dtypes, the shapes and every view allow it.
  const int w_bytes = c.w_type == DType::kF32 ? 4 : 2;
  const bool aligned =
      a.q == kVectors && a.q_out == kVectors && a.cs == kVectors &&
      mla_access(c.kv, c.tokens, c.kv_stride, in_bytes, 4 * in_bytes) == kVectors &&
      mla_access(c.weight, 1, 0, w_bytes, 4 * w_bytes) == kVectors &&
      mla_access(c.cache, c.num_pages, c.cache_page_stride, cache_bytes, 4 * cache_bytes) == kVectors &&
      mla_access(c.cache, c.page_size, c.cache_slot_stride, cache_bytes, 4 * cache_bytes) == kVectors;
  MlaFastShape f;
  // The token bound is the grid's (T * f.blocks < 2^31, f.blocks <= 3 at Hq R <= 8192): it binds
  // only past 700 million tokens (q alone then holds terabytes), so no call that fits in a GPU's
  // memory picks a kernel by its token count; past it the general kernel writes the same bytes.
  if (mla_fast_shape(c, aligned, &f) && c.tokens <= INT32_MAX / f.blocks) {
    const unsigned threads = unsigned(32 * f.warps);
    const unsigned blocks = unsigned(c.tokens * f.blocks);
    const bool bf16 = c.in_type == DType::kBF16;
    if (c.cache_type == DType::k_f8e4m3fn)
      e = bf16 ? launch_pdl(mla_fast_kernel<DType::kBF16, DType::k_f8e4m3fn>, dev, blocks, threads, 0, s, c, f)
               : launch_pdl(mla_fast_kernel<DType::kF16, DType::k_f8e4m3fn>, dev, blocks, threads, 0, s, c, f);
    else if (c.cache_type == DType::k_f8e4m3fnuz)
      e = bf16 ? launch_pdl(mla_fast_kernel<DType::kBF16, DType::k_f8e4m3fnuz>, dev, blocks, threads, 0, s, c, f)
               : launch_pdl(mla_fast_kernel<DType::kF16, DType::k_f8e4m3fnuz>, dev, blocks, threads, 0, s, c, f);
    else
      e = bf16 ? launch_pdl(mla_fast_kernel<DType::kBF16, DType::kBF16>, dev, blocks, threads, 0, s, c, f)
               : launch_pdl(mla_fast_kernel<DType::kF16, DType::kF16>, dev, blocks, threads, 0, s, c, f);
    if (e == gpuSuccess) e = gpuGetLastError();
    if (e != gpuSuccess) return vendor_error(e, "launching mla_rope_rmsnorm_quant", msg, n);
    return FUSEDNORM_SUCCESS;
  }
  const unsigned grid = unsigned(c.tokens * q_blocks);
  switch (c.in_type) {
    case DType::kF32: e = mla_launch<DType::kF32>(qu, dev, grid, s, c, a); break;
    case DType::kF16: e = mla_launch<DType::kF16>(qu, dev, grid, s, c, a); break;
    default: e = mla_launch<DType::kBF16>(qu, dev, grid, s, c, a); break;
  }
  if (e == gpuSuccess) e = gpuGetLastError();
  if (e != gpuSuccess) return vendor_error(e, "launching mla_rope_rmsnorm_quant", msg, n);
  return FUSEDNORM_SUCCESS;
}

}  // namespace gpu
}  // namespace fusednorm
