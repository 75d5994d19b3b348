// Compiled twice: as CUDA and as HIP (through mla_rope_rmsnorm_quant.cuh). The pieces both
// mla_rope_rmsnorm_quant kernels use (the general one in mla_rope_rmsnorm_quant.cuh, the fast one in
// mla_fast.cuh): the cos/sin table's reads and the division by the cache's k_scale.
#pragma once

#include <stdint.h>

#include "backends/gpu/io.cuh"
#include "core/call_mla.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// The 8 cos/sin values of q unit u (elements 8u .. 8u+7) from a token's table row cs (f32 or
// bf16), read with `access` (kFast: whole vectors, the fast kernel's aligned rows).
template <bool kFast = false>
__device__ __forceinline__ void mla_load_tab(const MlaCall& c, int32_t access, const char* cs, int32_t u, float tab[8]) {
  if (c.cs_type == DType::kF32) {
    uint32_t w[8];
    load_vec<4, 8, kFast>(cs, 8 * u, int32_t(c.rope), access, w);
#pragma unroll
    for (int k = 0; k < 8; ++k) tab[k] = math::float_of(w[k]);
  } else {
    uint32_t w[4];
    load_vec<2, 8, kFast>(cs, 8 * u, int32_t(c.rope), access, w);
#pragma unroll
    for (int k = 0; k < 8; ++k) tab[k] = InTraits<DType::kBF16>::get(w, k);
  }
}

// v[k] / k_scale; v itself without a scale (v / 1 is v, and the encoders write one NaN for every
// NaN).
template <int kN>
__device__ __forceinline__ void mla_scale_n(float v[kN], float ks) {
  if (ks == 1.0f) return;
#pragma unroll
  for (int k = 0; k < kN; ++k) v[k] = math::div_rn(v[k], ks);
}

}  // namespace gpu
}  // namespace fusednorm
