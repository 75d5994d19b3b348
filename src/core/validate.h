// Argument validation: turns the public API's DLTensors and option structs into a checked
// backend-neutral call (core/call.h), or a status with a message naming the argument and values.
// Shared by libfusednorm.so and the scalar reference, so both accept exactly the same calls.
#pragma once

#include "core/call.h"
#include "fusednorm/fusednorm.h"

namespace fusednorm {

// Device of a validated call.
struct CallDevice {
  int32_t type = kDLCPU;
  int32_t id = 0;
};

fusednorm_status validate_cast(const DLTensor* src, const DLTensor* dst,
                               const fusednorm_cast_options* options, CastCall* call,
                               CallDevice* device);

fusednorm_status validate_rmsnorm_quant(const DLTensor* input, const DLTensor* residual,
                                        const DLTensor* weight, const DLTensor* output,
                                        const DLTensor* scales,
                                        const fusednorm_rmsnorm_quant_options* options,
                                        RmsnormQuantCall* call, CallDevice* device);

fusednorm_status validate_rmsnorm_fp4(const DLTensor* input, const DLTensor* residual, const DLTensor* weight,
                                      const DLTensor* output, const DLTensor* scales,
                                      const DLTensor* global_scale, const fusednorm_rmsnorm_fp4_options* options,
                                      RmsnormFp4Call* call, CallDevice* device);

fusednorm_status validate_dequantize_fp4(const DLTensor* codes, const DLTensor* scales, const DLTensor* global_scale,
                                         const DLTensor* output, const fusednorm_dequantize_fp4_options* options,
                                         DequantizeFp4Call* call, CallDevice* device);

// Largest finite value of a quantization dtype (FP8 formats, int8).
float quant_max(DType t);

// qk_rmsnorm (validate_qk_rmsnorm.cc): one validation for the three entry points; `stats` is
// NULL for the fused form, the weights and outputs NULL for stats.
fusednorm_status validate_qk_rmsnorm(QkKind kind, const DLTensor* q, const DLTensor* k, const DLTensor* stats,
                                     const DLTensor* q_weight, const DLTensor* k_weight, const DLTensor* q_out,
                                     const DLTensor* k_out, const DLTensor* out_scales,
                                     const fusednorm_qk_rmsnorm_options* options, QkRmsnormCall* call,
                                     CallDevice* device);

}  // namespace fusednorm

// ---------------------------------------------------------------- mla_rope_rmsnorm_quant
#include "core/call_mla.h"

namespace fusednorm {

// Validates the call (src/core/validate_mla.cc); on CPU tensors also every index value
// (fusednorm.h, "Index values").
fusednorm_status validate_mla_rope_rmsnorm_quant(
    const DLTensor* q, const DLTensor* q_out, const DLTensor* kv, const DLTensor* weight,
    const DLTensor* cos_sin, const DLTensor* positions, const DLTensor* row_offsets, const DLTensor* cache_len,
    const DLTensor* page_table, const DLTensor* kv_cache, const DLTensor* k_scale, const DLTensor* invalid_tokens,
    const fusednorm_mla_rope_rmsnorm_quant_options* options, MlaCall* call, CallDevice* device);

}  // namespace fusednorm
