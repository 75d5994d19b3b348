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
// the grid is persistent and walks over the blocks' batches, prefetching its next batch into L2.
// Nothing of a group's arithmetic depends on the grid, the row count or the other side (batch
// invariance).
// Three other kernels, in qk_rmsnorm_short.cuh, serve calls with vector-aligned views: apply of
// any size takes qk_apply_small_kernel (one thread a vector), short stats calls (decode)
// qk_small_stats_kernel and short fused calls qk_small_group_kernel (the same additions in the
// same order). The pieces all of them use are in qk_parts.cuh.
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
#include "backends/gpu/qk_parts.cuh"
#include "backends/gpu/qk_rmsnorm_short.cuh"
#include "backends/gpu/reduce.cuh"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// Registers a thread: apply and the fused form keep their group's vectors and weights of
// kQkRegSteps steps (up to 128: one block of 512 threads an SM, or two of 256); stats keeps the
// vectors only, in 64 (80 with f32 inputs): twice the blocks, twice the loads in flight.
// Apply takes this kernel only where its views do not allow vectors (qk_apply_small_kernel in
// qk_rmsnorm_short.cuh serves the others, at 92-94% of copy on an H200 where this kernel reached
// 68%: docs/performance.md).
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
      inv = qk_inv_rms(c, s, math::float_of(load_elem<4>(row_at<false>(c.lead, c.stats, row), j, sh.access_stats)),
                       math::pow2_rcp(s.divisor));
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
                                                    QkFinish{&c, &s, stats, math::pow2_rcp(s.divisor)}, inv_of_group[parity]);
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
