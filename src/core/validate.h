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

}  // namespace fusednorm
