// Compiled twice: as CUDA and as HIP. Reductions within a row of the rmsnorm_quant kernel: the
// warp butterfly, the block-level combination of a row's warp results with the scalar formula
// evaluated after it (row_reduce_finish), and the exact amax of a thread's values (AbsMax).
#pragma once

#include <stdint.h>

#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/io.cuh"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// A row's T threads are T consecutive lanes of the block (T a power of two); shfl_xor pairs
// lanes t and t^m, in the canonical pairwise order for sums.

// The unsigned maximum as a reduction's pairwise step (amax bits): order-free, so a whole warp's
// takes one redux instruction on sm_80+ instead of a butterfly of shuffles.
struct MaxU32 {
  __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; }
};

// v combined over a whole warp: the butterfly of shfl_xor (for sums, the canonical pairwise order).
template <int kWarp, class T, class Combine>
__device__ __forceinline__ T warp_reduce(T v, Combine combine) {
#pragma unroll
  for (int m = 1; m < kWarp; m *= 2) v = combine(v, FN_SHFL_XOR(v, m, kWarp));
  return v;
}
#if FN_CUDA_ARCH >= 800  // redux.sync: sm_80+
template <int kWarp>
__device__ __forceinline__ uint32_t warp_reduce(uint32_t v, MaxU32) {
  return __reduce_max_sync(0xFFFFFFFFu, v);
}
#endif

// Calls f(IntConstant<L>()) for the run-time lanes L, a power of two in [kMin, kMax].
template <int kMin, int kMax, class F>
__device__ __forceinline__ void with_lanes(int lanes, F f) {
  if constexpr (kMin < kMax) {
    if (lanes == kMin) f(IntConstant<kMin>());
    else with_lanes<2 * kMin, kMax>(lanes, f);
  } else {
    f(IntConstant<kMin>());
  }
}

// kN values at r (aligned to kN values, at most 16 bytes), combined pairwise in registers:
// (r0 . r1) . (r2 . r3) ..., the canonical tree.
template <int kN, class T, class Combine>
__device__ __forceinline__ T combine_shared(const T* r, Combine combine) {
  static_assert(sizeof(T) == 4 && kN >= 2, "4-byte values, at least 2");
  constexpr int kPer = kN < 4 ? kN : 4;
  struct alignas(4 * kPer) Pack {
    T v[kPer];
  };
  T v[kN];
#pragma unroll
  for (int i = 0; i < kN / kPer; ++i) {
    const Pack q = reinterpret_cast<const Pack*>(r)[i];
#pragma unroll
    for (int j = 0; j < kPer; ++j) v[kPer * i + j] = q.v[j];
  }
#pragma unroll
  for (int n = kN; n > 1; n /= 2)
#pragma unroll
    for (int j = 0; j < n / 2; ++j) v[j] = combine(v[2 * j], v[2 * j + 1]);
  return v[0];
}

// The n warp results of a row at red (n a power of two, 2 <= n <= kWarp) combined in the canonical
// pairwise tree, the same value in every lane of the calling warp. kLocal and n <= 8: every lane
// reads them (vector loads of one address: broadcasts) and combines them in registers, no
// shuffle latencies; else a warp's butterfly, lanes past n holding 0 and the levels past n
// combining with it (combine(x, 0) == x).
template <int kWarp, bool kLocal, class T, class Combine>
__device__ __forceinline__ T combine_warps(const T* red, int n, Combine combine) {
  T p;
  if (kLocal && n <= 8) {
    with_lanes<2, 8>(n, [&](auto n_c) { p = combine_shared<decltype(n_c)::value>(red, combine); });
  } else {
    const int lane = threadIdx.x % kWarp;
    p = warp_reduce<kWarp>(lane < n ? red[lane] : T(0), combine);
  }
  return p;
}

// A thread's share of the canonical sum of squares (docs/numerics.md §2), from its kVec lanes of
// the row's steps s < steps held as input words (raw[s]): partial j summed over the steps, the
// first square alone (0 + q is q for every square: +0, positive, +Inf or NaN, whose payload
// reaches no output), then the first log2(kVec) levels of the pairwise tree in registers, pairs
// `level` apart in place. row_reduce_finish goes on across the row's threads.
template <class In, int kSteps, int kVec, int kWords>
__device__ __forceinline__ float thread_sum_squares(const uint32_t (&raw)[kSteps][kWords], int steps) {
  float part[kVec];
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
#pragma unroll
    for (int j = 0; j < kVec; ++j)
      if (s < steps) {
        const float x = In::get(raw[s], j), q = math::mul_rn(x, x);
        part[j] = s == 0 ? q : math::add_rn(part[j], q);
      }
#pragma unroll
  for (int level = 1; level < kVec; level *= 2)
#pragma unroll
    for (int j = 0; j < kVec; j += 2 * level) part[j] = math::add_rn(part[j], part[j + level]);
  return part[0];
}

// A row's reduction followed by its scalar formula (inv_rms, the scale): below the warp every
// lane reduces and evaluates it; above, warp results meet in shared memory `red`, the row's
// first warp combines them in the same pairwise order and its lane 0 evaluates the formula once
// for the row, and after a second barrier every thread reads the result from `out`. A caller
// alternates between two `red` and two `out` buffers from row to row: a buffer is written again
// only after barriers that every reader of its previous contents has passed. Combine(a, b) is
// the reduction's pairwise step, with combine(x, 0) == x for every x a row can produce (a maximum;
// sums of squares, which are never -0), since the warp results are combined by a full warp with 0
// past the row's warps; every thread of the block must call this. !kOnce: every warp of
// the row combines the warp results and evaluates the formula itself (one barrier instead of
// two, the formula once per warp). kLocal: the row's warp results are combined in registers
// (combine_shared) where there are at most 8, else by a warp's butterfly. kRowBarrier: the
// barriers are the row's own (gpu_row_barrier: a named barrier of the row's threads where the
// device has them), so that the rows of a block do not wait for each other; a row's threads are
// whole warps there (threads_per_row > kWarp).
template <int kWarp, bool kOnce, bool kLocal, bool kRowBarrier = false, class T, class Combine, class Finish>
__device__ __forceinline__ auto row_reduce_finish(T v, int t, int threads_per_row, int row_in_block, T* red,
                                                  Combine combine, Finish finish, decltype(finish(v))* out)
    -> decltype(finish(v)) {
  if (threads_per_row >= kWarp) {
    v = warp_reduce<kWarp>(v, combine);
  } else {
#pragma unroll
    for (int m = 1; m < kWarp; m *= 2)
      if (m < threads_per_row) v = combine(v, FN_SHFL_XOR(v, m, kWarp));
  }
  if (threads_per_row <= kWarp) return finish(v);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;  // kWarp: a power of two
  const int first = warp - t / kWarp;
  if (lane == 0) red[warp] = v;
  if (kRowBarrier) gpu_row_barrier(row_in_block, threads_per_row);
  else __syncthreads();
  if (!kOnce || warp == first) {
    const T p = combine_warps<kWarp, kLocal>(red + first, threads_per_row / kWarp, combine);
    // Every warp evaluates it; the butterfly left the same bits in every lane (its pairwise
    // steps are commutative).
    if (!kOnce) return finish(p);
    if (lane == 0) out[row_in_block] = finish(p);
  }
  if (kRowBarrier) gpu_row_barrier(row_in_block, threads_per_row);
  else __syncthreads();
  return out[row_in_block];
}


// max over values of (bits & 0x7FFFFFFF), the exact amax of numerics.md.
#if FN_CUDA_ARCH >= 800  // max.NaN: sm_80+
// sm_80+: one max.NaN with |y| per value (FMNMX.NAN, |R|). A NaN makes the maximum the canonical
// NaN, 0x7FFFFFFF, not the largest NaN's bits: dynamic_scale treats every value at or above Inf's
// bits alike, and the other values are ordered as floats exactly as their bits are.
struct AbsMax {
  float m = 0.0f;
  __device__ __forceinline__ void add(float y) {
    m = gpu_max_nan(m, fabsf(y));
  }
  __device__ __forceinline__ uint32_t bits() const { return math::bits_of(m) & math::kF32AbsMask; }
};
#else
// Two integer maxima and no masking per value: as signed integers the bits of non-negative floats
// exceed those of negative ones, and among the negatives larger magnitudes have larger bits,
// signed or unsigned; as unsigned integers the negatives exceed the rest. So the signed maximum
// holds the largest non-negative value (or, with none, the largest-magnitude negative) and the
// unsigned maximum the largest-magnitude negative (or, with none, the largest non-negative): the
// larger of the two, masked, is the answer.
struct AbsMax {
  int32_t smax = INT32_MIN;
  uint32_t umax = 0;
  __device__ __forceinline__ void add(float y) {
    const uint32_t b = math::bits_of(y);
    smax = int32_t(b) > smax ? int32_t(b) : smax;
    umax = b > umax ? b : umax;
  }
  __device__ __forceinline__ uint32_t bits() const {
    const uint32_t a = uint32_t(smax) & math::kF32AbsMask, u = umax & math::kF32AbsMask;
    return a > u ? a : u;
  }
};
#endif


}  // namespace gpu
}  // namespace fusednorm
