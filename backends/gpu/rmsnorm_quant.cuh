// Compiled twice: as CUDA (backends/cuda) and as HIP (backends/hip).
// rmsnorm_quant on the GPU: one row per group of T = P/8 threads, the row kept in registers,
// read once. Thread t owns elements [k*P + 8t, k*P + 8t + 8) for steps k = 0..S-1, i.e. exactly
// the 8 partial sums 8t..8t+7 of the canonical reduction (docs/numerics.md §2), which it
// accumulates in step order; the pairwise tree continues across threads with shfl_xor and
// across warps through shared memory. The shape (T, rows per block, steps) depends on H only.
#pragma once

#include <stdint.h>

#include "backends/gpu/gpu_runtime.h"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

constexpr int kElemsPerThread = 8;   // one 16-byte load of bf16/f16
constexpr int kMaxBlockThreads = 512;
constexpr int kMaxSteps = 8;         // register budget: 64 f32 per thread


struct RowShape {
  int32_t threads_per_row;  // T = P / 8
  int32_t rows_per_block;   // R
  int32_t steps;            // S = ceil(H / P)
  int32_t partials;         // P
};

// From H alone (batch invariance).
inline RowShape row_shape(int64_t h) {
  RowShape s;
  s.partials = int32_t(math::reduction_partials(h));
  s.threads_per_row = s.partials / kElemsPerThread;
  s.rows_per_block = s.threads_per_row >= 256 ? 1 : 256 / s.threads_per_row;
  s.steps = int32_t((h + s.partials - 1) / s.partials);
  return s;
}

// ---------------------------------------------------------------- element access

template <DType kIn>
struct InTraits;
template <>
struct InTraits<DType::kF32> {
  static constexpr int kBytes = 4;
  static __device__ __forceinline__ float decode(uint32_t u) { return math::float_of(u); }
  static __device__ __forceinline__ uint32_t encode(float v) { return math::encode_f32<false>(v); }
};
template <>
struct InTraits<DType::kF16> {
  static constexpr int kBytes = 2;
  static __device__ __forceinline__ float decode(uint32_t u) { return math::decode_f16(u); }
  static __device__ __forceinline__ uint32_t encode(float v) { return math::encode_f16<false>(v); }
};
template <>
struct InTraits<DType::kBF16> {
  static constexpr int kBytes = 2;
  static __device__ __forceinline__ float decode(uint32_t u) { return math::decode_bf16(u); }
  static __device__ __forceinline__ uint32_t encode(float v) { return math::encode_bf16<false>(v); }
};

// How a row's elements may be accessed: 16-byte (8-byte for codes) vectors, whole elements, or
// bytes (a pointer not aligned to its element size is legal in the API).
enum Access : int32_t { kBytesOnly = 0, kElements = 1, kVectors = 2 };

template <int kBytes>
__device__ __forceinline__ uint32_t load_elem(const char* row, int64_t i, int32_t access) {
  if (access != kBytesOnly) {
    if (kBytes == 2) return reinterpret_cast<const uint16_t*>(row)[i];
    if (kBytes == 4) return reinterpret_cast<const uint32_t*>(row)[i];
    return reinterpret_cast<const uint8_t*>(row)[i];
  }
  const uint8_t* p = reinterpret_cast<const uint8_t*>(row) + i * kBytes;
  uint32_t v = 0;
#pragma unroll
  for (int b = 0; b < kBytes; ++b) v |= uint32_t(p[b]) << (8 * b);
  return v;
}

template <int kBytes>
__device__ __forceinline__ void store_elem(char* row, int64_t i, uint32_t v, int32_t access) {
  if (access != kBytesOnly) {
    if (kBytes == 2) reinterpret_cast<uint16_t*>(row)[i] = uint16_t(v);
    else if (kBytes == 4) reinterpret_cast<uint32_t*>(row)[i] = v;
    else reinterpret_cast<uint8_t*>(row)[i] = uint8_t(v);
    return;
  }
  uint8_t* p = reinterpret_cast<uint8_t*>(row) + i * kBytes;
#pragma unroll
  for (int b = 0; b < kBytes; ++b) p[b] = uint8_t(v >> (8 * b));
}

// Raw codes of 8 consecutive elements starting at element e; elements at or past h read as 0.
template <int kBytes>
__device__ __forceinline__ void load8(const char* row, int64_t e, int64_t h, int32_t access, uint32_t u[8]) {
  if (access == kVectors && e + 8 <= h) {
    if (kBytes == 2) {
      const uint4 q = *reinterpret_cast<const uint4*>(row + e * 2);
      const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        u[2 * j] = w[j] & 0xFFFFu;
        u[2 * j + 1] = w[j] >> 16;
      }
    } else {
      const uint4 a = *reinterpret_cast<const uint4*>(row + e * 4);
      const uint4 b = *reinterpret_cast<const uint4*>(row + e * 4 + 16);
      u[0] = a.x; u[1] = a.y; u[2] = a.z; u[3] = a.w;
      u[4] = b.x; u[5] = b.y; u[6] = b.z; u[7] = b.w;
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) u[j] = e + j < h ? load_elem<kBytes>(row, e + j, access) : 0u;
}

template <int kBytes>
__device__ __forceinline__ void store8(char* row, int64_t e, int64_t h, int32_t access, const uint32_t u[8]) {
  if (access == kVectors && e + 8 <= h) {
    if (kBytes == 2) {
      uint4 q;
      q.x = u[0] | (u[1] << 16); q.y = u[2] | (u[3] << 16);
      q.z = u[4] | (u[5] << 16); q.w = u[6] | (u[7] << 16);
      *reinterpret_cast<uint4*>(row + e * 2) = q;
    } else if (kBytes == 4) {
      *reinterpret_cast<uint4*>(row + e * 4) = make_uint4(u[0], u[1], u[2], u[3]);
      *reinterpret_cast<uint4*>(row + e * 4 + 16) = make_uint4(u[4], u[5], u[6], u[7]);
    } else {
      uint2 q;
      q.x = u[0] | (u[1] << 8) | (u[2] << 16) | (u[3] << 24);
      q.y = u[4] | (u[5] << 8) | (u[6] << 16) | (u[7] << 24);
      *reinterpret_cast<uint2*>(row + e) = q;
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j)
    if (e + j < h) store_elem<kBytes>(row, e + j, u[j], access);
}

// The output format as a type: the kernel is instantiated per format, so each element's encode
// is straight-line code (a run-time switch per element bloats the kernel past the i-cache).
// Software encoders: the shared math.
template <DType kOut>
struct SoftFormat;
#define FN_MINIFLOAT(name, ...)                                                               \
  template <>                                                                                 \
  struct SoftFormat<DType::k_##name> {                                                        \
    static __device__ __forceinline__ uint32_t encode(float v) { return math::name::encode<false>(v); } \
  };
#include "math/formats.inc"
#undef FN_MINIFLOAT
template <>
struct SoftFormat<DType::kI8> {
  static __device__ __forceinline__ uint32_t encode(float v) { return math::encode_int8(v); }
};
template <DType kOut>
struct OutFormat : SoftFormat<kOut> {};

// Hardware FP8 conversion (sm_89+): cvt.rn.satfinite rounds to nearest even and saturates
// finite values and infinities exactly like enc_T; the NaN it writes is normalized to the
// operations' positive NaN. verify_encoders (plugin.cuh) proves these equal to the shared math
// over all 2^32 inputs on the device at hand; tests/gpu runs it.
template <DType kOut>
__device__ __forceinline__ uint32_t hw_fp8(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(__HIPCC__)
  uint16_t pair;
  if (kOut == DType::k_f8e4m3fn)
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(pair) : "f"(v));
  else
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %1;" : "=h"(pair) : "f"(v));
  return v != v ? 0x7Fu : (pair & 0xFFu);
#else
  return SoftFormat<kOut>::encode(v);
#endif
}
template <>
struct OutFormat<DType::k_f8e4m3fn> {
  static __device__ __forceinline__ uint32_t encode(float v) { return hw_fp8<DType::k_f8e4m3fn>(v); }
};
template <>
struct OutFormat<DType::k_f8e5m2> {
  static __device__ __forceinline__ uint32_t encode(float v) { return hw_fp8<DType::k_f8e5m2>(v); }
};
// Scales go through byte stores: few per row, and a scale tensor may sit at any alignment.
// `base` is the row's scale pointer (or, packed, its output row + H).
__device__ __forceinline__ void store_scale(const RmsnormQuantCall& c, char* base, int32_t group, uint32_t stored) {
  char* p = c.packed ? base : base + group * c.scale_col_stride;
  const int bytes = c.packed || c.scale_type == math::ScaleType::kF32 ? 4
                    : c.scale_type == math::ScaleType::kE8M0        ? 1
                                                                     : 2;
  for (int b = 0; b < bytes; ++b) reinterpret_cast<uint8_t*>(p)[b] = uint8_t(stored >> (8 * b));
}

// ---------------------------------------------------------------- reductions within a row
// A row's T threads are T consecutive lanes of the block (T a power of two). Below the warp,
// shfl_xor pairs lanes t and t^m; above it, warp results meet in shared memory `red` (one slot
// per warp of the block) and every thread of the row combines its row's slots in the same
// pairwise order. Every thread of the block must call these (they contain barriers).

template <int kWarp>
__device__ __forceinline__ float row_sum(float v, int t, int threads_per_row, float* red) {
  const int lanes = threads_per_row < kWarp ? threads_per_row : kWarp;
  for (int m = 1; m < lanes; m *= 2) v = math::add_rn(v, FN_SHFL_XOR(v, m, kWarp));
  if (threads_per_row <= kWarp) return v;
  const int warp = threadIdx.x / kWarp;
  if (threadIdx.x % kWarp == 0) red[warp] = v;
  __syncthreads();
  // The row's n = T / kWarp warp sums, tree-added on the first n lanes of every warp (lanes past
  // n add zeros among themselves), then lane 0's value is everyone's.
  const int n = threads_per_row / kWarp;
  const int lane = threadIdx.x % kWarp;
  float p = lane < n ? red[warp - t / kWarp + lane] : 0.0f;
  for (int m = 1; m < n; m *= 2) p = math::add_rn(p, FN_SHFL_XOR(p, m, kWarp));
  p = FN_SHFL(p, 0, kWarp);
  __syncthreads();
  return p;
}

template <int kWarp>
__device__ __forceinline__ uint32_t lanes_max(uint32_t v, int lanes) {
  for (int m = 1; m < lanes; m *= 2) {
    const uint32_t o = FN_SHFL_XOR(v, m, kWarp);
    v = o > v ? o : v;
  }
  return v;
}

template <int kWarp>
__device__ __forceinline__ uint32_t row_max(uint32_t v, int t, int threads_per_row, uint32_t* red) {
  v = lanes_max<kWarp>(v, threads_per_row < kWarp ? threads_per_row : kWarp);
  if (threads_per_row <= kWarp) return v;
  const int warp = threadIdx.x / kWarp;
  if (threadIdx.x % kWarp == 0) red[warp] = v;
  __syncthreads();
  const int first = warp - (t / kWarp);
  for (int i = 0; i < threads_per_row / kWarp; ++i) v = red[first + i] > v ? red[first + i] : v;
  __syncthreads();
  return v;
}

__device__ __forceinline__ uint32_t abs_bits(float y) { return math::bits_of(y) & math::kF32AbsMask; }

// ---------------------------------------------------------------- the kernel

template <DType kIn, DType kOut, int kWarp, int kSteps>
__global__ void __launch_bounds__(kMaxBlockThreads)
    rmsnorm_quant_kernel(const RmsnormQuantCall c, const RowShape shape, const int64_t first_row,
                         const int32_t in_access, const int32_t out_access, const int32_t w_access) {
  using In = InTraits<kIn>;
  __shared__ float red_sum[kMaxBlockThreads / 32];
  __shared__ uint32_t red_max[kMaxBlockThreads / 32];
  const int T = shape.threads_per_row, P = shape.partials, S = shape.steps;
  const int t = threadIdx.x % T;
  const int64_t row = first_row + int64_t(blockIdx.x) * shape.rows_per_block + threadIdx.x / T;
  const bool active = row < c.lead.rows;  // inactive threads still join every barrier
  const int64_t h = c.h;

  // Row pointers once (64-bit offsets); offsets inside a row fit in 32 bits (H <= 32768).
  const char* in = active ? row_ptr(c.lead, c.in, row) : nullptr;
  char* res = active && c.res.data ? row_ptr(c.lead, c.res, row) : nullptr;
  char* out = active ? row_ptr(c.lead, c.out, row) : nullptr;
  char* scale_base = !active || c.mode == FUSEDNORM_SCALE_STATIC ? nullptr
                     : c.packed                              ? out + c.h
                                                             : row_ptr(c.lead, c.scales, row);

  // 1. Load the row (and add the residual, rounding to the input dtype and writing it back).
  float x[kSteps][8];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int64_t e = int64_t(s) * P + 8 * t;
    uint32_t u[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (active && s < S) load8<In::kBytes>(in, e, h, in_access, u);
#pragma unroll
    for (int j = 0; j < 8; ++j) x[s][j] = In::decode(u[j]);
    if (res != nullptr && s < S) {
      uint32_t r[8];
      load8<In::kBytes>(res, e, h, in_access, r);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        r[j] = In::encode(math::add_rn(x[s][j], In::decode(r[j])));
        x[s][j] = e + j < h ? In::decode(r[j]) : 0.0f;
      }
      store8<In::kBytes>(res, e, h, in_access, r);
    }
  }

  // 2. Sum of squares in the canonical order, inv_rms.
  float inv = 1.0f;
  if (c.norm == FUSEDNORM_NORM_RMS) {
    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int j = 0; j < 8; ++j) part[j] = math::add_rn(part[j], math::mul_rn(x[s][j], x[s][j]));
    const float v = math::add_rn(math::add_rn(math::add_rn(part[0], part[1]), math::add_rn(part[2], part[3])),
                                 math::add_rn(math::add_rn(part[4], part[5]), math::add_rn(part[6], part[7])));
    inv = math::inv_rms(row_sum<kWarp>(v, t, T, red_sum), math::length_f32(h), c.eps);
  }

  // 3. y = (x * inv) * (w + offset); elements past H are 0. Dtype branches are uniform and sit
  // outside the element loops.
  if (c.norm == FUSEDNORM_NORM_RMS) {
    const char* w = c.weight;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      if (s >= S) continue;
      const int64_t e = int64_t(s) * P + 8 * t;
      uint32_t wu[8];
      float g[8];
      if (c.w_type == DType::kF32) {
        load8<4>(w, e, h, w_access, wu);
#pragma unroll
        for (int j = 0; j < 8; ++j) g[j] = math::float_of(wu[j]);
      } else if (c.w_type == DType::kBF16) {
        load8<2>(w, e, h, w_access, wu);
#pragma unroll
        for (int j = 0; j < 8; ++j) g[j] = math::decode_bf16(wu[j]);
      } else {
        load8<2>(w, e, h, w_access, wu);
#pragma unroll
        for (int j = 0; j < 8; ++j) g[j] = math::decode_f16(wu[j]);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) x[s][j] = math::norm_apply(x[s][j], inv, math::add_rn(g[j], c.weight_offset));
    }
  }
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int64_t e = int64_t(s) * P + 8 * t;
    if (s < S && e + 8 <= h) continue;  // a full chunk
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (s >= S || e + j >= h) x[s][j] = 0.0f;
  }

  // 4. Scales: one r per step (a unit is a row, a group within a step, or a group of steps).
  float rcp[kSteps];
  if (c.mode == FUSEDNORM_SCALE_STATIC) {
    uint32_t sbits;
    memcpy(&sbits, c.static_scale, 4);  // any alignment
    const float r = math::div_rn(1.0f, math::float_of(sbits));
#pragma unroll
    for (int s = 0; s < kSteps; ++s) rcp[s] = r;
  } else {
    const int64_t g = c.group;
    if (g < h && g <= P) {
      // Groups inside a step: G/8 adjacent lanes share one.
      const int lanes = int(g / 8);
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        uint32_t m = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) m = abs_bits(x[s][j]) > m ? abs_bits(x[s][j]) : m;
        m = lanes_max<kWarp>(m, lanes);
        const math::DynamicScale ds = math::dynamic_scale(m, c.qmax, c.scale_ub, c.min_scale, c.scale_type);
        const int64_t e = int64_t(s) * P + 8 * t;
        if (active && s < S && e < h && t % lanes == 0) store_scale(c, scale_base, int32_t(e) / int32_t(g), ds.stored);
        rcp[s] = ds.r;
      }
    } else {
      // A unit spans whole steps (the row, or a group of G/P steps): reduce over the row.
      const int per = g >= h ? kSteps : int(g / P);
#pragma unroll
      for (int s0 = 0; s0 < kSteps; s0 += 1) {
        if (s0 % per != 0) continue;
        uint32_t m = 0;
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + per)
#pragma unroll
            for (int j = 0; j < 8; ++j) m = abs_bits(x[s][j]) > m ? abs_bits(x[s][j]) : m;
        m = row_max<kWarp>(m, t, T, red_max);
        const math::DynamicScale ds = math::dynamic_scale(m, c.qmax, c.scale_ub, c.min_scale, c.scale_type);
        if (active && t == 0 && int64_t(s0) * P < h)
          store_scale(c, scale_base, g >= h ? 0 : int32_t(s0 * P) / int32_t(g), ds.stored);
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + per) rcp[s] = ds.r;
      }
    }
  }

  // 5. Encode and store 8 codes per step (the clamp only where the caller set a qmax).
  if (!active) return;
  const bool clamp = c.qclamp < INFINITY;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    if (s >= S) continue;
    const int64_t e = int64_t(s) * P + 8 * t;
    uint32_t q[8];
    if (clamp) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        q[j] = OutFormat<kOut>::encode(math::clamp_sym(math::mul_rn(x[s][j], rcp[s]), c.qclamp));
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) q[j] = OutFormat<kOut>::encode(math::mul_rn(x[s][j], rcp[s]));
    }
    store8<1>(out, e, h, out_access, q);
  }
}

// Exhaustive check of the kernels' encoders against the shared math: every f32 bit pattern
// (base + i for i < n). Counts mismatches and records the smallest mismatching input.
template <DType kOut>
__global__ void verify_encoder_kernel(uint64_t base, uint64_t n, unsigned long long* bad, unsigned int* first) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t u = uint32_t(base + i);
    const float v = math::float_of(u);
    if (OutFormat<kOut>::encode(v) != SoftFormat<kOut>::encode(v)) {
      atomicAdd(bad, 1ull);
      atomicMin(first, u);
    }
  }
}

// Launches the kernels of one input dtype (one translation unit each in the CUDA build, so the
// instantiations compile in parallel; see backends/cuda/).
template <DType kIn>
void launch_rmsnorm_quant(const RmsnormQuantCall& c, const RowShape& shape, int64_t first, int64_t blocks,
                          const int32_t access[3], gpuStream_t stream) {
  const dim3 grid{unsigned(blocks)}, block{unsigned(shape.rows_per_block * shape.threads_per_row)};
  switch (c.out_type) {
#define FN_LAUNCH(kOut)                                                                                   \
  case kOut:                                                                                              \
    if (shape.steps <= 4)                                                                                 \
      rmsnorm_quant_kernel<kIn, kOut, kGpuWarp, 4><<<grid, block, 0, stream>>>(c, shape, first, access[0], \
                                                                              access[1], access[2]);     \
    else                                                                                                  \
      rmsnorm_quant_kernel<kIn, kOut, kGpuWarp, 8><<<grid, block, 0, stream>>>(c, shape, first, access[0], \
                                                                              access[1], access[2]);     \
    break;
#define FN_MINIFLOAT(name, ...) FN_LAUNCH(DType::k_##name)
#include "math/formats.inc"
#undef FN_MINIFLOAT
    FN_LAUNCH(DType::kI8)
#undef FN_LAUNCH
    default: break;
  }
}

#define FN_INSTANTIATE_RMSNORM_QUANT(kIn)                                                              \
  template void launch_rmsnorm_quant<kIn>(const RmsnormQuantCall&, const RowShape&, int64_t, int64_t, \
                                          const int32_t*, gpuStream_t);

}  // namespace gpu
}  // namespace fusednorm
