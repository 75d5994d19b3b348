// Compiled twice: as CUDA and as HIP (through qk_rmsnorm.cuh). The pieces of qk_rmsnorm's kernels
// that the group kernel (qk_rmsnorm.cuh) and the short-call kernels (qk_rmsnorm_short.cuh) share:
// a side's mapping, the reduction's finish, a thread's squares, the weights, the apply of one
// vector and the FP8 outputs' multiplier.
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
// rcp: 1 / the side's divisor where that is an exact power of two (math::pow2_rcp), else 0: ss * rcp
// is then ss / divisor correctly rounded (subnormal results included), a multiplication instead of
// a division on the chain every thread of the group waits for.
struct QkFinish {
  const QkRmsnormCall* c;
  const QkSide* s;
  bool stats;
  float rcp;
  __device__ __forceinline__ float operator()(float ss) const {
    return stats ? ss : qk_inv_rms(*c, *s, ss, rcp);
  }
};

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

}  // namespace gpu
}  // namespace fusednorm
