// The CPU backend: Highway SIMD row kernels spread over rows by oneTBB in the caller's arena.
// Calls arrive validated (core/validate.h).
#pragma once

#include "core/call.h"
#include "core/call_mla.h"

namespace fusednorm {

void cpu_cast(const CastCall& call);
// rmsnorm_quant.cc, compiled once per input dtype (CMakeLists.txt): each unit's rows; the function
// table's entry picks by call.in_type.
void cpu_rmsnorm_quant_f32(const RmsnormQuantCall& call);
void cpu_rmsnorm_quant_f16(const RmsnormQuantCall& call);
void cpu_rmsnorm_quant_bf16(const RmsnormQuantCall& call);
void cpu_rmsnorm_fp4(const RmsnormFp4Call& call);
void cpu_dequantize_fp4(const DequantizeFp4Call& call);
void cpu_qk_rmsnorm(const QkRmsnormCall& call);  // stats, apply and fused (call.kind)
void cpu_mla_rope_rmsnorm_quant(const MlaCall& call);  // mla_rope_rmsnorm_quant.cc

}  // namespace fusednorm
