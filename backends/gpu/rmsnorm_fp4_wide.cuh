// Compiled twice: as CUDA and as HIP (through rmsnorm_fp4.cuh). rmsnorm_fp4's kernel for the
// common case: 16-bit input (bf16, f16), every view vector-aligned with one leading dimension,
// H exactly 4 steps (H = 4P, a power of two). The same formulas in the same order as the fast kernel
// of rmsnorm_fp4.cuh, so the same bytes; the host there picks it from the views and H alone.
//
// A thread owns 16 adjacent elements of each step (thread t of a row: s*P + 16t .. + 15), twice
// the fast kernel's 8, so that a row has half the threads and each thread's once-a-row work
// (addresses, the row reduction's tail, loop control) serves twice the elements:
// - the sum of squares: 16 canonical partials a thread, their tree's first four levels in
//   registers, the rest across the row's threads (row_reduce_finish) — the canonical order;
// - an NVFP4 block (16) is one thread's vector of a step, so its amax and scale need no other
//   thread; an MXFP4 block (32) is two adjacent threads, one exchange of their maxima, and both
//   compute the (same) scale, the even one stores it;
// - NVFP4's multiplier r = gs / dec(code) comes from a table of all 256 codes that the block
//   fills once (math::nvfp4_multiplier), MXFP4's from math::mxfp4_block_scale_finite.
// Inputs are kept as their 16-bit words until inv is known (32 registers for 4 steps, 64 for 8).
#pragma once

#include <stdint.h>

#include "backends/gpu/encode.cuh"
#include "backends/gpu/fp4_encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/io.cuh"
#include "backends/gpu/plan.h"
#include "backends/gpu/reduce.cuh"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

constexpr int kFp4WideVec = 16;    // elements a thread owns in a step
// Steps a thread keeps: a build for exactly 4 (H = 4P: the largest power of two P <= H / 4 is
// reduction_partials(H), so H = S·P has S in 4 .. 7 up to H = 4 · 4096) and one for 5 .. 8 (at 128
// registers a thread).
constexpr int kFp4WideSteps = 4;
constexpr int kFp4WideMaxSteps = 8;
// Register cap of the 4-step build: 80, three blocks of 256 threads an SM. With the next row's
// inputs loaded during this row's steps (below), 64 (four blocks) spilled 52-104 bytes and ran
// 10% slower than the build without the early loads; 80 runs 14% faster than it (H100,
// docs/performance.md).
constexpr int kFp4WideRegs = 80;

// Bytes of the weight table: g = w + offset of a row, 16 floats a thread and step (H floats), and
// one 16-byte slot of padding a thread (P / 16 threads a row).
inline size_t fp4_wide_table_bytes(int64_t h) {
  return size_t(h) * sizeof(float) + size_t(math::reduction_partials(h) / kFp4WideVec) * 16;
}

template <DType kIn, int kBlock, int kWarp, int kS>
__global__ void FN_KERNEL_BOUNDS(kRowThreads, kS <= 4 ? kFp4WideRegs : 128)
    rmsnorm_fp4_wide_kernel(FN_GRID_CONSTANT const RmsnormFp4Call c, const RowShape shape) {
  using In = InTraits<kIn>;
  static_assert(In::kBytes == 2, "16-bit inputs");
  constexpr int kV = kFp4WideVec;
  constexpr int kW = Vec<In::kBytes, kV>::kWords;
  constexpr int kPerWord = Vec<In::kBytes, kV>::kPerWord;
  __shared__ __align__(16) float red[2][kMaxBlockThreads / 32];
  __shared__ float inv_of_row[2][kMaxBlockThreads / 32];
  __shared__ float r_of_code[kBlock == 16 ? 256 : 1];
  // g of element s*P + 16t + 4q + i at slot t * (4S + 1) + 4s + q, component i: a thread's slots
  // together, so that a row reads them at constant offsets from one address, and 4S + 1 (odd)
  // slots a thread, so that the 8 threads of a 16-byte access fall on 8 different bank quads
  // (conflict-free). Filled by the block's first row of threads, read by every row.
  extern __shared__ float4 fp4_wide_gamma[];
  const int T = shape.threads_per_row, P = shape.partials, R = shape.rows_per_block;
  const int S = kS == 4 ? 4 : shape.steps;  // 4, or 5 .. 8 in the 8-step build
  const int t = int(threadIdx.x) % T, rib = int(threadIdx.x) / T;
  const int64_t rows = c.lead.rows;
  const int64_t all_rows = c.swizzled ? c.swizzle_rows : rows;
  const int64_t blocks = c.h / kBlock;
  const uint32_t row_bytes = uint32_t(c.h) * In::kBytes;
  const bool norm = c.norm == FUSEDNORM_NORM_RMS;
  const float len = math::length_f32(c.h), rcp = math::pow2_rcp(len), eps = c.eps;
  const int32_t scale_step = c.swizzled ? P / kBlock / 4 * 512 : P / kBlock;  // bytes between a thread's steps
#if FN_CUDA_ARCH >= 900
  if (t == 0 && int64_t(blockIdx.x) * R + rib < rows) {
    const int64_t row0 = int64_t(blockIdx.x) * R + rib;
    gpu_prefetch_l2_range(c.in.data + row0 * c.in.strides[0], row_bytes, 0, 1);
    if (c.res.data != nullptr) gpu_prefetch_l2_range(c.res.data + row0 * c.res.strides[0], row_bytes, 0, 1);
  }
#endif
  gpu_wait_for_previous_grid();
  gpu_allow_next_grid();
  const float gs = c.global_scale != nullptr ? load_f32_any(c.global_scale) : 1.0f;
  if (kBlock == 16)
    for (int i = int(threadIdx.x); i < 256; i += int(blockDim.x)) r_of_code[i] = math::nvfp4_multiplier(uint32_t(i), gs);
  if (norm && rib == 0) {
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      if (s >= S) continue;
      float g[kV];
      load_gamma<kV, true>(c.w_type, c.weight, c.weight_offset, s * P + kV * t, int32_t(c.h), kVectors, g);
#pragma unroll
      for (int q = 0; q < kV / 4; ++q)
        fp4_wide_gamma[t * (4 * S + 1) + 4 * s + q] = make_float4(g[4 * q], g[4 * q + 1], g[4 * q + 2], g[4 * q + 3]);
    }
  }
  __syncthreads();

  // Without a residual, the next row's inputs are loaded into the registers that each step frees
  // (raw[s], after step s's stores), so that they are on their way while this row is encoded: the
  // loads at the start of a row left the warps waiting on them (Nsight Compute: long-scoreboard
  // stalls 5.9 of the 13 cycles between a warp's issues). The next row's L2 prefetch stays one row
  // ahead (two rows ahead measured slower: more DRAM traffic, the prefetched lines evicted).
  const bool preload = c.res.data == nullptr;
  const int64_t row_stride = int64_t(gridDim.x) * R;
  uint32_t raw[kS][kW];
  bool loaded = false;  // raw holds this row's inputs
  int parity = 0;
  for (int64_t first = int64_t(blockIdx.x) * R; first < all_rows; first += row_stride, parity ^= 1) {
    const int64_t row = first + rib;
    const bool real = row < rows;
    int tl = t;
    gpu_launder(tl);  // offsets from t computed in the loop, not kept across it
    const int64_t next = row + row_stride;
#if FN_CUDA_ARCH >= 900
    if (next < rows && tl == 0) {
#else
    if (next < rows) {
#endif
      gpu_prefetch_l2_range(c.in.data + next * c.in.strides[0], row_bytes, tl, T);
      if (c.res.data != nullptr) gpu_prefetch_l2_range(c.res.data + next * c.res.strides[0], row_bytes, tl, T);
    }
    // 1. x as 16-bit words (with the residual sum, rounded and written back). A row past the
    // tensor (the last round of rows, a swizzled layout's padding rows) reads row 0 and writes
    // nothing: its threads still take part in the barriers and shuffles.
    const int64_t crow = real ? row : 0;
    const int32_t e0 = kV * tl;  // element offset of step 0; step s adds s * P
    if (!loaded) {
      const char* in_p = c.in.data + crow * c.in.strides[0] + e0 * In::kBytes;
#pragma unroll
      for (int s = 0; s < kS; ++s)
        if (s < S) load_vec<In::kBytes, kV, true>(in_p + s * P * In::kBytes, 0, 0, kVectors, raw[s]);
    }
    // The next round's row of these threads (row 0 past the tensor, as above), if there is a round.
    const bool load_next = preload && first + row_stride < all_rows;
    const char* next_p = c.in.data + (next < rows ? next : 0) * c.in.strides[0] + e0 * In::kBytes;
    if (c.res.data != nullptr && real) {
      char* res_p = c.res.data + row * c.res.strides[0] + e0 * In::kBytes;
#pragma unroll
      for (int s = 0; s < kS; ++s) {
        if (s >= S) continue;
        uint32_t rw[kW], sw[kW] = {};
        load_vec<In::kBytes, kV, true>(res_p + s * P * In::kBytes, 0, 0, kVectors, rw);
#pragma unroll
        for (int j = 0; j < kV; ++j) {
          const uint32_t code = In::encode(math::add_rn(In::get(raw[s], j), In::get(rw, j)));
          sw[j / kPerWord] |= code << (32 / kPerWord * (j % kPerWord));
        }
        store_vec<In::kBytes, kV, true>(res_p + s * P * In::kBytes, 0, 0, kVectors, sw);
#pragma unroll
        for (int w = 0; w < kW; ++w) raw[s][w] = sw[w];
      }
    }
    float inv = 1.0f;
    if (norm) {
      inv = row_reduce_finish<kWarp, false, true, true>(
          thread_sum_squares<In, kS, kV>(raw, S), t, T, rib, red[parity],
          [](float a, float b) { return math::add_rn(a, b); }, [len, rcp, eps](float ss) { return math::inv_rms_rcp(ss, len, rcp, eps); },
          inv_of_row[parity]);
    }
    // 2. per step: y, the block's amax and scale, the codes (8 bytes a thread). On CUDA the
    // tables are read at 32-bit shared addresses computed once a row (the compiler would rebuild
    // the shared window's address at every access).
#if FN_CUDA_ARCH > 0
    const uint32_t gamma_sh = gpu_shared_address(fp4_wide_gamma + tl * (4 * S + 1));
    const uint32_t r_table_sh = gpu_shared_address(r_of_code);
#else
    const uint32_t r_table_sh = 0;
#endif
    char* out_p = c.out.data + crow * c.out.strides[0] + e0 / 2;
    // The scale byte of this thread's block in step s: scale_p + s * scale_step. The block of step
    // s is k = s * P / kBlock + e0 / kBlock, and P / kBlock is a multiple of 4 where the layout is
    // swizzled (the host's condition), so its swizzled offset is that of e0 / kBlock plus s times
    // (P / kBlock / 4) tiles of 512 bytes: one add a step.
    const int32_t k0 = e0 / kBlock;
    char* scale_p = c.scales.data + (c.swizzled ? math::fp4_swizzled_row_offset(crow, c.swizzle_tiles) +
                                                      math::fp4_swizzled_block_offset(k0)
                                                : crow * c.scales.strides[0] + k0);
    const bool store_scale = real && (kBlock == 16 || (tl & 1) == 0);
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      if (s >= S) continue;  // uniform
      float y[kV];
#pragma unroll
      for (int j = 0; j < kV; ++j) y[j] = In::get(raw[s], j);
      if (norm) {
#pragma unroll
        for (int q = 0; q < kV / 4; ++q) {
#if FN_CUDA_ARCH > 0
          const float4 g = gpu_load_shared16(gamma_sh + uint32_t(4 * s + q) * 16u);
#else
          const float4 g = fp4_wide_gamma[tl * (4 * S + 1) + 4 * s + q];
#endif
          y[4 * q] = math::norm_apply(y[4 * q], inv, g.x);
          y[4 * q + 1] = math::norm_apply(y[4 * q + 1], inv, g.y);
          y[4 * q + 2] = math::norm_apply(y[4 * q + 2], inv, g.z);
          y[4 * q + 3] = math::norm_apply(y[4 * q + 3], inv, g.w);
        }
      }
      // Both threads of an MXFP4 block exchange their maxima (every lane takes part).
      const uint32_t amax = fp4_block_amax<kWarp, true, kV>(y, kBlock / kV);
      const math::BlockScale bs = block_scale<kBlock, kBlock == 16>(amax, gs, r_of_code, r_table_sh);
      // A row past the tensor computes as the others and stores nothing (predicated stores, no branch).
      if (store_scale) scale_p[s * scale_step] = char(bs.code);
      uint32_t lo, hi;
      if (fp4_block_small(amax, bs.r)) {  // one branch for both halves
        lo = pack_fp4_small8(y, bs.r);
        hi = pack_fp4_small8(y + kV / 2, bs.r);
      } else {
        const bool num = amax < math::kF32InfBits && fabsf(bs.r) < INFINITY;
        lo = pack_fp4<kV / 2>(y, bs.r, num, false);
        hi = pack_fp4<kV / 2>(y + kV / 2, bs.r, num, false);
      }
      if (real) FN_STORE_GLOBAL(reinterpret_cast<uint2*>(out_p + s * (P / 2)), make_uint2(lo, hi));
      // Step s of the next row into raw[s], after this step's stores: coherent loads (L2, not L1,
      // on CUDA), which the compiler may not move above stores it cannot tell apart from theirs,
      // so the registers they fill are raw[s]'s, free by now (read-only loads placed where y is
      // made were hoisted, and spilled even at 80 registers).
      if (load_next) {
#if FN_CUDA_ARCH > 0
        const uint4* q = reinterpret_cast<const uint4*>(next_p + s * P * In::kBytes);
#pragma unroll
        for (int i = 0; i < kW / 4; ++i) {
          const uint4 v = __ldcg(q + i);
          raw[s][4 * i] = v.x; raw[s][4 * i + 1] = v.y; raw[s][4 * i + 2] = v.z; raw[s][4 * i + 3] = v.w;
        }
#else
        load_vec<In::kBytes, kV, true>(next_p + s * P * In::kBytes, 0, 0, kVectors, raw[s]);
#endif
      }
    }
    // A swizzled layout's padding: blocks past H/block of a real row, every block of a padding row.
    if (c.swizzled && row < all_rows) {
      for (int64_t k = (real ? blocks : 0) + t; k < 4 * c.swizzle_tiles; k += T)
        c.scales.data[math::fp4_swizzled_offset(row, k, c.swizzle_tiles)] = 0;
    }
    loaded = load_next;
  }
}

}  // namespace gpu
}  // namespace fusednorm
