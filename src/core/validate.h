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

// Largest finite value of a quantization dtype (FP8 formats, int8).
float quant_max(DType t);

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
