// Harness for a variant of the GPU mla_rope_rmsnorm_quant kernel (not part of the library or the
// test suite): independent warps, aimed at issue 20's decode target. A token's latent row goes to
// one warp (the canonical sum with a lane's partials pairwise in registers, then the butterfly: no
// block barrier, no shared memory) and its q units to q warps that each locate the token
// themselves. The variant runs beside the library's kernel (backends/gpu/, through its launcher)
// on the same inputs: every case compares q_out and the whole cache byte for byte (the library's
// kernel is the one tests/gpu/ check against the CPU backend), then times both, replayed from a
// CUDA graph (warm L2: the inputs are not rotated). The latent row's writing and the access widths
// repeat the library's (MlaKvRow::write, the launcher) with a warp for a block: a variant that is
// adopted replaces them in backends/gpu/.
// Build (a development machine's nvcc is enough; carry the binary to the GPU machine):
//   nvcc -std=c++17 -O3 -arch=sm_90a -fmad=false -Iinclude -Isrc -I. -o build-gpu/mla_variants \
//     tests/bench/mla_variants.cu
//   build-gpu/mla_variants            # on the GPU machine; exit status 1 if any case differs
// Status (H200, 2026-11-28; docs/performance.md, mla_rope_rmsnorm_quant): the DeepSeek cases give the
// library's bytes, faster at large T and slower in decode, so the variant was not adopted; the sweep
// of other L, R and page sizes that follows them stops on a misaligned-address fault in the
// variant's kernel, not debugged.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "backends/gpu/mla_rope_rmsnorm_quant.cuh"

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

namespace fusednorm {
namespace gpu {
namespace variant {

// The library's access widths plus the warp layout.
struct MlaWarpAccess : MlaAccess {
  int32_t kv_vec2 = 0, kv_vec4 = 0;  // vectors of 2 and 4 elements of the kv rows
  uint32_t warps = 0;                // warps of the grid that work: T * wpt
  uint32_t wpt = 0;                  // warps a token: its latent row's, then its q warps'
  DivU32 wpt_div;                    // division by wpt
};

// A token's latent row, by one warp: the canonical sum of squares (lane i owns partials
// [i * pv, i * pv + pv), pv = max(1, P / kWarp), each summed over its steps in order; the lane's
// partials pairwise in registers, then across lanes by the butterfly; lanes past P hold +0, which
// is exact), then, once inv and the token's slot are known, the codes of norm(x) / k_scale of
// [0, L) and of the rotation of [L, L + R).
template <DType kIn>
struct MlaKvWarp {
  using In = InTraits<kIn>;
  static constexpr int kB = In::kBytes;
  static constexpr int kS = 4;       // steps loaded together (S = ceil(L / P): 4 for L = 512)
  static constexpr int kLevels = 6;  // pv / 4 <= 4096 / 32 / 4 = 2^5 runs: the in-lane tree's levels + 1
  static constexpr int kBatch = 4;   // elements a lane loads together before their stores

  // The subtree of kV consecutive partials from e0 (kV = 1, 2 or 4): each over its steps, one
  // vector a step (elements past L read as 0), then pairwise.
  template <int kV>
  static __device__ __forceinline__ float run(const char* x, int32_t l, int32_t e0, int32_t p_count, int32_t steps,
                                              int32_t access) {
    constexpr int kW = Vec<kB, kV>::kWords;
    float part[kV];
#pragma unroll
    for (int k = 0; k < kV; ++k) part[k] = 0.0f;
    for (int32_t s0 = 0; s0 < steps; s0 += kS) {
      uint32_t w[kS][kW];
#pragma unroll
      for (int ss = 0; ss < kS; ++ss) {
        if (s0 + ss < steps) {
          load_vec<kB, kV>(x, e0 + (s0 + ss) * p_count, l, access, w[ss]);
        } else {
#pragma unroll
          for (int k = 0; k < kW; ++k) w[ss][k] = 0;
        }
      }
#pragma unroll
      for (int ss = 0; ss < kS; ++ss)
#pragma unroll
        for (int k = 0; k < kV; ++k) {
          const float v = In::get(w[ss], k);
          part[k] = math::add_rn(part[k], math::mul_rn(v, v));
        }
    }
#pragma unroll
    for (int n = kV; n > 1; n /= 2)
#pragma unroll
      for (int j = 0; j < n / 2; ++j) part[j] = math::add_rn(part[2 * j], part[2 * j + 1]);
    return part[0];
  }

  // The row's canonical sum of squares, in every lane.
  template <int kWarp>
  static __device__ __forceinline__ float sum_squares(const MlaCall& c, const MlaWarpAccess& a, const char* x,
                                                      int32_t lane) {
    const int32_t l = int32_t(c.rank);
    const int32_t p_count = int32_t(math::reduction_partials(l));
    const int32_t pv = p_count > kWarp ? p_count / kWarp : 1;
    const int32_t steps = (l + p_count - 1) / p_count, e0 = lane * pv;
    float sum = 0.0f;  // +0 for lanes past P
    if (e0 < p_count) {
      if (pv == 1) {
        sum = run<1>(x, l, e0, p_count, steps, a.kv);
      } else if (pv == 2) {
        sum = run<2>(x, l, e0, p_count, steps, a.kv_vec2);
      } else if (pv == 4) {
        sum = run<4>(x, l, e0, p_count, steps, a.kv_vec4);
      } else {
        // Runs of 4 partials, pushed on a binary counter of pending left subtrees.
        float node[kLevels];
#pragma unroll
        for (int k = 0; k < kLevels; ++k) node[k] = 0.0f;
        for (int32_t m = 0; m < pv / 4; ++m) {
          float g = run<4>(x, l, e0 + 4 * m, p_count, steps, a.kv_vec4);
#pragma unroll
          for (int k = 0; k < kLevels; ++k) {
            if (!((uint32_t(m) >> k) & 1u)) {
              node[k] = g;
              break;
            }
            g = math::add_rn(node[k], g);
          }
        }
        sum = node[0];  // pv / 4 a power of two: the root is node[log2(pv / 4)]
#pragma unroll
        for (int k = 1; k < kLevels; ++k)
          if (pv == (4 << k)) sum = node[k];
      }
    }
    return warp_reduce<kWarp>(sum, [](float u, float w) { return math::add_rn(u, w); });
  }

  template <int kWarp>
  static __device__ __forceinline__ void write(const MlaCall& c, const MlaWarpAccess& a, const char* x, float inv,
                                               char* dst, const char* cs, int32_t lane) {
    const int32_t l = int32_t(c.rank), r = int32_t(c.rope);
    const float ks = mla_k_scale(c);
    for (int32_t i0 = lane; i0 < l; i0 += kWarp * kBatch) {
      int32_t idx[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) idx[k] = i0 + k * kWarp < l ? i0 + k * kWarp : -1;
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
    for (int32_t j = lane; j < r / 2; j += kWarp) {
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

// A token's latent row (its first warp): the sum of squares, its slot, the row written.
template <DType kIn, int kWarp>
__device__ __forceinline__ void mla_kv_warp(const MlaCall& c, const MlaWarpAccess& a, int64_t t, int32_t lane) {
  const MlaGuess g = mla_guess(c, t);
  const char* x = c.kv + t * c.kv_stride;
  // The weights write() reads: into L1 now, a line a lane.
  for (int64_t b = int64_t(lane) * 128; b < c.rank * (c.w_type == DType::kF32 ? 4 : 2); b += kWarp * 128)
    gpu_prefetch_l1(c.weight + b);
  const float ss = MlaKvWarp<kIn>::template sum_squares<kWarp>(c, a, x, lane);
  MlaSlot s;
  bool ok = mla_position(c, t, g, &s) == MlaLocate::kOk;
  if (ok && lane == 0)  // the token's cos/sin row into L1 while the page table is read
    for (int64_t b = 0; b < c.rope * (c.cs_type == DType::kF32 ? 4 : 2); b += 128)
      gpu_prefetch_l1(c.cos_sin + s.pos * c.cs_stride + b);
  ok = ok && mla_page(c, &s) == MlaLocate::kOk;
  if (!ok) {
    if (lane == 0 && c.invalid_tokens != nullptr) atomicAdd(c.invalid_tokens, 1);
    return;
  }
  const float inv = math::inv_rms(ss, math::length_f32(c.rank), c.eps);
  MlaKvWarp<kIn>::template write<kWarp>(c, a, x, inv, mla_cache_row(c, s), c.cos_sin + s.pos * c.cs_stride, lane);
}

// kUnits q units of a token a lane, kWarp apart, from unit `first`: located by every lane (the
// same addresses across a warp), rotated, stored.
template <DType kIn, int kUnits>
__device__ __forceinline__ void mla_q_warp(const MlaCall& c, const MlaWarpAccess& a, int64_t t, int32_t first) {
  constexpr int kWarp = kGpuWarp;
  const int32_t units = int32_t(c.rope / 8), total = int32_t(c.heads) * units;
  // The units' loads and the token's first index reads in flight together.
  QUnit<kIn> q[kUnits];
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const int32_t unit = first + k * kWarp;
    if (unit >= total) break;
    const int32_t h = int32_t(a.units_div.div(uint32_t(unit))), u = unit - h * units;
    q[k].load(c, a, c.q + t * c.q_stride_t + h * c.q_stride_h, u);
  }
  const MlaGuess g = mla_guess(c, t);
  MlaSlot s;
  if (first >= total || mla_position(c, t, g, &s) != MlaLocate::kOk) return;
  const char* cs = c.cos_sin + s.pos * c.cs_stride;
  float tab[8];
  // The table row's load is issued before the page table's (the token is written only if both
  // its position and its page are valid).
  if (a.same_unit) mla_load_tab(c, a, cs, first - int32_t(a.units_div.div(uint32_t(first))) * units, tab);
  if (mla_page(c, &s) != MlaLocate::kOk) return;
  // One copy of the unit's code, run kUnits times (q[0] is the next unit: the others move down
  // after each): a short call executes each instruction about once, so code size, not
  // arithmetic, sets its time (docs/performance.md).
#pragma unroll 1
  for (int k = 0; k < kUnits; ++k) {
    const int32_t unit = first + k * kWarp;
    if (unit >= total) break;
    const int32_t h = int32_t(a.units_div.div(uint32_t(unit))), u = unit - h * units;
    if (!a.same_unit) mla_load_tab(c, a, cs, u, tab);
    q[0].finish(c, a, c.q_out + t * c.qo_stride_t + h * c.qo_stride_h, tab, u);
#pragma unroll
    for (int m = 0; m + 1 < kUnits; ++m) q[m] = q[m + 1];
  }
}

// Registers: capped at 56 a thread for 2-byte inputs (4 blocks a multiprocessor; ptxas takes 68
// without a cap), 80 for f32.
template <DType kIn, int kUnits>
__global__ void FN_KERNEL_BOUNDS(kMlaThreads, kIn == DType::kF32 ? 80 : 56)
    mla_warp_kernel(FN_GRID_CONSTANT const MlaCall c, const MlaWarpAccess a) {
  constexpr int kWarp = kGpuWarp;
  const uint32_t warp = blockIdx.x * uint32_t(kMlaThreads / kWarp) + threadIdx.x / kWarp;
  const int32_t lane = int32_t(threadIdx.x % kWarp);
  // Programmatic dependent launch (sm_90): every read below waits for the previous kernel's memory;
  // the next kernel may start its launch at once.
  gpu_wait_for_previous_grid();
  gpu_allow_next_grid();
  if (warp >= a.warps) return;
  const uint32_t token = a.wpt_div.div(warp), role = warp - token * a.wpt;
  if (role == 0) mla_kv_warp<kIn, kWarp>(c, a, int64_t(token), lane);
  else mla_q_warp<kIn, kUnits>(c, a, int64_t(token), int32_t(role - 1) * kWarp * kUnits + lane);
}


template <DType kIn, int kUnits>
gpuError_t mla_warp_launch_t(const DeviceFacts& dev, unsigned grid, gpuStream_t s, const MlaCall& c,
                             const MlaWarpAccess& a) {
  return launch_pdl(mla_warp_kernel<kIn, kUnits>, dev, grid, kMlaThreads, 0, s, c, a);
}

// The variant's launcher (bf16, f16 and f32 inputs), with the library's access widths.
gpuError_t mla_warp_launch(const MlaCall& c, const DeviceFacts& dev, gpuStream_t s) {
  const int64_t units = c.heads * (c.rope / 8);
  const int qu = units >= int64_t(kGpuWarp) * kMlaQUnits * 4 ? kMlaQUnits : 1;
  const int64_t wpt = 1 + (units + int64_t(kGpuWarp) * qu - 1) / (int64_t(kGpuWarp) * qu);
  const int in_bytes = c.in_type == DType::kF32 ? 4 : 2, cs_bytes = c.cs_type == DType::kF32 ? 4 : 2;
  const int unit_elems = c.neox ? 4 : 8;
  MlaWarpAccess a;
  a.q = mla_access2(c.q, c.tokens, c.q_stride_t, c.heads, c.q_stride_h, in_bytes, unit_elems * in_bytes);
  a.q_out = mla_access2(c.q_out, c.tokens, c.qo_stride_t, c.heads, c.qo_stride_h, in_bytes, unit_elems * in_bytes);
  a.cs = mla_access(c.cos_sin, c.max_pos, c.cs_stride, cs_bytes, 8 * cs_bytes);
  a.kv = mla_access(c.kv, c.tokens, c.kv_stride, in_bytes, in_bytes);
  a.kv_vec2 = mla_access(c.kv, c.tokens, c.kv_stride, in_bytes, 2 * in_bytes);
  a.kv_vec4 = mla_access(c.kv, c.tokens, c.kv_stride, in_bytes, 4 * in_bytes);
  a.w = mla_access(c.weight, 1, 0, c.w_type == DType::kF32 ? 4 : 2, c.w_type == DType::kF32 ? 4 : 2);
  const int cache_bytes = dtype_bits(c.cache_type) / 8;
  a.cache = std::min(mla_access(c.cache, c.num_pages, c.cache_page_stride, cache_bytes, cache_bytes),
                     mla_access(c.cache, c.page_size, c.cache_slot_stride, cache_bytes, cache_bytes));
  a.warps = uint32_t(c.tokens * wpt);
  a.wpt = uint32_t(wpt);
  a.wpt_div = DivU32::of(uint32_t(wpt));
  a.units_div = DivU32::of(uint32_t(c.rope / 8));
  a.same_unit = kGpuWarp % (c.rope / 8) == 0 ? 1 : 0;
  constexpr int64_t kWarpsABlock = kMlaThreads / kGpuWarp;
  const unsigned grid = unsigned((c.tokens * wpt + kWarpsABlock - 1) / kWarpsABlock);
  switch (c.in_type) {
    case DType::kF32: return qu == 1 ? mla_warp_launch_t<DType::kF32, 1>(dev, grid, s, c, a) : mla_warp_launch_t<DType::kF32, kMlaQUnits>(dev, grid, s, c, a);
    case DType::kF16: return qu == 1 ? mla_warp_launch_t<DType::kF16, 1>(dev, grid, s, c, a) : mla_warp_launch_t<DType::kF16, kMlaQUnits>(dev, grid, s, c, a);
    default: return qu == 1 ? mla_warp_launch_t<DType::kBF16, 1>(dev, grid, s, c, a) : mla_warp_launch_t<DType::kBF16, kMlaQUnits>(dev, grid, s, c, a);
  }
}

}  // namespace variant
}  // namespace gpu
}  // namespace fusednorm

using namespace fusednorm;
using namespace fusednorm::gpu;

__global__ void fill_bits(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    const float f = (float(x & 0xFFFF) / 65536.0f - 0.5f) * 2.0f;
    p[i] = uint16_t(__float_as_uint(f) >> 16);  // bf16 in [-1, 1)
  }
}

struct Case {
  int64_t tokens, heads, rank, rope, page;
  DType cache;
  int neox;
};

template <class T>
T* dalloc(size_t n) {
  T* p = nullptr;
  CK(cudaMalloc(&p, n * sizeof(T)));
  CK(cudaMemset(p, 0, n * sizeof(T)));
  return p;
}

// One case: equal bytes, then the time of each kernel. Returns whether the bytes are equal.
bool run_case(const Case& k, const DeviceFacts& dev, cudaStream_t st) {
  // Decode below 64 tokens (one token a sequence after 1000 + 997 b cached ones), else
  // sequences of 2048 tokens after 0, 1000, 2000, ... cached ones.
  const int64_t t_count = k.tokens, b_count = t_count <= 64 ? t_count : (t_count + 2047) / 2048;
  std::vector<int32_t> offsets(static_cast<size_t>(b_count + 1)), lens(static_cast<size_t>(b_count));
  for (int64_t b = 0; b <= b_count; ++b) offsets[size_t(b)] = int32_t(std::min(t_count, b * (t_count <= 64 ? 1 : 2048)));
  int64_t max_pos = 0;
  for (int64_t b = 0; b < b_count; ++b) {
    lens[size_t(b)] = int32_t(t_count <= 64 ? 1000 + 997 * b % 7000 : 1000 * b);
    max_pos = std::max<int64_t>(max_pos, lens[size_t(b)] + offsets[size_t(b + 1)] - offsets[size_t(b)]);
  }
  const int64_t max_pages = (max_pos + k.page - 1) / k.page, num_pages = b_count * max_pages;
  std::vector<int32_t> lut(static_cast<size_t>(num_pages));
  for (int64_t p = 0; p < num_pages; ++p) lut[size_t(p)] = int32_t((p * 7919) % num_pages);  // a permutation
  const int64_t row = k.rank + k.rope, cb = dtype_bits(k.cache) / 8;
  const size_t q_elems = size_t(t_count * k.heads * k.rope), kv_elems = size_t(t_count * row);
  uint16_t* q = dalloc<uint16_t>(q_elems);
  uint16_t* q_lib = dalloc<uint16_t>(q_elems);
  uint16_t* q_var = dalloc<uint16_t>(q_elems);
  uint16_t* kv = dalloc<uint16_t>(kv_elems);
  uint16_t* w = dalloc<uint16_t>(size_t(k.rank));
  uint16_t* cs = dalloc<uint16_t>(size_t(max_pos * k.rope));  // bf16 cos/sin table
  const size_t cache_bytes = size_t(num_pages * k.page * row * cb);
  char* cache_lib = dalloc<char>(cache_bytes);
  char* cache_var = dalloc<char>(cache_bytes);
  int32_t* d_off = dalloc<int32_t>(offsets.size());
  int32_t* d_len = dalloc<int32_t>(lens.size());
  int32_t* d_lut = dalloc<int32_t>(lut.size());
  CK(cudaMemcpy(d_off, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_len, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_lut, lut.data(), lut.size() * 4, cudaMemcpyHostToDevice));
  fill_bits<<<256, 256>>>(q, q_elems, 1);
  fill_bits<<<256, 256>>>(kv, kv_elems, 2);
  fill_bits<<<64, 256>>>(w, size_t(k.rank), 3);
  fill_bits<<<256, 256>>>(cs, size_t(max_pos * k.rope), 4);
  CK(cudaDeviceSynchronize());

  MlaCall c;
  c.tokens = t_count;
  c.heads = k.heads;
  c.rank = k.rank;
  c.rope = k.rope;
  c.batch = b_count;
  c.max_pages = max_pages;
  c.num_pages = num_pages;
  c.page_size = k.page;
  c.max_pos = max_pos;
  c.in_type = DType::kBF16;
  c.w_type = DType::kBF16;
  c.cs_type = DType::kBF16;
  c.cache_type = k.cache;
  c.neox = k.neox;
  c.eps = 1e-6f;
  c.weight_offset = 0.0f;
  c.q = reinterpret_cast<const char*>(q);
  c.q_stride_t = k.heads * k.rope * 2;
  c.q_stride_h = k.rope * 2;
  c.qo_stride_t = c.q_stride_t;
  c.qo_stride_h = c.q_stride_h;
  c.kv = reinterpret_cast<const char*>(kv);
  c.kv_stride = row * 2;
  c.weight = reinterpret_cast<const char*>(w);
  c.cos_sin = reinterpret_cast<const char*>(cs);
  c.cs_stride = k.rope * 2;
  c.row_offsets = IndexView{reinterpret_cast<const char*>(d_off), 4, 0, 0};
  c.cache_len = IndexView{reinterpret_cast<const char*>(d_len), 4, 0, 0};
  c.page_table = IndexView{reinterpret_cast<const char*>(d_lut), 4, 0, 0};
  c.page_table_row_stride = max_pages * 4;
  c.cache_page_stride = k.page * row * cb;
  c.cache_slot_stride = row * cb;
  MlaCall lib = c, var = c;
  lib.q_out = reinterpret_cast<char*>(q_lib);
  lib.cache = cache_lib;
  var.q_out = reinterpret_cast<char*>(q_var);
  var.cache = cache_var;

  char msg[256] = "";
  const auto run_lib = [&] {
    if (mla_rope_rmsnorm_quant(&lib, 0, st, msg, sizeof msg) != FUSEDNORM_SUCCESS) {
      fprintf(stderr, "library: %s\n", msg);
      exit(1);
    }
  };
  const auto run_var = [&] { CK(variant::mla_warp_launch(var, dev, st)); };
  run_lib();
  run_var();
  CK(cudaStreamSynchronize(st));
  std::vector<char> a(q_elems * 2), b(q_elems * 2), ca(cache_bytes), cb2(cache_bytes);
  CK(cudaMemcpy(a.data(), q_lib, a.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b.data(), q_var, b.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ca.data(), cache_lib, ca.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(cb2.data(), cache_var, cb2.size(), cudaMemcpyDeviceToHost));
  const bool equal = memcmp(a.data(), b.data(), a.size()) == 0 && memcmp(ca.data(), cb2.data(), ca.size()) == 0;

  // Times: each kernel 20 times in a CUDA graph, the graph replayed; best of 5 replays a kernel.
  const auto time_of = [&](auto fn) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 20; ++i) fn();
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int r = 0; r < 6; ++r) {
      CK(cudaEventRecord(e0, st));
      CK(cudaGraphLaunch(ge, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r > 0) best = std::min(best, ms * 1000.0f / 20.0f);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return best;
  };
  const float t_lib = time_of(run_lib), t_var = time_of(run_var);
  printf("T %6lld Hq %3lld L %5lld R %2lld page %3lld %-10s %s: %s  library %9.2f us  variant %9.2f us\n",
         (long long)t_count, (long long)k.heads, (long long)k.rank, (long long)k.rope, (long long)k.page,
         k.cache == DType::kBF16 ? "bf16" : "f8e4m3fn", k.neox ? "neox" : "pairs", equal ? "same bytes" : "BYTES DIFFER",
         t_lib, t_var);
  for (void* p : {(void*)q, (void*)q_lib, (void*)q_var, (void*)kv, (void*)w, (void*)cs, (void*)cache_lib,
                  (void*)cache_var, (void*)d_off, (void*)d_len, (void*)d_lut})
    CK(cudaFree(p));
  return equal;
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  DeviceFacts dev;
  dev.major = prop.major;
  dev.multiprocessors = prop.multiProcessorCount;
  g_devices.assign(1, dev);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  printf("# %s; variant: independent warps (tests/bench/mla_variants.cu)\n", prop.name);
  bool ok = true;
  for (DType cache : {DType::kBF16, DType::k_f8e4m3fn})
    for (int64_t heads : {16, 128})
      for (int64_t t : {1, 8, 64, 4096, 16384}) ok = run_case({t, heads, 512, 64, 64, cache, 0}, dev, st) && ok;
  // Other latent widths (every path of the warp's sum), pairings, rope widths and page sizes.
  for (int64_t l : {8, 64, 256, 512, 520, 1024, 4096, 16384})
    for (int64_t r : {8, 16, 64})
      for (int neox = 0; neox < 2; ++neox) ok = run_case({33, 5, l, r, 3, DType::kBF16, neox}, dev, st) && ok;
  printf("# %s\n", ok ? "every case: same bytes" : "SOME CASES DIFFER");
  return ok ? 0 : 1;
}
