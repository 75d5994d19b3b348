// Compiled twice: as CUDA and as HIP, as one unit of its own (FUSEDNORM_GPU_OPS). qk_rmsnorm on
// the GPU (docs/numerics.md §5): one kernel per kind (stats, apply, fused: instantiated apart, so
// that stats, which keeps no weights or outputs, runs in 64 registers), input dtype and output
// dtype (the input's; f8e4m3fn, f8e4m3fnuz), for whole rows and for heads alike: a side (q or k)
// is a run of RMS groups of G elements (the row, or a head), and every group is mapped the same
// way.
//
// A group takes T = P / 8 threads (P = reduction_partials(G)); thread t owns the 8 consecutive
// partial sums 8t .. 8t+7 of the canonical reduction (docs/numerics.md §2), i.e. elements
// s*P + 8t + j for steps s < S = ceil(G / P), accumulated in step order; the tree continues in
// registers, across the group's lanes (shfl_xor) and across its warps (row_reduce_finish,
// reduce.cuh). The first kQkRegSteps = 4 steps (32 elements: G = 4 P, e.g. 512, 4096, 8192,
// 16384, heads of 64 to 256) stay in registers for the apply pass; later steps (G of 5 to 8 steps,
// e.g. 1536, 5120, 7168, or above 16384) are read again, from L1/L2.
// Blocks hold groups of one side only: q's groups first, then k's (both sides in one launch);
// the grid is persistent and walks over the blocks' batches, prefetching its next batch into L2. Nothing of a group's arithmetic
// depends on the grid, the row count or the other side (batch invariance).
// Two other kernels serve calls with vector-aligned views: apply of any size takes
// qk_apply_small_kernel (one thread a vector), short stats calls (decode) qk_small_stats_kernel
// and short fused calls qk_small_group_kernel (the same additions in the same order).
#pragma once

#include <stdint.h>

#include <algorithm>

#include "backends/gpu/encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/host.cuh"
#include "backends/gpu/io.cuh"
#include "backends/gpu/launch.cuh"
#include "backends/gpu/ops.h"
#include "backends/gpu/plan.h"
#include "backends/gpu/reduce.cuh"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

constexpr int kQkVec = 8;           // elements of a thread per step: its 8 partials
constexpr int kQkBlock = 256;       // threads of a block of small groups
constexpr int kQkMaxBlock = math::kMaxPartials / kQkVec;  // 512: one group of P = 4096
constexpr int64_t kQkMaxGroup = int64_t(1) << 28;         // byte offsets inside a group are 32-bit

// One side's mapping (host-computed from G alone, and the views' alignments).
struct QkShape {
  int32_t threads;           // T per group
  int32_t partials;          // P
  int32_t steps;             // S
  int32_t groups_per_block;  // blockDim / T
  int32_t access_in, access_out, access_w, access_stats;
  int64_t groups;            // groups of the side: rows * (width / G)
  int64_t batches;           // blocks' worth of groups: ceil(groups / groups_per_block)
};
struct QkLaunch {
  QkShape side[2];        // q, k
  int32_t access_scales;  // FP8 outputs' scales: kElements, or kBytesOnly (any alignment)
};

// The reduction's pairwise step and the formula after it (row_reduce_finish): the sum itself
// (stats) or inv_rms of the group.
struct QkAdd {
  __device__ __forceinline__ float operator()(float a, float b) const { return math::add_rn(a, b); }
};
// rcp: 1 / the side's divisor where that is an exact power of two (qk_pow2_rcp), else 0: ss * rcp
// is then ss / divisor correctly rounded (subnormal results included), a multiplication instead of
// a division on the chain every thread of the group waits for.
struct QkFinish {
  const QkRmsnormCall* c;
  const QkSide* s;
  bool stats;
  float rcp;
  __device__ __forceinline__ float operator()(float ss) const {
    if (stats) return ss;
    if (rcp != 0.0f && !c->mean_squares) return math::inv_rms_of_mean(math::mul_rn(ss, rcp), c->eps);
    return qk_inv_rms(*c, *s, ss);
  }
};
// 1 / d for d a power of two whose reciprocal is a normal f32 (exact), else 0.
__device__ __forceinline__ float qk_pow2_rcp(float d) {
  const uint32_t b = math::bits_of(d), e = b >> 23;  // e > 255 for negative d
  return (b & 0x7FFFFFu) != 0 || e < 1 || e > 253 ? 0.0f : math::float_of((254u - e) << 23);
}

constexpr int kQkRegSteps = 4;  // 116 registers with 16-bit inputs, no spill (sm_90a); 8 spilled

// x^2 of a vector's 8 elements added to this thread's 8 partials (canonical order: step by step).
template <DType kIn>
__device__ __forceinline__ void qk_accumulate(const uint32_t* v, float part[kQkVec]) {
#pragma unroll
  for (int e = 0; e < kQkVec; ++e) {
    const float xe = InTraits<kIn>::get(v, e);
    part[e] = math::add_rn(part[e], math::mul_rn(xe, xe));
  }
}

// The outputs: kOut == kIn, the input dtype (rounded, NaN canonical); else an FP8 format, the
// code of y * rcp (rcp = 1 / the side's static scale), two at a time (encode.cuh: the hardware
// conversion where the device has one, proven equal to the shared math's encoder).
template <DType kIn, DType kOut>
struct QkOut {
  static constexpr int kBytes = kOut == kIn ? InTraits<kIn>::kBytes : 1;
};

// The weight words of one vector (f32: 8 words; f16/bf16: the first 4).
__device__ __forceinline__ void qk_load_weights(const QkSide& s, const QkShape& sh, int32_t e0, int32_t G,
                                                uint32_t ww[kQkVec]) {
  if (s.w_type == DType::kF32) load_vec<4, kQkVec>(s.weight, e0, G, sh.access_w, ww);
  else load_vec<2, kQkVec>(s.weight, e0, G, sh.access_w, ww);
}

// g = w + offset of one vector from its weight words: one branch on the weight dtype for the
// vector (weight_elem's branch a element cost about five instructions each).
template <DType kW>
__device__ __forceinline__ void qk_gamma_of(const uint32_t* ww, float offset, float g[kQkVec]) {
#pragma unroll
  for (int e = 0; e < kQkVec; ++e) g[e] = math::add_rn(InTraits<kW>::get(ww, e), offset);
}
__device__ __forceinline__ void qk_gamma(DType w_type, const uint32_t* ww, float offset, float g[kQkVec]) {
  if (w_type == DType::kF32) qk_gamma_of<DType::kF32>(ww, offset, g);
  else if (w_type == DType::kBF16) qk_gamma_of<DType::kBF16>(ww, offset, g);
  else qk_gamma_of<DType::kF16>(ww, offset, g);
}

// out[e0 .. e0+7] = rn((x * inv) * (w + offset)) of one vector of the group (FP8: its codes), from
// its input words v and weight words ww.
// kStream: full vectors (the views allow them) stored with the streaming hint.
template <DType kIn, DType kOut, bool kStream = false>
__device__ __forceinline__ void qk_apply_vec(const QkRmsnormCall& c, const QkSide& s, const QkShape& sh, int32_t e0,
                                             int32_t G, const uint32_t* v, const uint32_t* ww, float inv,
                                             const PreMult& rcp, char* out) {
  using In = InTraits<kIn>;
  using Out = QkOut<kIn, kOut>;
  float g[kQkVec];
  qk_gamma(s.w_type, ww, c.weight_offset, g);
  constexpr int kPer = 4 / Out::kBytes;  // codes a word
  uint32_t o[Vec<Out::kBytes, kQkVec>::kWords];
  if constexpr (kOut != kIn) {
    // q = y * r times the encoders' prescale (encode.cuh Prescale), as in rmsnorm_quant's kernel;
    // four codes a word.
    float q[kQkVec];
#pragma unroll
    for (int e = 0; e < kQkVec; ++e) q[e] = math::norm_apply(In::get(v, e), inv, g[e]);
    apply_mult<kOut, kQkVec>(rcp, q);
    static_assert(kPer == 4, "FP8 codes: four a word");
    encode_pre<kOut, kQkVec, true>(q, o);  // static scales: few saturate
  } else {
    float y[kQkVec];
#pragma unroll
    for (int e = 0; e < kQkVec; ++e) y[e] = math::norm_apply(In::get(v, e), inv, g[e]);
    encode_words<kIn, kQkVec>(y, o);
  }
  store_vec<Out::kBytes, kQkVec, kStream, kStream>(out, e0, G, sh.access_out, o);
}

// FP8 outputs: r = 1 / side j's static scale, with its prescaled form (encode.cuh pre_mult).
// Outputs of the input's type: 1.
template <DType kIn, DType kOut>
__device__ __forceinline__ PreMult qk_out_rcp(const QkRmsnormCall& c, const QkLaunch& L, int j) {
  if constexpr (kOut != kIn) return pre_mult<kOut>(math::div_rn(1.0f, math::float_of(load_elem<4>(c.out_scales, j, L.access_scales))));
  else return PreMult{1.0f, 1.0f, true};
}

// Registers a thread: apply and the fused form keep their group's vectors and weights of
// kQkRegSteps steps (up to 128: one block of 512 threads an SM, or two of 256); stats keeps the
// vectors only, in 64 (80 with f32 inputs): twice the blocks, twice the loads in flight.
// Apply takes this kernel only where its views do not allow vectors (qk_apply_small_kernel
// below serves the others, at 92-94% of copy on an H200 where this kernel reached 68%:
// docs/performance.md).
template <DType kIn, DType kOut, QkKind kKind>
__global__ void FN_KERNEL_BOUNDS(kQkMaxBlock, kKind != QkKind::kStats ? 128 : kIn == DType::kF32 ? 80 : 64)
    qk_rmsnorm_kernel(FN_GRID_CONSTANT const QkRmsnormCall c, FN_GRID_CONSTANT const QkLaunch L) {
  using In = InTraits<kIn>;
  constexpr int kOutBytes = QkOut<kIn, kOut>::kBytes;
  constexpr int kW = Vec<In::kBytes, kQkVec>::kWords;
  constexpr int kRegSteps = kQkRegSteps;
  __shared__ __align__(16) float red[2][kQkMaxBlock / kGpuWarp];
  __shared__ float inv_of_group[2][kQkMaxBlock];
  gpu_wait_for_previous_grid();

  const int64_t batches = L.side[0].batches + L.side[1].batches;
  int parity = 0;
  for (int64_t b = blockIdx.x; b < batches; b += gridDim.x, parity ^= 1) {
    // The block's next batch into L2 while this one is loaded, reduced and written: each of its
    // groups' input bytes by one thread (sm_90: one bulk prefetch; a hint, no value is read).
    const int64_t nb = b + gridDim.x;
    if (nb < batches) {
      const int jn = nb < L.side[0].batches ? 0 : 1;
      const QkShape& shn = L.side[jn];
      const QkSide& sn = jn ? c.k : c.q;
      const int64_t gn = (jn ? nb - L.side[0].batches : nb) * shn.groups_per_block + threadIdx.x;
      if (int(threadIdx.x) < shn.groups_per_block && gn < shn.groups) {
        const int64_t pr = sn.width / sn.group, rn = pr == 1 ? gn : gn / pr;
        gpu_prefetch_l2_range(row_at<false>(c.lead, sn.in, rn) + (gn - rn * pr) * sn.group * In::kBytes,
                              uint32_t(sn.group * In::kBytes), 0, 1);
      }
    }
    const int j = b < L.side[0].batches ? 0 : 1;
    const QkShape& sh = L.side[j];
    const QkSide& s = j ? c.k : c.q;
    const int T = sh.threads, P = sh.partials, S = sh.steps;
    const int t = threadIdx.x & (T - 1);
    const int gib = threadIdx.x / T;  // group in block
    const int64_t gi = (j ? b - L.side[0].batches : b) * sh.groups_per_block + gib;
    const bool active = gi < sh.groups;
    const int32_t G = int32_t(s.group);
    // The group's row and head (one division only in the per-head mode).
    const int64_t per_row = s.width / s.group;
    const int64_t row = per_row == 1 ? gi : gi / per_row;
    const int64_t head = gi - row * per_row;
    const char* x = active ? row_at<false>(c.lead, s.in, row) + head * G * In::kBytes : nullptr;

    uint32_t w[kRegSteps][kW];
#pragma unroll
    for (int st = 0; st < kRegSteps; ++st)
      if (active && st < S && st * P + kQkVec * t < G)
        load_vec<In::kBytes, kQkVec>(x, st * P + kQkVec * t, G, sh.access_in, w[st]);
    // 16-bit inputs: the weights of those steps too (apply, fused), so that their latency overlaps
    // the reduction's and no store of the apply pass stands between them and their use (f32
    // inputs load them in the apply pass: with x's 32 words they would spill).
    constexpr bool kEarlyWeights = kIn != DType::kF32 && kKind != QkKind::kStats;
    uint32_t gw[kRegSteps][kQkVec];
    if (kEarlyWeights)
#pragma unroll
      for (int st = 0; st < kRegSteps; ++st)
        if (active && st < S && st * P + kQkVec * t < G) qk_load_weights(s, sh, st * P + kQkVec * t, G, gw[st]);
    gpu_allow_next_grid();
    float inv;
    if constexpr (kKind == QkKind::kApply) {  // the sums are given
      if (!active) continue;
      inv = qk_inv_rms(c, s, math::float_of(load_elem<4>(row_at<false>(c.lead, c.stats, row), j, sh.access_stats)));
    } else {
      // The canonical sum of squares: this thread's 8 partials in step order, then the tree.
      float part[kQkVec];
#pragma unroll
      for (int e = 0; e < kQkVec; ++e) part[e] = 0.0f;
#pragma unroll
      for (int st = 0; st < kRegSteps; ++st)
        if (active && st < S && st * P + kQkVec * t < G) qk_accumulate<kIn>(w[st], part);
      for (int st = kRegSteps; st < S; ++st)
        if (active && st * P + kQkVec * t < G) {
          uint32_t v[kW];
          load_vec<In::kBytes, kQkVec>(x, st * P + kQkVec * t, G, sh.access_in, v);
          qk_accumulate<kIn>(v, part);
        }
#pragma unroll
      for (int n = kQkVec; n > 1; n /= 2)
#pragma unroll
        for (int e = 0; e < n / 2; ++e) part[e] = math::add_rn(part[2 * e], part[2 * e + 1]);
      constexpr bool stats = kKind == QkKind::kStats;
      inv = row_reduce_finish<kGpuWarp, true, true>(part[0], t, T, gib, red[parity], QkAdd(),
                                                    QkFinish{&c, &s, stats, qk_pow2_rcp(s.divisor)}, inv_of_group[parity]);
      if constexpr (stats) {
        if (active && t == 0)
          store_elem<4>(row_at<false>(c.lead, c.stats, row), j, math::encode_f32<false>(inv), sh.access_stats);
        continue;
      }
    }
    if (!active) continue;

    char* out = row_at<false>(c.lead, s.out, row) + head * G * kOutBytes;
    const PreMult rcp = qk_out_rcp<kIn, kOut>(c, L, j);
#pragma unroll
    for (int st = 0; st < kRegSteps; ++st)
      if (st < S && st * P + kQkVec * t < G) {
        if (!kEarlyWeights) qk_load_weights(s, sh, st * P + kQkVec * t, G, gw[st]);
        qk_apply_vec<kIn, kOut>(c, s, sh, st * P + kQkVec * t, G, w[st], gw[st], inv, rcp, out);
      }
    for (int st = kRegSteps; st < S; ++st)
      if (st * P + kQkVec * t < G) {
        uint32_t v[kW], vw[kQkVec];
        load_vec<In::kBytes, kQkVec>(x, st * P + kQkVec * t, G, sh.access_in, v);
        qk_load_weights(s, sh, st * P + kQkVec * t, G, vw);
        qk_apply_vec<kIn, kOut>(c, s, sh, st * P + kQkVec * t, G, v, vw, inv, rcp, out);
      }
  }
}

using QkKernelFn = void (*)(const QkRmsnormCall, const QkLaunch);

// apply where both sides' views allow vectors with one leading dimension (widths a multiple of 8):
// one thread a vector of 8 elements, q's vectors first, then k's. Apply is element-wise once a
// row's statistic is read, so its bytes do not depend on which thread computes an element: they
// equal the group kernel's. Input and output move with the streaming hint (each is touched once);
// the weights and statistics, read by many threads, with the default policy. Short calls
// (decode) would otherwise spread their rows over a few blocks of the group kernel whose threads
// do 4 vectors each one after another; long ones would hold a group's vectors in 128 registers a
// thread (a quarter of the threads an SM, so fewer bytes in flight).
struct QkSmall {
  uint32_t vectors[2];  // apply: vectors of q, of k
  uint32_t blocks[2];   // stats, fused (the small stats and group kernels below): blocks of q, of k
  uint32_t per_row[2];  // apply: vectors a row; stats, fused: groups a row
  DivU32 row_of[2];     // / per_row
  DivU32 group_of[2];   // fused: / (S T), a thread's group in its block
  uint32_t warm;        // apply: warm the input lines in L2 before the grid wait (a grid of at
                        // most a block a multiprocessor; larger calls measured slower with it)
};
template <DType kIn, DType kOut>
__global__ void __launch_bounds__(kQkBlock)
    qk_apply_small_kernel(FN_GRID_CONSTANT const QkRmsnormCall c, FN_GRID_CONSTANT const QkLaunch L,
                          FN_GRID_CONSTANT const QkSmall m) {
  using In = InTraits<kIn>;
  constexpr int kW = Vec<In::kBytes, kQkVec>::kWords;
  const uint32_t v = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = v < m.vectors[0] ? 0 : 1;
  const uint32_t u = j ? v - m.vectors[0] : v;
  const bool ok = u < m.vectors[j];  // threads past the last vector idle (no early return)
  const uint32_t row = m.row_of[j].div(u);
  const int32_t e = int32_t(u - row * m.per_row[j]) * kQkVec;
  const QkSide& s = j ? c.k : c.q;
  if (m.warm) warm_vec_lines<In::kBytes>(ok, row_at<true>(c.lead, s.in, row), e, row == 0, s.weight, s.w_type);
  gpu_wait_for_previous_grid();
  uint32_t x[kW], ww[kQkVec];
  float stat = 0.0f;
  // x first, then the weights and the statistic (L1/L2 hits after the first rows). Measured on an
  // H200 at 16384 x (4096 + 512) bf16: 95% of copy, against 89% for the same loads written
  // together after an early return of the threads past the end (docs/performance.md).
  if (ok) load_vec<In::kBytes, kQkVec, true, true>(row_at<true>(c.lead, s.in, row), e, int32_t(s.width), kVectors, x);
  if (ok) {
    qk_load_weights(s, L.side[j], e, int32_t(s.width), ww);
    stat = math::float_of(load_elem<4>(row_at<true>(c.lead, c.stats, row), j, L.side[j].access_stats));
  }
  gpu_allow_next_grid();
  if (ok)
    qk_apply_vec<kIn, kOut, true>(c, s, L.side[j], e, int32_t(s.width), x, ww, qk_inv_rms(c, s, stat),
                                  qk_out_rcp<kIn, kOut>(c, L, j), row_at<true>(c.lead, s.out, row));
}
using QkSmallFn = void (*)(const QkRmsnormCall, const QkLaunch, const QkSmall);
template <DType kIn>
QkSmallFn qk_small_for(DType out) {
  switch (out) {
    case DType::k_f8e4m3fn: return &qk_apply_small_kernel<kIn, DType::k_f8e4m3fn>;
    case DType::k_f8e4m3fnuz: return &qk_apply_small_kernel<kIn, DType::k_f8e4m3fnuz>;
    default: return &qk_apply_small_kernel<kIn, kIn>;
  }
}

// Threads a block of qk_small_stats_kernel at most: f32 inputs' column of 8 steps (64 registers)
// needs more than the 64 a thread of 1024 has.
FN_HD constexpr int qk_small_stats_block(DType in) { return in == DType::kF32 ? kQkMaxBlock : kMaxBlockThreads; }

// stats for short calls (decode), one block a multiprocessor at most: T threads a group, each
// with the S vectors of its column t (elements s P + 8t + e) in registers, their squares added in
// step order (thread_sum_squares, as the group kernel's thread t: the canonical order), and the
// tree across the group's lanes and warps (row_reduce_finish: no barrier below a warp, one
// above). Measured against S x T threads meeting in shared memory (qk_small_group_kernel's way):
// 1.55 -> 1.35-1.39 us at 16 x (4096 + 512) bf16 on an H200. The host takes it where the view of the
// input allows vectors with one leading dimension, G is whole steps and the grid is at most a
// block a multiprocessor (qk_small_groups).
template <DType kIn>
__global__ void __launch_bounds__(qk_small_stats_block(kIn))
    qk_small_stats_kernel(FN_GRID_CONSTANT const QkRmsnormCall c, FN_GRID_CONSTANT const QkLaunch L,
                          FN_GRID_CONSTANT const QkSmall m) {
  using In = InTraits<kIn>;
  constexpr int kW = Vec<In::kBytes, kQkVec>::kWords;
  __shared__ __align__(16) float red[qk_small_stats_block(kIn) / kGpuWarp];
  const int j = blockIdx.x < m.blocks[0] ? 0 : 1;
  const QkShape& sh = L.side[j];
  const QkSide& s = j ? c.k : c.q;
  const int T = sh.threads, P = sh.partials, S = sh.steps;
  // T is a power of two (P / 8): shifts and masks.
  const int gib = int(threadIdx.x) >> (__ffs(T) - 1), t = int(threadIdx.x) & (T - 1);
  const int64_t gi = int64_t(j ? blockIdx.x - m.blocks[0] : blockIdx.x) * sh.groups_per_block + gib;
  const bool active = gib < sh.groups_per_block && gi < sh.groups;
  const int32_t G = int32_t(s.group);
  const int64_t row = m.per_row[j] == 1 ? gi : int64_t(m.row_of[j].div(uint32_t(gi)));
  const int64_t head = gi - row * m.per_row[j];
  const char* xg = active ? row_at<true>(c.lead, s.in, row) + head * G * In::kBytes : nullptr;
  // Before the previous grid's writes are visible: the lines of the group's input warmed in L2.
#pragma unroll
  for (int k = 0; k < kMaxSteps; ++k)
    if (k < S) warm_vec_lines<In::kBytes>(active, xg, k * P + kQkVec * t, false, nullptr, s.w_type);
  gpu_wait_for_previous_grid();
  uint32_t x[kMaxSteps][kW];
#pragma unroll
  for (int k = 0; k < kMaxSteps; ++k)
    if (active && k < S) load_vec<In::kBytes, kQkVec, true>(xg, k * P + kQkVec * t, G, kVectors, x[k]);
  gpu_allow_next_grid();
  const float v = active ? thread_sum_squares<In, kMaxSteps, kQkVec, kW>(x, S) : 0.0f;
  const float ss = row_reduce_finish<kGpuWarp, false, true>(v, t, T, gib, red, QkAdd(),
                                                            QkFinish{&c, &s, true, 0.0f}, static_cast<float*>(nullptr));
  if (active && t == 0)
    store_elem<4>(row_at<true>(c.lead, c.stats, row), j, math::encode_f32<false>(ss), sh.access_stats);
}

// The fused form for short calls (decode): a group's S steps on S x T threads of its own, one
// vector a thread, where the group kernel runs a thread's S vectors one after another. Thread
// (s, t) of a group (index s T + t in the group's run of the block) squares its vector; after a
// barrier, thread (0, t) adds the S squares of partial 8t + e in step order, as the group
// kernel's thread t does in registers (the canonical order, docs/numerics.md §2; with one step
// the squares are the partials, no barrier), and the same tree follows (row_reduce_finish's,
// over the group's T threads of step 0; the threads of the other steps reduce zeros beside them),
// with the formula evaluated by every warp of the group. Every thread then applies its own
// vector. The host takes it where the views allow vectors with one leading dimension, G is whole
// steps, S T <= 1024 and the grid is at most a block a multiprocessor (qk_small_groups).
template <DType kIn, DType kOut>
__global__ void __launch_bounds__(kMaxBlockThreads)
    qk_small_group_kernel(FN_GRID_CONSTANT const QkRmsnormCall c, FN_GRID_CONSTANT const QkLaunch L,
                          FN_GRID_CONSTANT const QkSmall m) {
  using In = InTraits<kIn>;
  constexpr int kW = Vec<In::kBytes, kQkVec>::kWords;
  constexpr int kOutBytes = QkOut<kIn, kOut>::kBytes;
  __shared__ __align__(16) float squares[kMaxBlockThreads][kQkVec];
  __shared__ __align__(16) float red[kMaxBlockThreads / kGpuWarp];
  __shared__ float group_result[kMaxBlockThreads];
  const int j = blockIdx.x < m.blocks[0] ? 0 : 1;
  const QkShape& sh = L.side[j];
  const QkSide& s = j ? c.k : c.q;
  const int T = sh.threads, P = sh.partials, S = sh.steps, per = S * T;
  // T is a power of two (P / 8): shifts and masks.
  const int t_shift = __ffs(T) - 1;
  const int gib = int(m.group_of[j].div(threadIdx.x)), st = (int(threadIdx.x) - gib * per) >> t_shift;
  const int t = int(threadIdx.x) & (T - 1);
  const int64_t gi = int64_t(j ? blockIdx.x - m.blocks[0] : blockIdx.x) * sh.groups_per_block + gib;
  const bool active = gib < sh.groups_per_block && gi < sh.groups;
  const int32_t G = int32_t(s.group), e = st * P + kQkVec * t;
  const int64_t row = m.per_row[j] == 1 ? gi : int64_t(m.row_of[j].div(uint32_t(gi)));
  const int64_t head = gi - row * m.per_row[j];
  const char* xg = active ? row_at<true>(c.lead, s.in, row) + head * G * In::kBytes : nullptr;
  // Before the previous grid's writes are visible: every 128-byte line of the group's input and
  // (by the block's first group) of its weights warmed in L2 by the thread whose vector starts it.
  warm_vec_lines<In::kBytes>(active, xg, e, gib == 0, s.weight, s.w_type);
  gpu_wait_for_previous_grid();
  uint32_t x[kW] = {}, ww[kQkVec];
  if (active) {
    load_vec<In::kBytes, kQkVec, true>(xg, e, G, kVectors, x);
    qk_load_weights(s, sh, e, G, ww);
  }
  gpu_allow_next_grid();
  float part[kQkVec];
#pragma unroll
  for (int k = 0; k < kQkVec; ++k) {
    const float xk = In::get(x, k);
    part[k] = math::mul_rn(xk, xk);
  }
  // S is the same for the whole block (one side): with one step the thread's squares are its
  // partials; else they meet in shared memory and the step-0 threads add them in step order.
  if (S > 1) {
    float4* mine = reinterpret_cast<float4*>(squares[threadIdx.x]);
    mine[0] = make_float4(part[0], part[1], part[2], part[3]);
    mine[1] = make_float4(part[4], part[5], part[6], part[7]);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kQkVec; ++k) part[k] = 0.0f;
    if (st == 0 && active) {
#pragma unroll
      for (int u = 0; u < kMaxSteps; ++u) {
        if (u >= S) break;
        const float4* q = reinterpret_cast<const float4*>(squares[threadIdx.x + u * T]);
        const float4 a = q[0], b = q[1];
        part[0] = math::add_rn(part[0], a.x); part[1] = math::add_rn(part[1], a.y);
        part[2] = math::add_rn(part[2], a.z); part[3] = math::add_rn(part[3], a.w);
        part[4] = math::add_rn(part[4], b.x); part[5] = math::add_rn(part[5], b.y);
        part[6] = math::add_rn(part[6], b.z); part[7] = math::add_rn(part[7], b.w);
      }
    }
  }
#pragma unroll
  for (int n = kQkVec; n > 1; n /= 2)
#pragma unroll
    for (int k = 0; k < n / 2; ++k) part[k] = math::add_rn(part[2 * k], part[2 * k + 1]);
  // The tree over the group's T step-0 threads (row_reduce_finish's, with its formula evaluated
  // by every warp of the group: one barrier where T spans warps, none where the group is one
  // step of at most a warp). Inactive threads and those of later steps reduce zeros.
  float v = part[0];
  const int lanes = T < kGpuWarp ? T : kGpuWarp;
#pragma unroll
  for (int k = 1; k < kGpuWarp; k *= 2)
    if (k < lanes) v = math::add_rn(v, FN_SHFL_XOR(v, k, kGpuWarp));
  const QkFinish finish{&c, &s, false, qk_pow2_rcp(s.divisor)};
  float inv;
  if (T >= kGpuWarp) {
    if (threadIdx.x % kGpuWarp == 0) red[threadIdx.x / kGpuWarp] = v;
    __syncthreads();
    // Every warp of the group combines the warp results of its step-0 threads.
    inv = active ? finish(combine_warps<kGpuWarp, true>(red + (gib * per) / kGpuWarp, T / kGpuWarp, QkAdd())) : 0.0f;
  } else if (S == 1) {
    inv = finish(v);
  } else {
    if (st == 0 && t == 0) group_result[gib] = finish(v);
    __syncthreads();
    inv = group_result[gib];
  }
  if (!active) return;
  qk_apply_vec<kIn, kOut>(c, s, sh, e, G, x, ww, inv, qk_out_rcp<kIn, kOut>(c, L, j),
                          row_at<true>(c.lead, s.out, row) + head * G * kOutBytes);
}
template <DType kIn>
QkSmallFn qk_small_group_for(DType out) {
  switch (out) {
    case DType::k_f8e4m3fn: return &qk_small_group_kernel<kIn, DType::k_f8e4m3fn>;
    case DType::k_f8e4m3fnuz: return &qk_small_group_kernel<kIn, DType::k_f8e4m3fnuz>;
    default: return &qk_small_group_kernel<kIn, kIn>;
  }
}
template <DType kIn>
QkSmallFn qk_small_for(QkKind kind, DType out) {
  switch (kind) {
    case QkKind::kStats: return &qk_small_stats_kernel<kIn>;
    case QkKind::kApply: return qk_small_for<kIn>(out);
    default: return qk_small_group_for<kIn>(out);
  }
}

// Whether stats take qk_small_stats_kernel and the fused form qk_small_group_kernel: the block
// (*threads: the larger side's threads a group, T for stats and S T for the fused form, at least
// 256; each side's groups_per_block = *threads / that, spare threads idle), its blocks per side
// (m->blocks) and the groups' rows (m->per_row, m->row_of; the fused form's m->group_of). The
// bytes are the group kernel's.
inline bool qk_small_groups(const QkRmsnormCall& c, QkLaunch* L, int multiprocessors, QkSmall* m, int* threads) {
  if (c.kind == QkKind::kApply || c.lead.ndim > 1) return false;
  const bool stats = c.kind == QkKind::kStats;
  const int block_limit = stats ? qk_small_stats_block(c.in_type) : kMaxBlockThreads;
  int most = kQkBlock;
  for (int j = 0; j < 2; ++j) {
    const QkSide& s = j ? c.k : c.q;
    const QkShape& sh = L->side[j];
    const bool out_ok = stats || sh.access_out == kVectors;
    if (s.group % sh.partials != 0 || sh.access_in != kVectors || sh.access_w != kVectors || !out_ok ||
        sh.steps > kMaxSteps || (stats ? sh.threads : sh.steps * sh.threads) > block_limit ||
        s.width / s.group > (int64_t(1) << 31))
      return false;
    most = std::max(most, stats ? sh.threads : sh.steps * sh.threads);
  }
  int64_t blocks = 0;
  for (int j = 0; j < 2; ++j) {
    const QkSide& s = j ? c.k : c.q;
    QkShape& sh = L->side[j];
    const int per = stats ? sh.threads : sh.steps * sh.threads;
    sh.groups_per_block = most / per;
    const int64_t b = (sh.groups + sh.groups_per_block - 1) / sh.groups_per_block;
    blocks += b;
    if (b > multiprocessors || sh.groups >= (int64_t(1) << 32)) return false;
    m->blocks[j] = uint32_t(b);
    m->per_row[j] = uint32_t(s.width / s.group);
    m->row_of[j] = DivU32::of(m->per_row[j]);
    m->group_of[j] = DivU32::of(uint32_t(per));  // read by the fused kernel only
  }
  *threads = most;
  return blocks <= multiprocessors;
}

// Whether apply takes qk_apply_small_kernel (from the views and the widths; the bytes are the
// same either way), and its vector counts: not for views that do not allow vectors with one
// leading dimension, nor for 2^31 vectors or more.
inline bool qk_small(const QkRmsnormCall& c, const QkLaunch& L, QkSmall* m) {
  if (c.kind != QkKind::kApply || c.lead.ndim > 1) return false;
  const int64_t limit = int64_t(1) << 31;
  int64_t total = 0;
  for (int j = 0; j < 2; ++j) {
    const QkSide& s = j ? c.k : c.q;
    const QkShape& sh = L.side[j];
    if (s.width % kQkVec != 0 || sh.access_in != kVectors || sh.access_out != kVectors || sh.access_w != kVectors)
      return false;
    const int64_t per_row = s.width / kQkVec;
    if (per_row >= limit || c.lead.rows >= limit) return false;
    total += c.lead.rows * per_row;
    if (total >= limit) return false;
    m->vectors[j] = uint32_t(c.lead.rows * per_row);
    m->per_row[j] = uint32_t(per_row);
    m->row_of[j] = DivU32::of(uint32_t(per_row));
  }
  return true;
}

// A side's mapping: from G and the views' alignments only (never from the row count).
inline QkShape qk_shape(const QkRmsnormCall& c, const QkSide& s) {
  QkShape sh{};
  const int bytes = c.in_type == DType::kF32 ? 4 : 2, w_bytes = s.w_type == DType::kF32 ? 4 : 2;
  sh.partials = int32_t(math::reduction_partials(s.group));
  sh.threads = sh.partials / kQkVec;
  sh.steps = int32_t((s.group + sh.partials - 1) / sh.partials);
  sh.groups = c.lead.rows * (s.width / s.group);
  // Vectors where every group's start is aligned for them (heads inside a row too).
  auto access = [&](const RowView& v, int elem, const LeadShape& lead) {
    const int32_t a = access_for(lead, v, elem, kQkVec * elem);
    return a == kVectors && s.group != s.width && (s.group * elem) % std::min(kQkVec * elem, 16) != 0 ? kElements : a;
  };
  sh.access_in = access(s.in, bytes, c.lead);
  const int out_bytes = c.out_type == c.in_type ? bytes : 1;
  sh.access_out = s.out.data != nullptr ? access(s.out, out_bytes, c.lead) : kVectors;
  const LeadShape one_row;
  RowView wv;
  wv.data = const_cast<char*>(s.weight);
  sh.access_w = access_for(one_row, wv, w_bytes, kQkVec * w_bytes);
  sh.access_stats = c.stats.data == nullptr || rows_aligned(c.lead, c.stats, 4) ? kElements : kBytesOnly;
  return sh;
}

// The kernel of an input dtype, output dtype (the input's, or FP8) and kind: stats (1 per input
// dtype), apply and fused (3 each): 21 instantiations (and as many small-call kernels above).
template <DType kIn, QkKind kKind>
QkKernelFn qk_kernel_for(DType out) {
  switch (out) {
    case DType::k_f8e4m3fn: return &qk_rmsnorm_kernel<kIn, DType::k_f8e4m3fn, kKind>;
    case DType::k_f8e4m3fnuz: return &qk_rmsnorm_kernel<kIn, DType::k_f8e4m3fnuz, kKind>;
    default: return &qk_rmsnorm_kernel<kIn, kIn, kKind>;
  }
}
template <DType kIn>
QkKernelFn qk_kernel_for(QkKind kind, DType out) {
  switch (kind) {
    case QkKind::kStats: return &qk_rmsnorm_kernel<kIn, kIn, QkKind::kStats>;
    case QkKind::kApply: return qk_kernel_for<kIn, QkKind::kApply>(out);
    default: return qk_kernel_for<kIn, QkKind::kFused>(out);
  }
}

fusednorm_status plugin_qk_rmsnorm(const QkRmsnormCall* call, int32_t device, void* stream, char* msg, size_t n) {
  const QkRmsnormCall& c = *call;
  if (c.q.group > kQkMaxGroup || c.k.group > kQkMaxGroup)
    return say(FUSEDNORM_UNSUPPORTED, msg, n, "qk_rmsnorm: a group of %lld elements: the " FN_GPU_VENDOR
               " backend supports groups (rows, or heads) of at most %lld", (long long)std::max(c.q.group, c.k.group),
               (long long)kQkMaxGroup);
  if (c.lead.rows == 0) return FUSEDNORM_SUCCESS;
  DeviceGuard guard(device);
  if (guard.error != gpuSuccess) return vendor_error(guard.error, "selecting the device", msg, n);
  QkLaunch L;
  L.side[0] = qk_shape(c, c.q);
  L.side[1] = qk_shape(c, c.k);
  L.access_scales = reinterpret_cast<uintptr_t>(c.out_scales) % 4 == 0 ? kElements : kBytesOnly;
  const int threads = std::max({kQkBlock, L.side[0].threads, L.side[1].threads});
  for (QkShape& sh : L.side) {
    sh.groups_per_block = threads / sh.threads;
    sh.batches = (sh.groups + sh.groups_per_block - 1) / sh.groups_per_block;
  }
  // Persistent: at most the blocks of up to 2048 threads an SM can hold at once.
  const DeviceFacts& dev = g_devices[size_t(device)];
  const int64_t blocks =
      std::min<int64_t>(L.side[0].batches + L.side[1].batches, int64_t(dev.multiprocessors) * (2048 / threads));
  const gpuStream_t st = static_cast<gpuStream_t>(stream);
  QkSmall m{};
  QkLaunch Ls = L;
  int small_threads = kQkBlock;
  const bool small_apply = qk_small(c, L, &m);
  if (small_apply || qk_small_groups(c, &Ls, dev.multiprocessors, &m, &small_threads)) {
    const QkSmallFn fs = c.in_type == DType::kF32   ? qk_small_for<DType::kF32>(c.kind, c.out_type)
                         : c.in_type == DType::kF16 ? qk_small_for<DType::kF16>(c.kind, c.out_type)
                                                    : qk_small_for<DType::kBF16>(c.kind, c.out_type);
    const unsigned grid = small_apply ? unsigned((uint64_t(m.vectors[0]) + m.vectors[1] + kQkBlock - 1) / kQkBlock)
                                      : m.blocks[0] + m.blocks[1];
    m.warm = small_apply && grid <= unsigned(dev.multiprocessors);
    gpuError_t e = launch_pdl(fs, dev, grid, unsigned(small_threads), 0, st, c, small_apply ? L : Ls, m);
    if (e == gpuSuccess) e = gpuGetLastError();
    if (e != gpuSuccess) return vendor_error(e, "launching qk_rmsnorm", msg, n);
    return FUSEDNORM_SUCCESS;
  }
  QkKernelFn fn = c.in_type == DType::kF32   ? qk_kernel_for<DType::kF32>(c.kind, c.out_type)
                  : c.in_type == DType::kF16 ? qk_kernel_for<DType::kF16>(c.kind, c.out_type)
                                             : qk_kernel_for<DType::kBF16>(c.kind, c.out_type);
  gpuError_t e = launch_pdl(fn, dev, unsigned(blocks), unsigned(threads), 0, st, c, L);
  if (e == gpuSuccess) e = gpuGetLastError();
  if (e != gpuSuccess) return vendor_error(e, "launching qk_rmsnorm", msg, n);
  return FUSEDNORM_SUCCESS;
}

}  // namespace gpu
}  // namespace fusednorm
