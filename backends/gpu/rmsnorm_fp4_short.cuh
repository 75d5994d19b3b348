// Compiled twice: as CUDA and as HIP (through rmsnorm_fp4.cuh). rmsnorm_fp4's kernels for short
// calls (decode): S blocks a row, one a step (and blocks for a swizzled layout's padding); with a
// residual, one block a row.
// The same formulas in the same order as the fast kernel (rmsnorm_fp4.cuh), so the same bytes; the
// host there picks one.
#pragma once

#include <stdint.h>

#include "backends/gpu/fp4_encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/io.cuh"
#include "backends/gpu/plan.h"
#include "backends/gpu/reduce.cuh"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

constexpr int kFp4SmallThreads = math::kMaxPartials / kFp4Vec;  // T of P = 4096: 512

// A short-call thread's vector y of elements e .. e + 7 of `row`, its FP4 block's kBlock / 8
// threads adjacent lanes: the block maximum, the block scale (stored by the block's first lane) and
// the packed codes, with the fast kernel's formulas. Every lane takes part in the maximum's
// shuffles; only those with `store` write.
template <int kBlock>
__device__ __forceinline__ void fp4_short_encode(const RmsnormFp4Call& c, const float (&y)[kFp4Vec], float gs, int t,
                                                 int64_t row, int32_t e, bool store) {
  constexpr int kLanes = kBlock / kFp4Vec;
  const uint32_t amax = fp4_block_amax<kGpuWarp, true>(y, kLanes);
  const math::BlockScale bs = block_scale<kBlock>(amax, gs);
  if (!store) return;
  if (t % kLanes == 0) *fp4_scale_ptr(c.lead, c.scales, c.swizzled, c.swizzle_tiles, row, e / kBlock) = char(bs.code);
  const uint32_t w = pack_fp4<kFp4Vec>(y, bs.r, amax < math::kF32InfBits && fabsf(bs.r) < INFINITY,
                                          fp4_block_small(amax, bs.r));
  FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(row_at<true>(c.lead, c.out, row) + e / 2), w);
}

// A swizzled layout's padding, for short calls: by blocks of their own (block `first` of `count`),
// in the scale tensor's 16-byte chunks q (bytes 16q .. 16q + 15: rows R·128 + g·32 + r0 for g < 4,
// the 4 block columns of tile kt, where q = (R·tiles + kt)·32 + r0; math::fp4_swizzled_offset).
// A chunk of padding rows only is one 16-byte store of zeros (where the tensor is 16-byte aligned);
// in the others, each padding row's 4 bytes and a real row's block columns past H / block are
// zeroed byte by byte. A real row's scales are its own blocks' bytes: no byte is written twice.
template <int kBlock>
__device__ __forceinline__ void fp4_swizzle_padding(const RmsnormFp4Call& c, uint32_t first, uint32_t count) {
  char* base = c.scales.data;
  const int64_t rows = c.lead.rows, blocks = c.h / kBlock;
  const uint32_t tiles = uint32_t(c.swizzle_tiles), chunks = uint32_t(c.swizzle_rows / 4) * tiles;
  const bool vec = (reinterpret_cast<uintptr_t>(base) & 15u) == 0;
  for (uint32_t q = first * blockDim.x + threadIdx.x; q < chunks; q += count * blockDim.x) {
    const uint32_t rt = q / 32, r0 = q % 32, big = rt / tiles, kt = rt - big * tiles;
    const int64_t m0 = int64_t(big) * 128 + r0;
    char* p = base + int64_t(q) * 16;
    if (m0 >= rows && vec) {
      FN_STORE_GLOBAL(reinterpret_cast<uint4*>(p), make_uint4(0, 0, 0, 0));
      continue;
    }
    for (int g = 0; g < 4; ++g)
      for (int kk = 0; kk < 4; ++kk)
        if (m0 + 32 * g >= rows || int64_t(kt) * 4 + kk >= blocks) p[4 * g + kk] = 0;
  }
}

// Short calls without a residual (decode): a block a step of each row, S blocks a row, T threads
// a block, and with swizzled scales up to 8 blocks after them that write the layout's padding
// (fp4_swizzle_padding). Thread t of block s loads the S vectors of its column t
// (elements u P + 8t + j, u < S) and adds their squares in step order in registers
// (thread_sum_squares: the fast kernel's thread t's order), and the same tree follows over the
// block's T threads (row_reduce_finish): every block of a row holds the same inv. Block s then
// computes the y, block maxima, block scales and codes of step s's vectors only (the fast
// kernel's formulas, so its bytes). A row's encoding, the most instructions of the call, is
// spread over S multiprocessors where one did it all. Not for a residual (one block's sums would
// overwrite the residual another still reads): rmsnorm_fp4_row_kernel serves those. The host
// takes it for the calls the fast kernel would take whose blocks (the padding's too) are at most a
// block a multiprocessor.
template <DType kIn, int kBlock>
__global__ void __launch_bounds__(kFp4SmallThreads)
    rmsnorm_fp4_small_kernel(FN_GRID_CONSTANT const RmsnormFp4Call c, const RowShape shape) {
  using In = InTraits<kIn>;
  using InVec = Vec<In::kBytes, kFp4Vec>;
  constexpr int kW = InVec::kWords;
  __shared__ __align__(16) float red[kFp4SmallThreads / kGpuWarp];
  const int T = shape.threads_per_row, P = shape.partials, S = shape.steps;
  const uint32_t real = uint32_t(c.lead.rows) * uint32_t(S);  // the rows' blocks; then the padding's
  if (blockIdx.x >= real) {
    gpu_wait_for_previous_grid();
    fp4_swizzle_padding<kBlock>(c, blockIdx.x - real, gridDim.x - real);
    return;
  }
  const int64_t row = blockIdx.x / unsigned(S);
  const int st = int(blockIdx.x - row * S), t = int(threadIdx.x);
  const bool live = t < T;  // a block of less than a warp's T threads is a warp: the rest idle
  const int32_t h = int32_t(c.h), e = st * P + kFp4Vec * t;
  const bool norm = c.norm == FUSEDNORM_NORM_RMS;
  const char* in_row = row_at<true>(c.lead, c.in, row);
  // Before the previous grid's writes are visible: the lines of this block's step of the row and
  // of its weights warmed in L2 (hints; the row's other blocks warm the other steps).
  warm_vec_lines<In::kBytes>(live, in_row, e, norm, c.weight, c.w_type);
  gpu_wait_for_previous_grid();
  uint32_t raw[kMaxSteps][kW] = {};
#pragma unroll
  for (int u = 0; u < kMaxSteps; ++u)
    if (live && u < S) load_vec<In::kBytes, kFp4Vec, true>(in_row, u * P + kFp4Vec * t, h, kVectors, raw[u]);
  float g[kFp4Vec] = {};
  if (live && norm) load_gamma<kFp4Vec, true>(c.w_type, c.weight, c.weight_offset, e, h, kVectors, g);
  const float gs = c.global_scale != nullptr ? load_f32_any(c.global_scale) : 1.0f;
  gpu_allow_next_grid();
  float y[kFp4Vec];  // step st's vector, selected without indexing raw at run time
#pragma unroll
  for (int u = 0; u < kMaxSteps; ++u)
    if (u == st)
#pragma unroll
      for (int j = 0; j < kFp4Vec; ++j) y[j] = In::get(raw[u], j);
  if (norm) {
    const float len = math::length_f32(c.h), eps = c.eps;
    const float inv = row_reduce_finish<kGpuWarp, false, true>(
        thread_sum_squares<In, kMaxSteps, kFp4Vec, kW>(raw, S), t, T, 0, red,
        [](float a, float b) { return math::add_rn(a, b); }, [len, eps](float ss) { return math::inv_rms(ss, len, eps); },
        static_cast<float*>(nullptr));
#pragma unroll
    for (int j = 0; j < kFp4Vec; ++j) y[j] = math::norm_apply(y[j], inv, g[j]);
  }
  fp4_short_encode<kBlock>(c, y, gs, t, row, e, live);
}

// Short calls with a residual (decode): one block a row (a swizzled layout's padding rows too),
// the row's S steps on S x T threads of their own, one vector a thread, where the fast kernel's
// thread does its S vectors one after another. The squares meet in shared
// memory; the step-0 threads add them in step order, as the fast kernel's thread does in registers
// (the canonical order), and the same tree follows (row_reduce_finish). Every thread then computes
// its vector's y and, with the block's B/8 adjacent threads, its codes (fp4_short_encode): the fast
// kernel's formulas, so its bytes. The host takes it for the calls the fast kernel would take with
// at most a block a multiprocessor and S x T a multiple of the warp of at most 1024 threads, where
// rmsnorm_fp4_small_kernel does not serve (a residual).
template <DType kIn, int kBlock>
__global__ void __launch_bounds__(kMaxBlockThreads)
    rmsnorm_fp4_row_kernel(FN_GRID_CONSTANT const RmsnormFp4Call c, const RowShape shape) {
  using In = InTraits<kIn>;
  using InVec = Vec<In::kBytes, kFp4Vec>;
  constexpr int kW = InVec::kWords;
  __shared__ __align__(16) float squares[kMaxBlockThreads][kFp4Vec];
  __shared__ __align__(16) float red[kMaxBlockThreads / kGpuWarp];
  __shared__ float result[kMaxBlockThreads];  // row_reduce_finish's, a "row" of T threads each
  __shared__ float row_inv;
  const int T = shape.threads_per_row, P = shape.partials;
  const int st = int(threadIdx.x) / T, t = int(threadIdx.x) % T;
  const int64_t row = blockIdx.x;
  const int32_t h = int32_t(c.h), e = st * P + kFp4Vec * t;
  const bool norm = c.norm == FUSEDNORM_NORM_RMS;
  gpu_wait_for_previous_grid();
  if (row >= c.lead.rows) {  // a swizzled layout's padding row: every scale 0
    for (int64_t k = threadIdx.x; k < 4 * c.swizzle_tiles; k += blockDim.x)
      *fp4_scale_ptr(c.lead, c.scales, 1, c.swizzle_tiles, row, k) = 0;
    return;
  }
  uint32_t raw[kW];
  load_vec<In::kBytes, kFp4Vec, true>(row_at<true>(c.lead, c.in, row), e, h, kVectors, raw);
  if (c.res.data != nullptr) {  // x = rn(x + residual), written back
    char* res_row = row_at<true>(c.lead, c.res, row);
    uint32_t rw[kW], sw[kW] = {};
    load_vec<In::kBytes, kFp4Vec, true>(res_row, e, h, kVectors, rw);
#pragma unroll
    for (int j = 0; j < kFp4Vec; ++j) {
      const uint32_t code = In::encode(math::add_rn(In::get(raw, j), In::get(rw, j)));
      sw[j / InVec::kPerWord] |= code << (32 / InVec::kPerWord * (j % InVec::kPerWord));
    }
    store_vec<In::kBytes, kFp4Vec, true>(res_row, e, h, kVectors, sw);
#pragma unroll
    for (int w = 0; w < kW; ++w) raw[w] = sw[w];
  }
  float g[kFp4Vec];
  if (norm) load_gamma<kFp4Vec, true>(c.w_type, c.weight, c.weight_offset, e, h, kVectors, g);
  const float gs = c.global_scale != nullptr ? load_f32_any(c.global_scale) : 1.0f;
  gpu_allow_next_grid();
  float y[kFp4Vec];
#pragma unroll
  for (int j = 0; j < kFp4Vec; ++j) y[j] = In::get(raw, j);
  if (norm) {
    float4* mine = reinterpret_cast<float4*>(squares[threadIdx.x]);
    mine[0] = make_float4(math::mul_rn(y[0], y[0]), math::mul_rn(y[1], y[1]), math::mul_rn(y[2], y[2]), math::mul_rn(y[3], y[3]));
    mine[1] = make_float4(math::mul_rn(y[4], y[4]), math::mul_rn(y[5], y[5]), math::mul_rn(y[6], y[6]), math::mul_rn(y[7], y[7]));
    __syncthreads();
    float v = 0.0f;
    if (st == 0) {
      // Step 0's squares, then each later step's added (the fast kernel's order).
      float part[kFp4Vec];
#pragma unroll
      for (int u = 0; u < kMaxSteps; ++u)
        if (u < shape.steps) {
          const float4* q = reinterpret_cast<const float4*>(squares[threadIdx.x + u * T]);
          const float4 a = q[0], b = q[1];
          const float sq[kFp4Vec] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
          for (int j = 0; j < kFp4Vec; ++j) part[j] = u == 0 ? sq[j] : math::add_rn(part[j], sq[j]);
        }
#pragma unroll
      for (int n = kFp4Vec; n > 1; n /= 2)
#pragma unroll
        for (int j = 0; j < n / 2; ++j) part[j] = math::add_rn(part[2 * j], part[2 * j + 1]);
      v = part[0];
    }
    const float len = math::length_f32(c.h), eps = c.eps;
    const float r = row_reduce_finish<kGpuWarp, true, true>(
        v, t, T, st, red, [](float a, float b) { return math::add_rn(a, b); },
        [len, eps](float ss) { return math::inv_rms(ss, len, eps); }, result);
    if (threadIdx.x == 0) row_inv = r;  // a buffer of its own: threads may still read `result`
    __syncthreads();
    const float inv = row_inv;
#pragma unroll
    for (int j = 0; j < kFp4Vec; ++j) y[j] = math::norm_apply(y[j], inv, g[j]);
  }
  fp4_short_encode<kBlock>(c, y, gs, t, row, e, true);
  if (c.swizzled)  // the padding of a real row: blocks past H / block
    for (int64_t k = c.h / kBlock + threadIdx.x; k < 4 * c.swizzle_tiles; k += blockDim.x)
      *fp4_scale_ptr(c.lead, c.scales, 1, c.swizzle_tiles, row, k) = 0;
}

}  // namespace gpu
}  // namespace fusednorm
