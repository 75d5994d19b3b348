// Compiled twice: as CUDA (backends/cuda) and as HIP (backends/hip).
// rmsnorm_quant on the GPU (docs/architecture.md, "GPU kernel"). One row per group of T threads,
// the row read once and kept in registers. Thread t owns the kVec partial sums kVec*t .. kVec*t +
// kVec - 1 of the canonical reduction (docs/numerics.md §2), i.e. elements s*P + kVec*t + j for
// steps s < S, which it accumulates in step order; the pairwise tree continues across threads
// with shfl_xor and across warps through shared memory. kVec * kSteps = 32 elements a thread in
// the general kernel, 20 to 48 in the fast ones (fast_vec). The grid is persistent: each block
// walks over groups of R rows (resident blocks hide each other's load latency; the block's next
// rows are prefetched into L2, not into registers, which measured slower). Block shape and
// kernel depend on H, the dtypes and the options only; the grid size depends on the row count but
// no row's arithmetic does (batch invariance). A block with a single row group (short calls)
// runs a copy of the row body tuned for latency: the same arithmetic, other instruction order
// (CUDA only).
#pragma once

#include <stdint.h>
#include <string.h>

#include "backends/gpu/encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/io.cuh"
#include "backends/gpu/plan.h"
#include "backends/gpu/reduce.cuh"
#include "backends/gpu/tuning.h"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// Register budget: a block of up to 1024 threads (kVec 4) must fit 64 registers a thread; the
// kVec >= 8 kernels (at most 512 threads) may use kMaxNReg8 (tuning.h).
template <DType kIn, DType kOut, int kWarp, int kVec, int kSteps, Plan kPlan>
__global__ void FN_KERNEL_BOUNDS(kMaxBlockThreads, kVec >= 8 ? kMaxNReg8 : 64)
    rmsnorm_quant_kernel(FN_GRID_CONSTANT const RmsnormQuantCall c, const RowShape shape, const Accesses acc, const int32_t gamma_smem) {
  constexpr bool kFast = kPlan != Plan::kAll;
  // Who evaluates a row's formula after its block reduction (row_reduce_finish): measured best
  // (docs/performance.md), every warp for inv_rms in the per-row and static kernels and for the
  // scale in the per-row kernels, the row's first warp elsewhere (the group kernels: 1% slower at
  // 16384 x 8192 with every warp).
  constexpr bool kInvOnce = kPlan != Plan::kRow && kPlan != Plan::kStatic;
  constexpr bool kScaleOnce = kPlan != Plan::kRow;
  using In = InTraits<kIn>;
  using InVec = Vec<In::kBytes, kVec>;
  constexpr int kW = InVec::kWords;
  // The weight table always in shared memory on CUDA (>= 163 KiB on sm_80 and sm_90); on HIP (64
  // KiB of LDS) where the host says so (gamma_smem).
  constexpr bool kGammaSmem = !kGpuIsHip;
  constexpr int kWarps = kMaxBlockThreads / 32;
  __shared__ __align__(16) float red_sum[2][kWarps];  // combine_shared reads vectors
  __shared__ __align__(16) uint32_t red_max[2][kWarps];
  // Per-row results of the reductions (rows of more than a warp: at most kRowThreads / 64 a block).
  __shared__ float inv_of_row[2][kRowThreads / 32];
  __shared__ math::DynamicScale scale_of_row[2][kRowThreads / 32];
  // g = w + weight_offset, f32, for this thread's kSteps * kVec elements: each thread writes and
  // reads only its own slice (laid out [step][quad][thread] for conflict-free 16-byte access),
  // so no barrier guards it.
  extern __shared__ float4 gamma_tab[];

  const int T = shape.threads_per_row, P = shape.partials, R = shape.rows_per_block;
  const int S = kFast ? kSteps : shape.steps;
  // T, P and every group size below H are powers of two: shifts and masks, no divisions.
  const int t = threadIdx.x & (T - 1);
  const int rib = threadIdx.x >> (__ffs(T) - 1);
  const int32_t h = int32_t(c.h);  // <= 32768: offsets inside a row are 32-bit
  const int64_t groups = (c.lead.rows + R - 1) / R;
  const bool norm = c.norm == FUSEDNORM_NORM_RMS;
  // The way of scaling: the plan's, or (general kernel) the call's.
  const bool is_static = kFast ? kPlan == Plan::kStatic : c.mode == FUSEDNORM_SCALE_STATIC;
  const int32_t g = c.group >= h ? h : int32_t(c.group);
  const bool step_groups = kFast ? kPlan == Plan::kGroup : !is_static && g < h && g <= P;
  const int w_bytes = c.w_type == DType::kF32 ? 4 : 2;

  // Element offset of this thread's vector in step s. `tl` is t, laundered once a row (below) so
  // that the compiler derives the offsets inside the row loop instead of keeping them all live
  // across it (which spilled).
  int tl = t;
  auto elem0 = [&](int s) { return int32_t(s * P + kVec * tl); };

  // L2 warm-up of a row group's input (and residual) rows: the fast kernels' rows are contiguous.
  auto prefetch_rows = [&](int64_t grp) {
#if FN_CUDA_ARCH >= 900
    if (t != 0) return;  // one bulk prefetch a row (gpu_prefetch_l2_range): the others skip its arithmetic
#endif
    const int64_t row = grp * R + rib;
    if (!kFast || grp >= groups || row >= c.lead.rows) return;
    const uint32_t bytes = uint32_t(h) * In::kBytes;
    gpu_prefetch_l2_range(row_at<kFast>(c.lead, c.in, row), bytes, t, T);
    if (c.res.data != nullptr) gpu_prefetch_l2_range(row_at<kFast>(c.lead, c.res, row), bytes, t, T);
  };

  // Per-call constants, before the wait below (they read only the arguments).
  // For H a power of two, ss / H is ss * 2^-k (the same correctly rounded value, subnormal results
  // included): a multiply instead of a division on each row's critical path.
  const float len = math::length_f32(h);
  const float inv_len = math::pow2_rcp(len);
  const bool clamp = c.qclamp < INFINITY;
  const float4* const gamma_mine = gamma_tab + threadIdx.x;  // this thread's table slots, blockDim.x apart
  // The table read through its 32-bit shared-window address, kept in a register (CUDA; not in the
  // group kernels, which have no register to spare for it: they spill).
#if FN_CUDA_ARCH > 0
  constexpr bool kGammaAsm = kPlan != Plan::kGroup;
  const uint32_t gamma_sh = kGammaAsm ? gpu_shared_address(gamma_mine) : 0u;
#endif

  // Programmatic dependent launch (sm_90): this grid may start while the previous kernel of the
  // stream finishes. Until that kernel's memory is visible it only warms L2 with the block's
  // first rows and the weight (hints: no value is read), then it waits, and lets the next kernel
  // start its own launch at once.
  prefetch_rows(blockIdx.x);
  if (kFast && norm && rib == 0) gpu_prefetch_l2_range(c.weight, uint32_t(h) * w_bytes, t, T);
  if (is_static && threadIdx.x == 0)
    gpu_prefetch_l2_range(reinterpret_cast<const char*>(c.static_scale), 4, 0, 1);
#if FN_CUDA_ARCH > 0
  // Every constant-cache line of the arguments read before the wait (the never-taken store keeps
  // the reads): the first use of each after the wait would otherwise miss (decode -0.02 to
  // -0.1 us; CUDA only).
  {
    const uint32_t* cw = reinterpret_cast<const uint32_t*>(&c);
    uint32_t warm = 0;
#pragma unroll
    for (int i = 0; i < int(sizeof(c) / 4); i += 16) warm ^= cw[i];
    warm ^= uint32_t(shape.vec) ^ uint32_t(acc.in) ^ uint32_t(gamma_smem);
    if (c.h < 0) *reinterpret_cast<volatile uint32_t*>(c.out.data) = warm;
  }
#endif
  gpu_wait_for_previous_grid();
  gpu_allow_next_grid();

  PreMult static_r{};  // static scale: one multiplier for the whole call (first row)

  // One group of R rows, buffers `parity` of the reductions'. kFirst: 1 = the only group of its
  // block (every block has at most one: a short call, e.g. decode), 2 = any group of the loop
  // (the first one decided here). A fast kernel whose blocks have one group each runs the kFirst
  // = 1 copy of this body, tuned for latency: the weight table's copies converted after the sum
  // of squares is reduced (they land meanwhile) and inv_rms by every warp (one barrier). The loop
  // keeps the choices measured best at 16384 rows; both compute the same bytes (numerics.md).
  // (The scale by every warp too measured decode -0.1 us but the loop, sharing one register
  // allocation, 1-2% slower at H 7168 / 8192 / 16384.)
  auto row_group = [&](const int64_t grp, const int parity, auto first_c) {
    constexpr int kFirst = decltype(first_c)::value;
    const bool first = kFirst == 2 ? grp == blockIdx.x : kFirst == 1;
    constexpr bool kTuned = kFirst == 1;  // the latency-tuned copy
    constexpr bool kInvOnceHere = kTuned ? false : kInvOnce;
    // The latency-tuned copy combines a row's warp results in registers (combine_shared: no
    // shuffle chain after the barrier; the loop's code measured better with the butterfly).
    constexpr bool kLocalHere = kTuned;
    // The latency-tuned copy leaves the weight as copied (no later row reads the table) and
    // converts each step's words where y is made: no pass over the table between the reductions.
    constexpr bool kRawGamma = kFast && kTuned && kVec * kSteps <= kElemsPerThread;
    const int64_t row = grp * R + rib;
    const bool active = row < c.lead.rows;  // inactive threads still join every barrier
    gpu_launder(tl);

    // The row as loaded (input-dtype words, 0 past H; with a residual, the rounded sum).
    uint32_t raw[kSteps][kW];
    const char* in = active ? row_at<kFast>(c.lead, c.in, row) : nullptr;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
#pragma unroll
      for (int i = 0; i < kW; ++i) raw[s][i] = 0;
      if (active && s < S) load_vec<In::kBytes, kVec, kFast>(in, elem0(s), h, acc.in, raw[s]);
    }

    // Once per block, after the first row's loads are on their way: the static multiplier and
    // the weight table.
    if (is_static && first) {
      uint32_t sbits;
      memcpy(&sbits, c.static_scale, 4);  // any alignment
      static_r = pre_mult<kOut>(math::div_rn(1.0f, math::float_of(sbits)));
    }
    // The weight table (first row group): slot q of step s is table entry
    // (s * (kVec / 4) + q) * blockDim.x + threadIdx.x. Addresses and offsets from laundered copies
    // of the thread's indices: derived from the row loop's, they would be hoisted out of it with
    // them and kept live across it (spills at 64 registers).
    const bool table_now = (kGammaSmem || gamma_smem) && norm && first;
    auto table_slot = [&] {
      int ti = threadIdx.x;
      gpu_launder(ti);
      return gamma_tab + ti;
    };
    if (table_now) {
      float4* slot = table_slot();
      const int slots = blockDim.x;
      int tw = t;
      gpu_launder(tw);
      if (kFast) {
        // Every step's weight vector is copied to its first slots without a register (the views
        // of a fast kernel are vector-aligned), then converted in place by table_finish: one
        // memory round trip for the whole table, not one a step (a decode call waits for it),
        // and no registers held across it. A vector of 16-bit weights fills half its slots'
        // bytes, f32 ones all.
        const char* w0 = c.weight + kVec * tw * (c.w_type == DType::kF32 ? 4 : 2);
        if (c.w_type == DType::kF32) {
#pragma unroll
          for (int s = 0; s < kSteps; ++s)
#pragma unroll
            for (int q = 0; q < kVec / 4; ++q)
              gpu_copy_async<16>(slot + (s * (kVec / 4) + q) * slots, w0 + (s * P + 4 * q) * 4);
        } else {
#pragma unroll
          for (int s = 0; s < kSteps; ++s) gpu_copy_async<kVec * 2>(slot + s * (kVec / 4) * slots, w0 + s * P * 2);
        }
      } else {
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          float g[kVec];
          if (s < S) load_gamma<kVec, kFast>(c, elem0(s), h, acc.w, g);
#pragma unroll
          for (int q = 0; q < kVec / 4; ++q)
            slot[(s * (kVec / 4) + q) * slots] =
                s < S ? make_float4(g[4 * q], g[4 * q + 1], g[4 * q + 2], g[4 * q + 3]) : make_float4(0, 0, 0, 0);
        }
      }
    }
    // The fast kernels' copies, once they have landed, converted in place to g = w + weight_offset.
    auto table_finish = [&] {
      if (!kFast || !table_now) return;
      gpu_copy_async_wait_all();
      if (kRawGamma) return;  // make_y converts the words where it reads them
      float4* slot = table_slot();
      const int slots = blockDim.x;
      const float off = c.weight_offset;
      // 16-bit weights: software-pipelined by one step, step s + 1's words read before step s's
      // slots are written (in the order written, each read would wait behind the previous step's
      // writes, which may alias for all the compiler knows); f32 ones step by step (their
      // pipeline's registers made the 48-element kernels spill). One loop per weight dtype.
      auto convert = [&](auto w_c) {
        constexpr DType kWt = decltype(w_c)::value;
        using W = InTraits<kWt>;
        constexpr int kWords = kVec * W::kBytes / 4;  // a step's words as copied
        auto read = [&](int s, uint32_t w[kWords]) { read_slot_words<kWords>(slot + s * (kVec / 4) * slots, slots, w); };
        if (kWt == DType::kF32) {
#pragma unroll
          for (int s = 0; s < kSteps; ++s) {
            uint32_t w[kWords];
            read(s, w);
#pragma unroll
            for (int q = 0; q < kVec / 4; ++q)
              slot[(s * (kVec / 4) + q) * slots] =
                  make_float4(math::add_rn(W::get(w, 4 * q), off), math::add_rn(W::get(w, 4 * q + 1), off),
                              math::add_rn(W::get(w, 4 * q + 2), off), math::add_rn(W::get(w, 4 * q + 3), off));
          }
          return;
        }
        uint32_t cur[kWords], next[kWords];
        read(0, cur);
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          if (s + 1 < kSteps) read(s + 1, next);
#pragma unroll
          for (int q = 0; q < kVec / 4; ++q)
            slot[(s * (kVec / 4) + q) * slots] =
                make_float4(math::add_rn(W::get(cur, 4 * q), off), math::add_rn(W::get(cur, 4 * q + 1), off),
                            math::add_rn(W::get(cur, 4 * q + 2), off), math::add_rn(W::get(cur, 4 * q + 3), off));
#pragma unroll
          for (int i = 0; i < kWords; ++i) cur[i] = next[i];
        }
      };
      if (c.w_type == DType::kF32) convert(DTypeConstant<DType::kF32>());
      else if (c.w_type == DType::kBF16) convert(DTypeConstant<DType::kBF16>());
      else convert(DTypeConstant<DType::kF16>());
    };
    if (!kTuned) table_finish();  // the latency-tuned copy: after the sum of squares (below)

    // The block's next rows, into L2 while this one is worked on, once this row's loads (and the
    // first row's weight) are on their way (not with a residual: measured 30% slower at
    // 16384 x 8192, 331 against 255 us).
    if (c.res.data == nullptr) prefetch_rows(grp + gridDim.x);

    // 1. Residual: x + res rounded to the input dtype, written back to res; x is that sum.
    if (c.res.data != nullptr && active) {
      char* res = row_at<kFast>(c.lead, c.res, row);
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        if (s >= S) continue;
        const int32_t e = elem0(s);
        uint32_t rw[kW];
        load_vec<In::kBytes, kVec, kFast>(res, e, h, acc.in, rw);
        uint32_t sum[kW];
        if constexpr (In::kBytes == 2) {
          // Paired conversions (encode_words). Past H both operands are 0 and so is the sum.
          float v[kVec];
#pragma unroll
          for (int j = 0; j < kVec; ++j) v[j] = math::add_rn(In::get(raw[s], j), In::get(rw, j));
          encode_words<kIn, kVec>(v, sum);
        } else {
#pragma unroll
          for (int i = 0; i < kW; ++i) sum[i] = 0;
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const uint32_t b = kFast || e + j < h ? In::encode(math::add_rn(In::get(raw[s], j), In::get(rw, j))) : 0u;
            sum[j / InVec::kPerWord] |= b << (8 * In::kBytes * (j % InVec::kPerWord));
          }
        }
        store_vec<In::kBytes, kVec, kFast>(res, e, h, acc.in, sum);
#pragma unroll
        for (int i = 0; i < kW; ++i) raw[s][i] = sum[i];
      }
    }


    char* out = active ? row_at<kFast>(c.lead, c.out, row) : nullptr;
    char* scale_base = !active || is_static ? nullptr
                       : c.packed                              ? out + h
                                                               : row_at<kFast>(c.lead, c.scales, row);

    // 2. Sum of squares in the canonical order, inv_rms. Elements past H are 0 and add nothing.
    float inv = 1.0f;
    if (norm) {
      const float eps = c.eps;
      inv = row_reduce_finish<kWarp, kInvOnceHere, kLocalHere>(
          thread_sum_squares<In, kSteps, kVec>(raw, kSteps), t, T, rib, red_sum[parity],
          [](float a, float b) { return math::add_rn(a, b); },
          [len, eps, inv_len](float ss) { return math::inv_rms_rcp(ss, len, inv_len, eps); },
          inv_of_row[parity]);
    }
    if (kTuned) table_finish();

    // 3. y = (x * inv) * g of step s; 0 past H (and in steps past the row). Kernels of up to 32
    // elements a thread keep y in registers; those of more compute it again where it is used.
    // kNorm: normalization (IntConstant<1>), none (<0>) or the call's (<2>, decided here).
    // kWt: the weight from the converted table (IntConstant<0>), or from its slots' words as
    // copied (<1>, <2>, <3>: f32, bf16, f16 weights; kRawGamma).
    auto make_y = [&](int s, float v[kVec], auto norm_c, auto wt_c) {
      constexpr int kNorm = decltype(norm_c)::value;
      constexpr int kWt = decltype(wt_c)::value;
      if (s >= S) {  // uniform: a step past the row
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[j] = 0.0f;
        return;
      }
      const int32_t e = elem0(s);
      if (kNorm == 1 || (kNorm == 2 && norm)) {
        float g[kVec];
        if ((kGammaSmem || gamma_smem) && kWt != 0) {
          constexpr DType kD = kWt == 1 ? DType::kF32 : kWt == 2 ? DType::kBF16 : DType::kF16;
          using W = InTraits<kD>;
          constexpr int kWords = kVec * W::kBytes / 4;
          uint32_t w[kWords];
          read_slot_words<kWords>(gamma_mine + s * (kVec / 4) * blockDim.x, blockDim.x, w);
#pragma unroll
          for (int j = 0; j < kVec; ++j) g[j] = math::add_rn(W::get(w, j), c.weight_offset);
        } else if (kGammaSmem || gamma_smem) {
#pragma unroll
          for (int q = 0; q < kVec / 4; ++q) {
#if FN_CUDA_ARCH > 0
            const float4 f = kGammaAsm ? gpu_load_shared16(gamma_sh + uint32_t(s * (kVec / 4) + q) * blockDim.x * 16u)
                                       : gamma_mine[(s * (kVec / 4) + q) * blockDim.x];
#else
            const float4 f = gamma_mine[(s * (kVec / 4) + q) * blockDim.x];
#endif
            g[4 * q] = f.x; g[4 * q + 1] = f.y; g[4 * q + 2] = f.z; g[4 * q + 3] = f.w;
          }
        } else {
          load_gamma<kVec, kFast>(c, e, h, acc.w, g);
        }
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[j] = math::norm_apply(In::get(raw[s], j), inv, g[j]);
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[j] = In::get(raw[s], j);
      }
      if (!kFast && e + kVec > h) {
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          if (e + j >= h) v[j] = 0.0f;
      }
    };
    constexpr bool kKeepY = kVec * kSteps <= kElemsPerThread;
    float y_kept[kKeepY ? kSteps : 1][kVec];
    if (kKeepY) {  // one test of `norm` for the row, not one a step
      auto make_all = [&](auto norm_c, auto wt_c) {
#pragma unroll
        for (int s = 0; s < kSteps; ++s) make_y(s, y_kept[kKeepY ? s : 0], norm_c, wt_c);
      };
      if (!norm) make_all(IntConstant<0>(), IntConstant<0>());
      else if (!kRawGamma) make_all(IntConstant<1>(), IntConstant<0>());
      else if (c.w_type == DType::kBF16) make_all(IntConstant<1>(), IntConstant<2>());
      else if (c.w_type == DType::kF32) make_all(IntConstant<1>(), IntConstant<1>());
      else make_all(IntConstant<1>(), IntConstant<3>());
    }
    auto y_of = [&](int s, float v[kVec]) {
      if (kKeepY) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[j] = y_kept[kKeepY ? s : 0][j];
      } else {
        make_y(s, v, IntConstant<2>(), IntConstant<0>());  // (kRawGamma needs kKeepY)
      }
    };
    // max |y| of step s as bits: see AbsMax.
    auto unit_max = [&](int s, AbsMax m) {
      float v[kVec];
      y_of(s, v);
#pragma unroll
      for (int j = 0; j < kVec; ++j) m.add(v[j]);
      return m;
    };
    // 5. Encode and store a step's kVec codes (the clamp only where the caller set a qmax).
    // kClamp: clamp (IntConstant<1>), not (<0>), or as the call says (<2>, tested here).
    // kEnc: how f8e4m3fnuz on sm_89+ is fixed up (other formats: one way): <0> as the plan
    // expects (group scales from halves with a fallback, else encode_pre's rare test), <1> no
    // saturation fix (the caller proved that no value of the step needs one: the per-row
    // vote below), <2> both fixes on every code.
    auto encode_store = [&](int s, const PreMult& r, auto clamp_c, auto enc_c) {
      constexpr int kClamp = decltype(clamp_c)::value;
      constexpr int kEnc = decltype(enc_c)::value;
      if (!active || s >= S) return;
      float q[kVec];
      y_of(s, q);
      const bool clamped = kClamp == 1 || (kClamp == 2 && clamp);
      uint32_t codes[kVec / 4];
      bool done = false;
#if FN_CUDA_ARCH >= 890
      if constexpr (kOut == DType::k_f8e4m3fnuz && kPlan == Plan::kGroup && kEnc == 0) {
        // Group scales: from halves; a step it refuses (a code below 2^-5 or saturating: few)
        // takes encode_pre below.
        done = __builtin_expect(fnuz_group_codes<kVec>(q, r.r, clamped, c.qclamp, codes), 1);
      }
      if constexpr (kOut == DType::k_f8e4m3fnuz && kEnc == 1) {
        fnuz_unsaturated_step<kVec>(q, r.rp, clamped, c.qclamp, codes);  // the caller's vote: r.pre
        done = true;
      }
#endif
      if (!done) {
        // q = y * r times the encoders' prescale (encode.cuh Prescale, pre_mult: one multiply by
        // r * kFactor where that is exact); a clamp bound scaled alike (exact: qclamp <= the
        // format's largest value).
        apply_mult<kOut, kVec>(r, q);
        if (clamped) {
          const float qc = math::mul_rn(c.qclamp, Prescale<kOut>::kFactor);
#pragma unroll
          for (int j = 0; j < kVec; ++j) q[j] = math::clamp_sym(q[j], qc);
        }
        encode_pre<kOut, kVec, kPlan != Plan::kGroup && kEnc == 0>(q, codes);
      }
      store_vec<1, kVec, kFast>(out, elem0(s), h, acc.out, codes);
    };

    // Steps s0 .. s0 + n - 1, step s with multiplier r_of(s): one test of the clamp and of
    // `active` for them all (the general kernel, whose units may be several a row, tests the
    // clamp per step: its loop over units stays small enough to unroll). enc_c: encode_store's.
    auto encode_steps = [&](int s0, int n, auto r_of, auto enc_c) {
      if (!active) return;
      if constexpr (!kFast) {
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + n) encode_store(s, r_of(s), IntConstant<2>(), enc_c);
      } else if (clamp) {
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + n) encode_store(s, r_of(s), IntConstant<1>(), enc_c);
      } else {
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + n) encode_store(s, r_of(s), IntConstant<0>(), enc_c);
      }
    };

    // 4. Scales and codes: a unit is the tensor (static), a group within a step, or whole steps
    // (the row, or a group of G / P steps).
    if (is_static) {
      encode_steps(0, kSteps, [&](int) { return static_r; }, IntConstant<0>());
    } else if (step_groups) {
      // Groups inside a step: G / kVec adjacent lanes share one (every count below is a power of
      // two). The body is compiled per lane count, so its shuffles and shifts are constants.
      constexpr int kStepsPow2 = kSteps <= 4 ? 4 : 8;  // kSteps rounded up to a power of two
      auto groups_in_steps = [&](auto lanes_c) {
        constexpr int kLanes = decltype(lanes_c)::value, kLgLanes = ilog2(kLanes);
        const int lg = kLgLanes + ilog2(kVec);  // log2 G
        const int lane = threadIdx.x & (kWarp - 1);
        // The maxima of all the warp's groups of all steps in one transposed butterfly: a lane
        // starts with its N = kSteps rounded up to a power of two step maxima (0 past kSteps); at
        // level k it keeps the half of its values selected by lane bit k and swaps the other half
        // with lane ^ 2^k, so after log2 N levels it holds one value, of step
        // s = bitrev(lane mod N) (N - 1 shuffles instead of kSteps per level); the levels from
        // log2 N to log2 kLanes are plain. Lane (q << kLgLanes) | bitrev(s) then holds the
        // maximum of group q of step s (N <= kLanes: step_groups_fit), evaluates the scale
        // formula (two correctly rounded divisions) once for it, and shuffles carry the
        // multipliers back.
        constexpr int kN = kStepsPow2, kLgN = ilog2(kN);
        auto bitrev = [](int v) {
          int r = 0;
#pragma unroll
          for (int k = 0; k < kLgN; ++k) r |= ((v >> k) & 1) << (kLgN - 1 - k);
          return r;
        };
        uint32_t m[kN];
#pragma unroll
        for (int s = 0; s < kN; ++s) m[s] = s < kSteps ? unit_max(s, AbsMax()).bits() : 0u;
#pragma unroll
        for (int k = 0; k < kLgN; ++k) {
          const int half = kN >> (k + 1);
          const bool upper = (lane >> k) & 1;
#pragma unroll
          for (int i = 0; i < half; ++i) {
            const uint32_t keep = upper ? m[half + i] : m[i], give = upper ? m[i] : m[half + i];
            const uint32_t o = FN_SHFL_XOR(give, 1 << k, kWarp);
            m[i] = o > keep ? o : keep;
          }
        }
#pragma unroll
        for (int k = kLgN; k < kLgLanes; ++k) {
          const uint32_t o = FN_SHFL_XOR(m[0], 1 << k, kWarp);
          m[0] = o > m[0] ? o : m[0];
        }
        const math::DynamicScale ds = math::dynamic_scale(m[0], c.qmax, c.scale_ub, c.min_scale, c.scale_type);
        if (kFast) {
          // One lane of a group's holders stores its scale (a fast kernel's warp lies in one
          // row: fast_plan), one store a lane instead of one a step.
          const int s = bitrev(lane & (kN - 1)), q = lane >> kLgLanes;
          const int32_t e = s * P + kVec * ((t & ~(kWarp - 1)) + (q << kLgLanes));
          if (active && s < kSteps && (lane & (kLanes - 1) & ~(kN - 1)) == 0) store_scale(c, scale_base, e >> lg, ds.stored);
        }
        PreMult r[kSteps];  // this thread's group's multiplier in each step
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          const int src = (lane & ~(kLanes - 1)) | bitrev(s);
          r[s] = pre_mult<kOut>(FN_SHFL(ds.r, src, kWarp));
          if (!kFast) {
            const uint32_t stored = FN_SHFL(ds.stored, src, kWarp);
            const int32_t e = elem0(s);
            if (active && s < S && e < h && (t & (kLanes - 1)) == 0) store_scale(c, scale_base, e >> lg, stored);
          }
        }
        encode_steps(0, kSteps, [&](int s) { return r[s]; }, IntConstant<0>());
      };
      // G / kVec lanes: a power of two from kSteps (step_groups_fit) to 128 / kVec.
      constexpr int kMinLanes = kStepsPow2, kMaxLanes = 128 / kVec < kWarp ? 128 / kVec : kWarp;
      with_lanes<kMinLanes, kMaxLanes>(g >> ilog2(kVec), groups_in_steps);
    } else {
      // Steps a unit: the row, or G / P (a power of two) steps of it.
      const int per = kFast || g >= h ? kSteps : g >> (__ffs(P) - 1);
      uint32_t* red = red_max[parity];
      // Unrolled in the fast kernels (one unit, s0 = 0); a loop in the general kernel, whose
      // body (a reduction, the scale formula, the encoding) is too large to repeat kSteps times.
      constexpr int kUnitUnroll = kFast ? kSteps : 1;
#pragma unroll kUnitUnroll
      for (int s0 = 0; s0 < kSteps; s0 += 1) {
        if (per == kSteps ? s0 != 0 : (s0 & (per - 1)) != 0) continue;
        AbsMax am;
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + per) am = unit_max(s, am);
        if (per != kSteps) __syncthreads();  // several units a row: `red` is reused at once
        const float qmax = c.qmax, scale_ub = c.scale_ub, min_scale = c.min_scale;
        const math::ScaleType scale_type = c.scale_type;
        const math::DynamicScale ds = row_reduce_finish<kWarp, kScaleOnce, kLocalHere>(
            am.bits(), t, T, rib, red, MaxU32(),
            [=](uint32_t m) { return math::dynamic_scale(m, qmax, scale_ub, min_scale, scale_type); },
            scale_of_row[parity]);
        if (active && t == 0 && s0 * P < h)
          store_scale(c, scale_base, kFast || g >= h ? 0 : (s0 * P) >> (__ffs(g) - 1), ds.stored);
        const PreMult m = pre_mult<kOut>(ds.r);
        auto r_of = [&](int) { return m; };
#if FN_CUDA_ARCH >= 890
        if constexpr (kOut == DType::k_f8e4m3fnuz) {
          // One vote a warp and unit instead of a test and branch a step: where no lane's largest
          // |y| reaches |y * 2r| > 464 (rounded: then none of its values does) the saturation fix
          // is left out, else every code gets both fixes (the warps holding values above about
          // 0.967 of the row's maximum: one or two of a row's warps on Gaussian data). A NaN
          // maximum or an inexact 2r fails the test. Every lane of the warp is here (the
          // loop over units and the reduction before are uniform).
          const bool fits = m.pre && math::mul_rn(math::float_of(am.bits()), fabsf(m.rp)) <= 464.0f;
          if (__all_sync(0xFFFFFFFFu, fits)) encode_steps(s0, per, r_of, IntConstant<1>());
          else encode_steps(s0, per, r_of, IntConstant<2>());
        } else
#endif
        {
          encode_steps(s0, per, r_of, IntConstant<0>());
        }
      }
    }
  };
  auto all_groups = [&] {
    int parity = 0;
    for (int64_t grp = blockIdx.x; grp < groups; grp += gridDim.x, parity ^= 1) row_group(grp, parity, IntConstant<2>());
  };
  if constexpr (kGpuIsHip) {
    // HIP: no latency-tuned copy (never measured on AMD hardware, and it doubled clang's compile
    // time of the kernels, which CI pays on 2 cores).
    all_groups();
  } else if (kFast && gridDim.x >= groups) {
    // One row group a block (short calls: decode): the latency-tuned copy.
    if (blockIdx.x < groups) row_group(blockIdx.x, 0, IntConstant<1>());
  } else {
    all_groups();
  }
}

}  // namespace gpu
}  // namespace fusednorm
