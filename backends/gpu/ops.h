// The launchers of the operations that have a unit of their own (backends/gpu/<op>.cuh, listed in
// FUSEDNORM_GPU_OPS of cmake/FusednormGpuPlugin.cmake), for plugin.cuh's table. Each has the
// table's signature (core/plugin_abi.h): the call arrives validated; enqueue on `stream`, no
// allocation, no synchronization; DEVICE_ERROR or UNSUPPORTED with text in msg.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/call.h"
#include "core/call_mla.h"
#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace gpu {

// backends/gpu/rmsnorm_fp4.cuh
fusednorm_status plugin_rmsnorm_fp4(const RmsnormFp4Call* call, int32_t device, void* stream, char* msg, size_t n);
fusednorm_status plugin_dequantize_fp4(const DequantizeFp4Call* call, int32_t device, void* stream, char* msg,
                                       size_t n);
// qk_rmsnorm (backends/gpu/qk_rmsnorm.cuh): stats, apply and the fused form (call->kind).
fusednorm_status plugin_qk_rmsnorm(const QkRmsnormCall* call, int32_t device, void* stream, char* msg, size_t n);
// backends/gpu/mla_rope_rmsnorm_quant.cuh
fusednorm_status mla_rope_rmsnorm_quant(const MlaCall* call, int32_t device, void* stream, char* msg, size_t n);

}  // namespace gpu
}  // namespace fusednorm
