// Compiled twice: as CUDA and as HIP (through qk_rmsnorm.cuh). qk_rmsnorm's kernels for calls
// with vector-aligned views: apply of any size (qk_apply_small_kernel, one thread a vector), short
// stats calls (qk_small_stats_kernel) and short fused calls (qk_small_group_kernel, decode), with
// the host's choice of them (qk_small, qk_small_groups). The same additions in the same order as
// the group kernel (qk_rmsnorm.cuh), so the same bytes; the launcher there picks one.
#pragma once

#include <stdint.h>

#include "backends/gpu/qk_parts.cuh"

namespace fusednorm {
namespace gpu {

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
    qk_apply_vec<kIn, kOut, true>(c, s, L.side[j], e, int32_t(s.width), x, ww, qk_inv_rms(c, s, stat, math::pow2_rcp(s.divisor)),
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
  const QkFinish finish{&c, &s, false, math::pow2_rcp(s.divisor)};
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

}  // namespace gpu
}  // namespace fusednorm
