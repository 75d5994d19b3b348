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
#pragma once

#include <stdint.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/host.cuh"
#include "backends/gpu/io.cuh"
#include "backends/gpu/ops.h"
#include "backends/gpu/plan.h"
#include "backends/gpu/reduce.cuh"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// A thread loads vectors of 8 elements and keeps up to kSteps of them: a kernel for rows of up to
// 4 steps and one for up to 8 (blocks of at most 512 threads, so 128 registers a thread).
constexpr int kFp4Vec = 8;

// The f32 value at any alignment (4 byte loads): the global scale tensor may sit anywhere.
__device__ __forceinline__ float load_f32_any(const char* p) {
  uint32_t u = 0;
#pragma unroll
  for (int b = 0; b < 4; ++b) u |= uint32_t(reinterpret_cast<const uint8_t*>(p)[b]) << (8 * b);
  return math::float_of(u);
}

// kVec e2m1 codes of v × r in one word, element j in bits 4j .. 4j+3 (element 2k in the low nibble
// of byte k). Where no v × r can be NaN (`num`: the block's y are finite, so its amax is below
// Inf's bits, and r is finite) the float-arithmetic encoder, else the branch-free one (both proven
// equal to the shared one by verify_encoders).
template <int kVec>
__device__ __forceinline__ uint32_t pack_fp4(const float v[kVec], float r, bool num) {
  uint32_t w = 0;
  if (num) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) w |= math::encode_f4e2m1_num(math::mul_rn(v[j], r)) << (4 * j);
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) w |= math::encode_f4e2m1_sel(math::mul_rn(v[j], r)) << (4 * j);
  }
  return w;
}

// The block scale of amax: NVFP4 (kBlock 16) or MXFP4 (32), the shared math.
template <int kBlock>
__device__ __forceinline__ math::BlockScale block_scale(uint32_t amax, float gs) {
  return kBlock == 16 ? math::nvfp4_block_scale(amax, gs) : math::mxfp4_block_scale(amax);
}

// Up to 512 threads a block; the 4-step kernels at most kFp4Regs4 registers a thread (three
// blocks of 256 threads an SM), the 8-step ones 128.
constexpr int kFp4Regs4 = 80;
template <DType kIn, int kSteps, int kBlock, int kWarp>
__global__ void FN_KERNEL_BOUNDS(kMaxBlockThreads / 2, kSteps <= 4 ? kFp4Regs4 : 128)
    rmsnorm_fp4_kernel(FN_GRID_CONSTANT const RmsnormFp4Call c, const RowShape shape, const Accesses acc) {
  using In = InTraits<kIn>;
  constexpr int kFp4MaxSteps = kSteps;
  using InVec = Vec<In::kBytes, kFp4Vec>;
  constexpr int kW = InVec::kWords;
  __shared__ __align__(16) float red[2][kMaxBlockThreads / 32];
  __shared__ float inv_of_row[2][kMaxBlockThreads / 32];
  const int T = shape.threads_per_row, P = shape.partials, R = shape.rows_per_block, S = shape.steps;
  const int t = threadIdx.x % T, rib = threadIdx.x / T;
  constexpr int32_t B = kBlock;
  const int32_t h = int32_t(c.h);
  const int lanes = (B < P ? B : P) / kFp4Vec;  // threads of a block within a step
  const int spb = B > P ? B / P : 1;            // steps of a block
  const int64_t rows = c.lead.rows;
  const int64_t all_rows = c.swizzled ? c.swizzle_rows : rows;
  const int64_t blocks = c.h / c.block;
  const float gs = c.global_scale != nullptr ? load_f32_any(c.global_scale) : 1.0f;
  const bool norm = c.norm == FUSEDNORM_NORM_RMS;
  const float len = math::length_f32(c.h), eps = c.eps;

  int parity = 0;
  for (int64_t first = int64_t(blockIdx.x) * R; first < all_rows; first += int64_t(gridDim.x) * R, parity ^= 1) {
    const int64_t row = first + rib;
    const bool real = rib < R && row < rows;
    // The block's next row into L2 while this one is computed (the grid is persistent).
    const int64_t next = row + int64_t(gridDim.x) * R;
    if (next < rows) {
      gpu_prefetch_l2_range(row_at<false>(c.lead, c.in, next), uint32_t(h) * In::kBytes, t, T);
      if (c.res.data != nullptr) gpu_prefetch_l2_range(row_at<false>(c.lead, c.res, next), uint32_t(h) * In::kBytes, t, T);
    }
    // 1. x as the input dtype's words (with the residual sum, rounded and written back), the
    // partial sums of squares. The words, not f32 values, stay in registers until inv is known
    // (half as many for 16-bit inputs); then y, once, for the maxima and the codes.
    uint32_t raw[kFp4MaxSteps][kW];
    char* in_row = real ? row_at<false>(c.lead, c.in, row) : nullptr;
    char* res_row = real && c.res.data != nullptr ? row_at<false>(c.lead, c.res, row) : nullptr;
#pragma unroll
    for (int s = 0; s < kFp4MaxSteps; ++s) {
      const int32_t e = s * P + kFp4Vec * t;
#pragma unroll
      for (int w = 0; w < kW; ++w) raw[s][w] = 0;
      if (s < S && e < h && real) {
        load_vec<In::kBytes, kFp4Vec>(in_row, e, h, acc.in, raw[s]);
        if (res_row != nullptr) {
          uint32_t rw[kW], sw[kW] = {};
          load_vec<In::kBytes, kFp4Vec>(res_row, e, h, acc.in, rw);
#pragma unroll
          for (int j = 0; j < kFp4Vec; ++j) {
            const uint32_t code = In::encode(math::add_rn(In::get(raw[s], j), In::get(rw, j)));
            sw[j / InVec::kPerWord] |= code << (32 / InVec::kPerWord * (j % InVec::kPerWord));
          }
          store_vec<In::kBytes, kFp4Vec>(res_row, e, h, acc.in, sw);
#pragma unroll
          for (int w = 0; w < kW; ++w) raw[s][w] = sw[w];
        }
      }
    }
    float inv = 1.0f;
    if (norm) {
      float part[kFp4Vec];
#pragma unroll
      for (int j = 0; j < kFp4Vec; ++j) part[j] = 0.0f;
#pragma unroll
      for (int s = 0; s < kFp4MaxSteps; ++s)
#pragma unroll
        for (int j = 0; j < kFp4Vec; ++j)
          if (s < S) {
            const float x = In::get(raw[s], j);
            part[j] = math::add_rn(part[j], math::mul_rn(x, x));
          }
#pragma unroll
      for (int n = kFp4Vec; n > 1; n /= 2)
#pragma unroll
        for (int j = 0; j < n / 2; ++j) part[j] = math::add_rn(part[2 * j], part[2 * j + 1]);
      inv = row_reduce_finish<kWarp, false, true>(
          part[0], t, T, rib, red[parity], [](float a, float b) { return math::add_rn(a, b); },
          [len, eps](float ss) { return math::inv_rms(ss, len, eps); }, inv_of_row[parity]);
    }
    // y of step s: (x × inv) × g, g = w + offset read per row (it stays in L1 / L2); quant-only x.
    const auto y_of = [&](int s, float y[kFp4Vec]) {
      const int32_t e = s * P + kFp4Vec * t;
#pragma unroll
      for (int j = 0; j < kFp4Vec; ++j) y[j] = In::get(raw[s], j);
      if (norm && s < S && e < h) {
        float g[kFp4Vec];
        load_gamma<kFp4Vec, false>(c.w_type, c.weight, c.weight_offset, e, h, acc.w, g);
#pragma unroll
        for (int j = 0; j < kFp4Vec; ++j) y[j] = math::norm_apply(y[j], inv, g[j]);
      }
    };

    // 2. the blocks' |y| maxima (lanes of a step, then steps of a block), scales, codes. y is
    // kept from the maxima to the codes.
    char* out_row = real ? row_at<false>(c.lead, c.out, row) : nullptr;
    uint32_t am[kFp4MaxSteps];
    float ys[kFp4MaxSteps][kFp4Vec];
#pragma unroll
    for (int s = 0; s < kFp4MaxSteps; ++s) {
      uint32_t m = 0;
      float* y = ys[s];
      y_of(s, y);
#pragma unroll
      for (int j = 0; j < kFp4Vec; ++j) {
        const uint32_t b = math::bits_of(y[j]) & math::kF32AbsMask;
        m = b > m ? b : m;
      }
#pragma unroll
      for (int k = 1; k < kWarp; k *= 2)
        if (k < lanes) {
          const uint32_t o = FN_SHFL_XOR(m, k, kWarp);
          m = o > m ? o : m;
        }
      am[s] = m;
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
    // a step): thread t computes the scales of the steps s = t (mod kLanes) and stores them; the
    // others take r by a shuffle (a kLanes-th of the scale work a thread). Shorter rows: every
    // thread computes its blocks' scales.
    float r[kFp4MaxSteps];
    constexpr int kLanes = kBlock / kFp4Vec, kPer = (kFp4MaxSteps + kLanes - 1) / kLanes;
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
        const int32_t e = s * P + kFp4Vec * t;
        const math::BlockScale bs = block_scale<kBlock>(am[s], gs);
        r[s] = bs.r;
        if (s < S && e < h && real && t % lanes == 0 && s % spb == 0)
          *fp4_scale_ptr(c.lead, c.scales, c.swizzled, c.swizzle_tiles, row, e / B) = char(bs.code);
      }
    }
#pragma unroll
    for (int s = 0; s < kFp4MaxSteps; ++s) {
      const int32_t e = s * P + kFp4Vec * t;
      if (!(s < S && e < h && real)) continue;
      const uint32_t w = pack_fp4<kFp4Vec>(ys[s], r[s], am[s] < math::kF32InfBits && fabsf(r[s]) < INFINITY);
      char* p = out_row + e / 2;
      if (acc.out == kVectors) {
        FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(p), w);
      } else {
#pragma unroll
        for (int b = 0; b < kFp4Vec / 2; ++b) p[b] = char(w >> (8 * b));
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

// A persistent grid: as many blocks as can be resident (occupancy asked once per kernel and block
// size), at most one a row group; each block walks its rows and prefetches its next one.
inline gpuError_t launch_fp4(Fp4Kernel fn, const RmsnormFp4Call& c, const RowShape& shape, const Accesses& acc,
                             int device, gpuStream_t stream) {
  struct Known {
    Fp4Kernel fn;
    int device;
    unsigned threads;
    int per_sm;
  };
  static std::mutex mu;
  static std::vector<Known> known;
  const unsigned threads = unsigned(shape.rows_per_block * shape.threads_per_row);
  int per_sm = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const Known& k : known)
      if (k.fn == fn && k.device == device && k.threads == threads) per_sm = k.per_sm;
    if (per_sm == 0) {
      const gpuError_t e = gpuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, int(threads), 0);
      if (e != gpuSuccess) return e;
      per_sm = std::max(per_sm, 1);
      known.push_back(Known{fn, device, threads, per_sm});
    }
  }
  const int64_t all_rows = c.swizzled ? c.swizzle_rows : c.lead.rows;
  const int64_t groups = (all_rows + shape.rows_per_block - 1) / shape.rows_per_block;
  const int64_t grid = std::min<int64_t>(groups, int64_t(per_sm) * g_devices[device].multiprocessors);
  fn<<<unsigned(grid), threads, 0, stream>>>(c, shape, acc);
  return gpuGetLastError();
}

template <DType kIn>
gpuError_t launch_rmsnorm_fp4_in(const RmsnormFp4Call& c, const RowShape& shape, const Accesses& acc, int device,
                                 gpuStream_t stream) {
  const bool nv = c.format == FUSEDNORM_FP4_NVFP4;
  Fp4Kernel fn = shape.steps <= 4 ? (nv ? &rmsnorm_fp4_kernel<kIn, 4, 16, kGpuWarp> : &rmsnorm_fp4_kernel<kIn, 4, 32, kGpuWarp>)
                                  : (nv ? &rmsnorm_fp4_kernel<kIn, kMaxSteps, 16, kGpuWarp>
                                        : &rmsnorm_fp4_kernel<kIn, kMaxSteps, 32, kGpuWarp>);
  return launch_fp4(fn, c, shape, acc, device, stream);
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
  const gpuStream_t st = static_cast<gpuStream_t>(stream);
  gpuError_t e;
  switch (c.in_type) {
    case DType::kF32: e = launch_rmsnorm_fp4_in<DType::kF32>(c, shape, acc, device, st); break;
    case DType::kF16: e = launch_rmsnorm_fp4_in<DType::kF16>(c, shape, acc, device, st); break;
    default: e = launch_rmsnorm_fp4_in<DType::kBF16>(c, shape, acc, device, st); break;
  }
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
