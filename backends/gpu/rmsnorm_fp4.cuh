// Compiled twice: as CUDA and as HIP (one generated unit each: FUSEDNORM_GPU_OPS). rmsnorm_fp4
// and dequantize_fp4 on the GPU: kernels and launchers (declared in ops.h).
//
// rmsnorm_fp4 keeps a row in registers in the canonical mapping of rmsnorm_quant (plan.h
// row_shape with 8-element vectors: thread t of a row owns elements s*P + 8t .. + 7 of step s),
// so the sum of squares is the canonical one (docs/numerics.md §2). An FP4 block (16 or 32
// elements) is then B/8 adjacent threads of one step when P >= B, else B/P consecutive steps
// of the row's P/8 threads; its |y| max is an integer max over those (order-free), its scale the
// shared math's (quant_math.h: nvfp4_block_scale / mxfp4_block_scale), and each thread encodes its
// 8 values to 4 bytes of e2m1 codes. A swizzled layout's padding rows are rows of the grid too.
//
// Two builds of the kernel: the general one (any alignment, strides, row length) and the fast one
// (kFast: every view vector-aligned, one leading dimension, H a whole number of steps of at least
// a block each), which has no element paths and no per-element bounds, reads g = w + offset from
// a table in shared memory that each thread fills for its own elements at its block's first row,
// and takes the blocks' |y| maxima with the NaN-propagating float max (CUDA). Both compute the
// same bytes (the same formulas in the same order); the host picks by the views alone. Short
// calls the fast kernel would take go to rmsnorm_fp4_small_kernel (a block a step of each row,
// and a swizzled layout's padding in blocks of its own) or, with a residual,
// rmsnorm_fp4_row_kernel (a block a row; both in
// rmsnorm_fp4_short.cuh); the encoding pieces all of them use are in fp4_encode.cuh.
#pragma once

#include <stdint.h>

#include <algorithm>

#include "backends/gpu/encode.cuh"
#include "backends/gpu/fp4_encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/host.cuh"
#include "backends/gpu/io.cuh"
#include "backends/gpu/launch.cuh"
#include "backends/gpu/ops.h"
#include "backends/gpu/plan.h"
#include "backends/gpu/reduce.cuh"
#include "backends/gpu/rmsnorm_fp4_short.cuh"
#include "backends/gpu/rmsnorm_fp4_wide.cuh"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// Up to 512 threads a block; the 4-step kernels at most kFp4Regs4 registers a thread (three
// blocks of 256 threads an SM), the 8-step ones 128.
constexpr int kFp4Regs4 = 80;
template <DType kIn, int kSteps, int kBlock, int kWarp, bool kFast>
__global__ void FN_KERNEL_BOUNDS(kMaxBlockThreads / 2, kSteps <= 4 ? kFp4Regs4 : 128)
    rmsnorm_fp4_kernel(FN_GRID_CONSTANT const RmsnormFp4Call c, const RowShape shape, const Accesses acc) {
  using In = InTraits<kIn>;
  constexpr int kFp4MaxSteps = kSteps;
  using InVec = Vec<In::kBytes, kFp4Vec>;
  constexpr int kW = InVec::kWords;
  __shared__ __align__(16) float red[2][kMaxBlockThreads / 32];
  __shared__ float inv_of_row[2][kMaxBlockThreads / 32];
  // The fast kernel's g = w + offset: this thread's two float4 of step s at slots (2s + q) *
  // blockDim.x + threadIdx.x (conflict-free 16-byte accesses; no other thread reads them).
  extern __shared__ float4 fp4_gamma_tab[];
  const int T = shape.threads_per_row, P = shape.partials, R = shape.rows_per_block, S = shape.steps;
  const int t = threadIdx.x % T, rib = threadIdx.x / T;
  constexpr int32_t B = kBlock;
  const int32_t h = int32_t(c.h);
  // Threads of a block within a step, and steps of a block (the fast kernel's P >= B).
  const int lanes = kFast ? B / kFp4Vec : (B < P ? B : P) / kFp4Vec;
  const int spb = kFast ? 1 : B > P ? B / P : 1;
  const int64_t rows = c.lead.rows;
  const int64_t all_rows = c.swizzled ? c.swizzle_rows : rows;
  const int64_t blocks = c.h / c.block;
  const bool norm = c.norm == FUSEDNORM_NORM_RMS;
  const float len = math::length_f32(c.h), eps = c.eps;
  // Launched with programmatic serialization (sm_90): the previous kernel's memory is visible
  // after the wait; the global scale is a tensor on the device, read after it too. Before it, the
  // block's first row and the weight are only warmed in L2 (hints: no value is read).
#if FN_CUDA_ARCH >= 900
  if (t == 0 && int64_t(blockIdx.x) * R + rib < rows) {
    const int64_t row0 = int64_t(blockIdx.x) * R + rib;
    gpu_prefetch_l2_range(row_at<kFast>(c.lead, c.in, row0), uint32_t(h) * In::kBytes, 0, 1);
    if (c.res.data != nullptr) gpu_prefetch_l2_range(row_at<kFast>(c.lead, c.res, row0), uint32_t(h) * In::kBytes, 0, 1);
  }
  if (norm && threadIdx.x == 32 % blockDim.x)
    gpu_prefetch_l2_range(c.weight, uint32_t(h) * (c.w_type == DType::kF32 ? 4u : 2u), 0, 1);
#endif
  gpu_wait_for_previous_grid();
  gpu_allow_next_grid();
  const float gs = c.global_scale != nullptr ? load_f32_any(c.global_scale) : 1.0f;

  int parity = 0;
  for (int64_t first = int64_t(blockIdx.x) * R; first < all_rows; first += int64_t(gridDim.x) * R, parity ^= 1) {
    const int64_t row = first + rib;
    const bool real = rib < R && row < rows;
    // t and threadIdx.x laundered once a row: the offsets derived from them are computed inside
    // the row loop instead of being hoisted and kept across it (they spilled).
    int tl = t, xl = int(threadIdx.x);
    gpu_launder(tl);
    gpu_launder(xl);
    // The block's next row into L2 while this one is computed (the grid is persistent); on sm_90
    // one bulk prefetch by the row's thread 0 (gpu_prefetch_l2_range), the other warps skip it.
    const int64_t next = row + int64_t(gridDim.x) * R;
#if FN_CUDA_ARCH >= 900
    if (next < rows && t == 0) {
#else
    if (next < rows) {
#endif
      gpu_prefetch_l2_range(row_at<kFast>(c.lead, c.in, next), uint32_t(h) * In::kBytes, t, T);
      if (c.res.data != nullptr) gpu_prefetch_l2_range(row_at<kFast>(c.lead, c.res, next), uint32_t(h) * In::kBytes, t, T);
    }
    // 1. x as the input dtype's words (with the residual sum, rounded and written back), the
    // partial sums of squares. The words, not f32 values, stay in registers until inv is known
    // (half as many for 16-bit inputs); then y, once, for the maxima and the codes.
    uint32_t raw[kFp4MaxSteps][kW];
    char* in_row = real ? row_at<kFast>(c.lead, c.in, row) : nullptr;
    char* res_row = real && c.res.data != nullptr ? row_at<kFast>(c.lead, c.res, row) : nullptr;
#pragma unroll
    for (int s = 0; s < kFp4MaxSteps; ++s) {
      const int32_t e = s * P + kFp4Vec * tl;
#pragma unroll
      for (int w = 0; w < kW; ++w) raw[s][w] = 0;
      if (s < S && (kFast || e < h) && real) {
        load_vec<In::kBytes, kFp4Vec, kFast>(in_row, e, h, acc.in, raw[s]);
        if (res_row != nullptr) {
          uint32_t rw[kW], sw[kW] = {};
          load_vec<In::kBytes, kFp4Vec, kFast>(res_row, e, h, acc.in, rw);
#pragma unroll
          for (int j = 0; j < kFp4Vec; ++j) {
            const uint32_t code = In::encode(math::add_rn(In::get(raw[s], j), In::get(rw, j)));
            sw[j / InVec::kPerWord] |= code << (32 / InVec::kPerWord * (j % InVec::kPerWord));
          }
          store_vec<In::kBytes, kFp4Vec, kFast>(res_row, e, h, acc.in, sw);
#pragma unroll
          for (int w = 0; w < kW; ++w) raw[s][w] = sw[w];
        }
      }
    }
    // The fast kernel's weight table, filled at the block's first row after its loads are issued
    // (the two latencies overlap).
    if (kFast && norm && first == int64_t(blockIdx.x) * R) {
#pragma unroll
      for (int s = 0; s < kFp4MaxSteps; ++s)
        if (s < S) {
          float g[kFp4Vec];
          load_gamma<kFp4Vec, true>(c.w_type, c.weight, c.weight_offset, s * P + kFp4Vec * t, h, kVectors, g);
          fp4_gamma_tab[(2 * s) * blockDim.x + threadIdx.x] = make_float4(g[0], g[1], g[2], g[3]);
          fp4_gamma_tab[(2 * s + 1) * blockDim.x + threadIdx.x] = make_float4(g[4], g[5], g[6], g[7]);
        }
    }
    float inv = 1.0f;
    if (norm) {
      inv = row_reduce_finish<kWarp, false, true>(
          thread_sum_squares<In, kFp4MaxSteps, kFp4Vec>(raw, S), t, T, rib, red[parity],
          [](float a, float b) { return math::add_rn(a, b); }, [len, eps](float ss) { return math::inv_rms(ss, len, eps); },
          inv_of_row[parity]);
    }
    // y of step s: (x × inv) × g, g = w + offset read per row (it stays in L1 / L2); quant-only x.
    const auto y_of = [&](int s, float y[kFp4Vec]) {
      const int32_t e = s * P + kFp4Vec * tl;
#pragma unroll
      for (int j = 0; j < kFp4Vec; ++j) y[j] = In::get(raw[s], j);
      if (norm && s < S && (kFast || e < h)) {
        float g[kFp4Vec];
        if (kFast) {
          const float4 lo = fp4_gamma_tab[(2 * s) * blockDim.x + xl];
          const float4 hi = fp4_gamma_tab[(2 * s + 1) * blockDim.x + xl];
          g[0] = lo.x; g[1] = lo.y; g[2] = lo.z; g[3] = lo.w;
          g[4] = hi.x; g[5] = hi.y; g[6] = hi.z; g[7] = hi.w;
        } else {
          load_gamma<kFp4Vec, false>(c.w_type, c.weight, c.weight_offset, e, h, acc.w, g);
        }
#pragma unroll
        for (int j = 0; j < kFp4Vec; ++j) y[j] = math::norm_apply(y[j], inv, g[j]);
      }
    };

    // 2. the blocks' |y| maxima (lanes of a step, then steps of a block), scales, codes.
    char* out_row = real ? row_at<kFast>(c.lead, c.out, row) : nullptr;
    // |y| max of this thread's 8 values of a step, then over the `lanes` threads of its block.
    const auto step_amax = [&](const float y[kFp4Vec]) { return fp4_block_amax<kWarp, kFast>(y, lanes); };
    // The codes of step s from its y and multiplier, stored.
    const auto store_codes = [&](int s, const float y[kFp4Vec], float r, uint32_t amax) {
      const int32_t e = s * P + kFp4Vec * tl;
      const uint32_t w = pack_fp4<kFp4Vec>(y, r, amax < math::kF32InfBits && fabsf(r) < INFINITY,
                                                  fp4_block_small(amax, r));
      char* p = out_row + e / 2;
      if (kFast || acc.out == kVectors) {
        FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(p), w);
      } else {
#pragma unroll
        for (int b = 0; b < kFp4Vec / 2; ++b) p[b] = char(w >> (8 * b));
      }
    };
    constexpr int kLanes = kBlock / kFp4Vec;
    if constexpr (kFast) {
      // Two steps at a time (a block lies in one step: kLanes threads): y of both, their blocks'
      // maxima, one scale a thread (a block's lanes 0 and 1 take the pair's first and second
      // step; MXFP4's lanes 2 and 3 repeat them), r to the block's lanes by a shuffle, codes. A
      // pair's y only are live at a time.
      const int my = t % kLanes, lane = int(threadIdx.x % kWarp), mine = my & 1;
#pragma unroll
      for (int s0 = 0; s0 < kFp4MaxSteps; s0 += 2) {
        if (s0 >= S) continue;  // uniform; past S no step of the pair exists
        float y[2][kFp4Vec];
        uint32_t am[2];
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          y_of(s0 + k, y[k]);  // past S: raw is 0
          am[k] = step_amax(y[k]);
        }
        const math::BlockScale bs = block_scale<kBlock>(mine ? am[1] : am[0], gs);
        const int s_own = s0 + mine;
        if (my < 2 && s_own < S && real)
          *fp4_scale_ptr(c.lead, c.scales, c.swizzled, c.swizzle_tiles, row, (s_own * P + kFp4Vec * (tl - my)) / B) =
              char(bs.code);
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const float r = FN_SHFL(bs.r, lane - my + k, kWarp);
          if (s0 + k < S && real) store_codes(s0 + k, y[k], r, am[k]);
        }
      }
    } else {
      // y is kept from the maxima to the codes in the 4-step kernels, computed again in the
      // 8-step ones (whose 64 values would spill).
      constexpr bool kKeepY = kSteps <= 4;
      uint32_t am[kFp4MaxSteps];
      float ys[kKeepY ? kFp4MaxSteps : 1][kFp4Vec];
#pragma unroll
      for (int s = 0; s < kFp4MaxSteps; ++s) {
        float y_now[kFp4Vec];
        float* y = kKeepY ? ys[s] : y_now;
        y_of(s, y);
        am[s] = step_amax(y);
      }
      // Blocks of spb = 2 or 4 steps: a butterfly over aligned groups of steps.
#pragma unroll
      for (int m = 1; m < kFp4MaxSteps; m *= 2)
        if (m < spb) {
          uint32_t o[kFp4MaxSteps];
#pragma unroll
          for (int s = 0; s < kFp4MaxSteps; ++s) o[s] = am[s ^ m];
#pragma unroll
          for (int s = 0; s < kFp4MaxSteps; ++s) am[s] = o[s] > am[s] ? o[s] : am[s];
        }
      // The multiplier of each step's block. A block of kLanes threads (rows of at least a block
      // a step): thread t computes the scales of the steps s = t (mod kLanes) and stores them;
      // the others take r by a shuffle (a kLanes-th of the scale work a thread). Shorter rows:
      // every thread computes its blocks' scales.
      float r[kFp4MaxSteps];
      constexpr int kPer = (kFp4MaxSteps + kLanes - 1) / kLanes;
      if (P >= kBlock) {
        const int my = t % kLanes, lane = int(threadIdx.x % kWarp);
        float mine[kPer];
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          uint32_t a = 0;
#pragma unroll
          for (int s = 0; s < kFp4MaxSteps; ++s) a = s == k * kLanes + my ? am[s] : a;
          const math::BlockScale bs = block_scale<kBlock>(a, gs);
          mine[k] = bs.r;
          const int s_own = k * kLanes + my;
          const int32_t e0 = s_own * P + kFp4Vec * (t - my);
          if (s_own < S && e0 < h && real)
            *fp4_scale_ptr(c.lead, c.scales, c.swizzled, c.swizzle_tiles, row, e0 / B) = char(bs.code);
        }
#pragma unroll
        for (int s = 0; s < kFp4MaxSteps; ++s) r[s] = FN_SHFL(mine[s / kLanes], lane - my + s % kLanes, kWarp);
      } else {
#pragma unroll
        for (int s = 0; s < kFp4MaxSteps; ++s) {
          const int32_t e = s * P + kFp4Vec * tl;
          const math::BlockScale bs = block_scale<kBlock>(am[s], gs);
          r[s] = bs.r;
          if (s < S && e < h && real && t % lanes == 0 && s % spb == 0)
            *fp4_scale_ptr(c.lead, c.scales, c.swizzled, c.swizzle_tiles, row, e / B) = char(bs.code);
        }
      }
#pragma unroll
      for (int s = 0; s < kFp4MaxSteps; ++s) {
        if (!(s < S && s * P + kFp4Vec * tl < h && real)) continue;
        float y_now[kFp4Vec];
        if (!kKeepY) y_of(s, y_now);
        store_codes(s, kKeepY ? ys[s] : y_now, r[s], am[s]);
      }
    }
    // A swizzled layout's padding: blocks past H/block of a real row, every block of a padding row.
    if (c.swizzled && rib < R && row < all_rows) {
      for (int64_t k = (row < rows ? blocks : 0) + t; k < 4 * c.swizzle_tiles; k += T)
        *fp4_scale_ptr(c.lead, c.scales, 1, c.swizzle_tiles, row, k) = 0;
    }
  }
}

// One thread per 8 codes (4 bytes): out = rn((dec(q) × dec(sf)) / gs).
constexpr int kDequantVec = 8;
template <DType kOut>
__global__ void __launch_bounds__(256) dequantize_fp4_kernel(FN_GRID_CONSTANT const DequantizeFp4Call c) {
  using Out = InTraits<kOut>;
  const int64_t per_row = c.h / kDequantVec;
  const float gs = c.global_scale != nullptr ? load_f32_any(c.global_scale) : 1.0f;
  const bool nv = c.format == FUSEDNORM_FP4_NVFP4;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < c.lead.rows * per_row;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / per_row, e = (i % per_row) * kDequantVec;
    const char* q = row_ptr(c.lead, c.codes, row) + e / 2;
    char* out = row_ptr(c.lead, c.out, row);
    const uint32_t sf = uint8_t(*fp4_scale_ptr(c.lead, c.scales, c.swizzled, c.swizzle_tiles, row, e / c.block));
    const float scale = nv ? math::f8e4m3fn::decode(sf) : math::decode_e8m0(sf);
#pragma unroll
    for (int j = 0; j < kDequantVec; ++j) {
      const uint32_t code = (uint8_t(q[j / 2]) >> (4 * (j & 1))) & 0xFu;
      const float v = math::div_rn(math::mul_rn(math::f4e2m1::decode(code), scale), gs);
      store_elem<Out::kBytes>(out + (e + j) * Out::kBytes, 0, Out::encode(v), kBytesOnly);
    }
  }
}

namespace {

using Fp4Kernel = void (*)(RmsnormFp4Call, RowShape, Accesses);

// A persistent grid: as many blocks as can be resident (occupancy asked once per kernel, block
// size and shared memory: launch.cuh), at most one a row group; each block walks its rows and
// prefetches its next one. `smem`: the fast kernels' weight table.
template <class Fn, class... Extra>
inline gpuError_t launch_fp4(Fn fn, const RmsnormFp4Call& c, const RowShape& shape, size_t smem, int device,
                             gpuStream_t stream, const Extra&... extra) {
  const DeviceFacts& dev = g_devices[size_t(device)];
  const unsigned threads = unsigned(shape.rows_per_block * shape.threads_per_row);
  int per_sm = 1;
  const gpuError_t e = blocks_per_sm(fn, device, threads, smem, &per_sm);
  if (e != gpuSuccess) return e;
  const int64_t all_rows = c.swizzled ? c.swizzle_rows : c.lead.rows;
  const int64_t groups = (all_rows + shape.rows_per_block - 1) / shape.rows_per_block;
  const int64_t grid = std::min<int64_t>(groups, int64_t(per_sm) * dev.multiprocessors);
  return launch_pdl(fn, dev, unsigned(grid), threads, smem, stream, c, shape, extra...);
}

// The general kernel holds up to 8 steps; the fast ones 4 (three blocks of 256 threads an SM) or 8.
// Fast builds for f32 input only: 16-bit inputs take the wide kernel (rmsnorm_fp4_wide.cuh), or,
// where their codes' rows do not allow its 8-byte stores, the general one.
template <DType kIn>
Fp4Kernel fp4_kernel_for(bool nv, bool fast, int steps) {
  if constexpr (kIn == DType::kF32) {
    if (fast && steps <= 4) return nv ? &rmsnorm_fp4_kernel<kIn, 4, 16, kGpuWarp, true> : &rmsnorm_fp4_kernel<kIn, 4, 32, kGpuWarp, true>;
    if (fast) return nv ? &rmsnorm_fp4_kernel<kIn, kMaxSteps, 16, kGpuWarp, true> : &rmsnorm_fp4_kernel<kIn, kMaxSteps, 32, kGpuWarp, true>;
  }
  return nv ? &rmsnorm_fp4_kernel<kIn, kMaxSteps, 16, kGpuWarp, false> : &rmsnorm_fp4_kernel<kIn, kMaxSteps, 32, kGpuWarp, false>;
}

using Fp4SmallKernel = void (*)(RmsnormFp4Call, RowShape);
template <DType kIn>
Fp4SmallKernel fp4_small_for(bool nv, bool row_kernel) {
  if (row_kernel) return nv ? &rmsnorm_fp4_row_kernel<kIn, 16> : &rmsnorm_fp4_row_kernel<kIn, 32>;
  return nv ? &rmsnorm_fp4_small_kernel<kIn, 16> : &rmsnorm_fp4_small_kernel<kIn, 32>;
}

template <DType kIn>
Fp4SmallKernel fp4_wide_for(bool nv, bool four) {
  if (four) return nv ? &rmsnorm_fp4_wide_kernel<kIn, 16, kGpuWarp, 4> : &rmsnorm_fp4_wide_kernel<kIn, 32, kGpuWarp, 4>;
  return nv ? &rmsnorm_fp4_wide_kernel<kIn, 16, kGpuWarp, kFp4WideMaxSteps>
            : &rmsnorm_fp4_wide_kernel<kIn, 32, kGpuWarp, kFp4WideMaxSteps>;
}

}  // namespace

fusednorm_status plugin_rmsnorm_fp4(const RmsnormFp4Call* call, int32_t device, void* stream, char* msg, size_t n) {
  const RmsnormFp4Call& c = *call;
  constexpr int64_t kMaxH = int64_t(kMaxSteps) * math::kMaxPartials;
  if (c.h > kMaxH)
    return say(FUSEDNORM_UNSUPPORTED, msg, n, "input H = %lld: the " FN_GPU_VENDOR
               " backend keeps a row in registers and supports H <= %lld", (long long)c.h, (long long)kMaxH);
  const int64_t all_rows = c.swizzled ? c.swizzle_rows : c.lead.rows;
  if (all_rows == 0) return FUSEDNORM_SUCCESS;
  DeviceGuard guard(device);
  if (guard.error != gpuSuccess) return vendor_error(guard.error, "selecting the device", msg, n);
  RowShape shape = row_shape(c.h, kFp4Vec);
  // Rows shorter than a block's threads share a block, R rows of T threads (a power of two).
  shape.rows_per_block = shape.threads_per_row >= kRowThreads ? 1 : kRowThreads / shape.threads_per_row;
  const int in_bytes = c.in_type == DType::kF32 ? 4 : 2, w_bytes = c.w_type == DType::kF32 ? 4 : 2;
  Accesses acc;
  acc.in = std::min(access_for(c.lead, c.in, in_bytes, shape.vec * in_bytes),
                    access_for(c.lead, c.res, in_bytes, shape.vec * in_bytes));
  acc.out = access_for(c.lead, c.out, 1, shape.vec / 2) == kVectors ? kVectors : kBytesOnly;
  RowView wv;
  wv.data = const_cast<char*>(c.weight);
  acc.w = access_for(LeadShape(), wv, w_bytes, shape.vec * w_bytes);
  // The fast kernel where every view allows vectors, one leading dimension indexes the rows, the
  // row is whole steps of at least 32 elements (a block of either format within a step), and the
  // weight table fits beside the kernel's static shared memory (1 KiB). From the views and H alone.
  const bool nv = c.format == FUSEDNORM_FP4_NVFP4, norm = c.norm == FUSEDNORM_NORM_RMS;
  const size_t table = norm ? size_t(shape.rows_per_block) * shape.threads_per_row * shape.steps * kFp4Vec * sizeof(float) : 0;
  const bool fast = c.lead.ndim <= 1 && c.h % shape.partials == 0 && shape.partials >= 32 && acc.in == kVectors &&
                    acc.out == kVectors && acc.w == kVectors && table + 1024 <= g_devices[size_t(device)].max_smem_per_block;
  // Short calls: the small kernel (a block a step of each row, and the padding's blocks), or with
  // a residual the row kernel (a block a row), from the views, H and the row count; the bytes are
  // the fast kernel's.
  const int sms = g_devices[size_t(device)].multiprocessors;
  const int small_threads = std::max(shape.threads_per_row, kGpuWarp);
  // A swizzled layout's padding: a block for every 4 chunks of 16 bytes a thread, at most 8.
  const int64_t pad_chunks = c.swizzled ? c.swizzle_rows / 4 * c.swizzle_tiles : 0;
  const int64_t pad_blocks = std::min<int64_t>(8, (pad_chunks + 4 * small_threads - 1) / (4 * small_threads));
  const int64_t small_blocks = c.lead.rows * shape.steps + pad_blocks;
  const int per_row = shape.steps * shape.threads_per_row;
  const bool row_kernel = c.res.data != nullptr;
  if (fast && (row_kernel ? per_row <= kMaxBlockThreads && per_row % kGpuWarp == 0 && all_rows <= sms
                   : shape.threads_per_row <= kFp4SmallThreads && small_blocks <= sms)) {
    const Fp4SmallKernel fs = c.in_type == DType::kF32   ? fp4_small_for<DType::kF32>(nv, row_kernel)
                              : c.in_type == DType::kF16 ? fp4_small_for<DType::kF16>(nv, row_kernel)
                                                         : fp4_small_for<DType::kBF16>(nv, row_kernel);
    const int64_t grid = row_kernel ? all_rows : small_blocks;
    const int threads = row_kernel ? per_row : small_threads;
    gpuError_t e = launch_pdl(fs, g_devices[size_t(device)], unsigned(grid), unsigned(threads), 0,
                              static_cast<gpuStream_t>(stream), c, shape);
    if (e == gpuSuccess) e = gpuGetLastError();
    if (e != gpuSuccess) return vendor_error(e, "launching rmsnorm_fp4", msg, n);
    return FUSEDNORM_SUCCESS;
  }
  // 16-bit inputs of up to 8 steps: the wide kernel (16 elements a thread and step), where the
  // codes' rows allow 8-byte stores and its weight table fits.
  // Swizzled scales need P / block a multiple of 4 there (a step's blocks whole tiles: H >= 256 for
  // NVFP4, 512 for MXFP4).
  if (fast && c.in_type != DType::kF32 && shape.steps <= kFp4WideMaxSteps &&
      (!c.swizzled || shape.partials % (nv ? 64 : 128) == 0) &&
      access_for(c.lead, c.out, 1, kFp4WideVec / 2) == kVectors) {
    RowShape wide = row_shape(c.h, kFp4WideVec);
    const size_t wtable = norm ? fp4_wide_table_bytes(c.h) : 0;
    if (wtable + 2048 <= g_devices[size_t(device)].max_smem_per_block) {
      const bool four = shape.steps == kFp4WideSteps;
      const Fp4SmallKernel fw = c.in_type == DType::kF16 ? fp4_wide_for<DType::kF16>(nv, four) : fp4_wide_for<DType::kBF16>(nv, four);
      gpuError_t e = launch_fp4(fw, c, wide, wtable, device, static_cast<gpuStream_t>(stream));
      if (e == gpuSuccess) e = gpuGetLastError();
      if (e != gpuSuccess) return vendor_error(e, "launching rmsnorm_fp4", msg, n);
      return FUSEDNORM_SUCCESS;
    }
  }
  const Fp4Kernel fn = c.in_type == DType::kF32   ? fp4_kernel_for<DType::kF32>(nv, fast, shape.steps)
                       : c.in_type == DType::kF16 ? fp4_kernel_for<DType::kF16>(nv, fast, shape.steps)
                                                  : fp4_kernel_for<DType::kBF16>(nv, fast, shape.steps);
  gpuError_t e = launch_fp4(fn, c, shape, fast && c.in_type == DType::kF32 ? table : 0, device, static_cast<gpuStream_t>(stream), acc);
  if (e == gpuSuccess) e = gpuGetLastError();
  if (e != gpuSuccess) return vendor_error(e, "launching rmsnorm_fp4", msg, n);
  return FUSEDNORM_SUCCESS;
}

fusednorm_status plugin_dequantize_fp4(const DequantizeFp4Call* call, int32_t device, void* stream, char* msg,
                                       size_t n) {
  const DequantizeFp4Call& c = *call;
  if (c.lead.rows == 0) return FUSEDNORM_SUCCESS;
  DeviceGuard guard(device);
  if (guard.error != gpuSuccess) return vendor_error(guard.error, "selecting the device", msg, n);
  const int64_t work = c.lead.rows * (c.h / kDequantVec);
  const unsigned grid = unsigned(std::min<int64_t>((work + 255) / 256, int64_t(1) << 20));
  const gpuStream_t st = static_cast<gpuStream_t>(stream);
  switch (c.out_type) {
    case DType::kF32: dequantize_fp4_kernel<DType::kF32><<<grid, 256, 0, st>>>(c); break;
    case DType::kF16: dequantize_fp4_kernel<DType::kF16><<<grid, 256, 0, st>>>(c); break;
    default: dequantize_fp4_kernel<DType::kBF16><<<grid, 256, 0, st>>>(c); break;
  }
  const gpuError_t e = gpuGetLastError();
  if (e != gpuSuccess) return vendor_error(e, "launching dequantize_fp4", msg, n);
  return FUSEDNORM_SUCCESS;
}

}  // namespace gpu
}  // namespace fusednorm
