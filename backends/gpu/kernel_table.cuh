// Compiled twice: as CUDA and as HIP. The rmsnorm_quant kernel table: which instantiation of
// rmsnorm_quant_kernel serves an input dtype, output format, row shape and plan
// (rmsnorm_quant_kernel_fast / _pick / _for), and the macro that instantiates one input dtype's
// kernels (one translation unit per input dtype: backends/cuda/rmsnorm_quant_*.cu,
// backends/hip/rmsnorm_quant_*.hip; plugin.cuh declares those instantiations extern).
#pragma once

#include <stdint.h>

#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/plan.h"
#include "backends/gpu/rmsnorm_quant_kernel.cuh"
#include "backends/gpu/tuning.h"
#include "core/call.h"

namespace fusednorm {
namespace gpu {

using KernelFn = void (*)(const RmsnormQuantCall, const RowShape, const Accesses, const int32_t);

// The fast kernels of one plan, by the row's exact step count (fast_steps(shape) must hold; the
// shape's vectors are fast_vec's, or decode_vec's for short calls).
template <DType kIn, DType kOut, Plan kPlan>
KernelFn rmsnorm_quant_kernel_fast(const RowShape& shape) {
  constexpr int kWarp = kGpuWarp;
  if constexpr (!kGpuIsHip && kIn != DType::kF32 && (kPlan == Plan::kRow || kPlan == Plan::kGroup))
    if (shape.vec != fast_vec(kIn, shape.steps))  // decode_vec's
      return shape.vec == 4 && shape.steps == kDecodeVec4Steps
                 ? &rmsnorm_quant_kernel<kIn, kOut, kWarp, 4, kDecodeVec4Steps, kPlan>
                 : nullptr;
  switch (shape.steps) {
    case 4: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 4), 4, kPlan>;
    case 5: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 5), 5, kPlan>;
    case 6: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 6), 6, kPlan>;
    case 7: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 7), 7, kPlan>;
    case 8: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 8), 8, kPlan>;
    default: return nullptr;
  }
}

// The kernel for a format pair, shape and plan: the general kernel (8- or 4-element vectors) for
// kAll, else the plan's fast kernel (fast_format's formats only: fast_plan gives the others kAll).
// rmsnorm_quant writes integer and 8-bit float codes only (FP4 is rmsnorm_fp4's), so no kernel is
// made for f4e2m1.
template <DType kIn, DType kOut>
KernelFn rmsnorm_quant_kernel_pick(const RowShape& shape, Plan plan) {
  constexpr int kWarp = kGpuWarp;
  if constexpr (kOut == DType::k_f4e2m1) {
    return nullptr;
  } else {
    if constexpr (fast_format(kOut)) {
      switch (plan) {
        case Plan::kStatic: return rmsnorm_quant_kernel_fast<kIn, kOut, Plan::kStatic>(shape);
        case Plan::kRow: return rmsnorm_quant_kernel_fast<kIn, kOut, Plan::kRow>(shape);
        case Plan::kGroup: return rmsnorm_quant_kernel_fast<kIn, kOut, Plan::kGroup>(shape);
        default: break;
      }
    }
    if (plan != Plan::kAll) return nullptr;
    return shape.vec == 8 ? &rmsnorm_quant_kernel<kIn, kOut, kWarp, 8, kElemsPerThread / 8, Plan::kAll>
                          : &rmsnorm_quant_kernel<kIn, kOut, kWarp, 4, kElemsPerThread / 4, Plan::kAll>;
  }
}

// The kernel for an input dtype, output format, shape and plan (one translation unit per input
// dtype, so the instantiations compile in parallel; see backends/cuda/).
template <DType kIn>
KernelFn rmsnorm_quant_kernel_for(DType out, const RowShape& shape, Plan plan) {
  switch (out) {
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return rmsnorm_quant_kernel_pick<kIn, DType::k_##name>(shape, plan);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kI8: return rmsnorm_quant_kernel_pick<kIn, DType::kI8>(shape, plan);
    default: return nullptr;
  }
}

#define FN_INSTANTIATE_RMSNORM_QUANT(kIn) template KernelFn rmsnorm_quant_kernel_for<kIn>(DType, const RowShape&, Plan);

}  // namespace gpu
}  // namespace fusednorm
