// The versioned C function table between libfusednorm.so and every backend: the CPU backend,
// linked into libfusednorm.so (fusednorm_plugin_entry_cpu), and the GPU plugins
// (libfusednorm_cuda.so, libfusednorm_hip.so), each exporting one function
// fusednorm_plugin_entry_<name> that returns its table; the core loads a GPU plugin lazily on the
// first call for that device type (src/plugins.cc). src/api.cc reaches every backend only
// through this table. Calls cross this boundary already validated, as the
// plain structs of core/call.h, so the table records their sizes and the core refuses a plugin
// built against other definitions.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/call.h"
#include "core/call_mla.h"
#include "fusednorm/fusednorm.h"

// Bump on any change to this table or to the structs of core/call.h.
#define FUSEDNORM_PLUGIN_ABI_VERSION 3u

extern "C" {

typedef struct fusednorm_plugin {
  uint32_t abi_version;        // FUSEDNORM_PLUGIN_ABI_VERSION of the plugin's build
  uint32_t struct_size;        // sizeof(fusednorm_plugin)
  uint32_t cast_call_size;     // sizeof(fusednorm::CastCall)
  uint32_t rmsnorm_call_size;  // sizeof(fusednorm::RmsnormQuantCall)
  const char* name;            // "cpu", "cuda", "hip"
  int32_t device_type;         // kDLCPU, kDLCUDA, kDLROCM
  // Starts the vendor runtime. SUCCESS, or BACKEND_UNAVAILABLE with the vendor's text in msg
  // (no driver, no device). Called once.
  fusednorm_status (*init)(char* msg, size_t msg_size);
  int32_t (*device_count)(void);
  // One-line description of device `id` (name, SMs, memory) into msg.
  void (*describe)(int32_t id, char* msg, size_t msg_size);
  // Enqueue on `stream` (cudaStream_t / hipStream_t; NULL = default stream). No allocation, no
  // synchronization. Errors: DEVICE_ERROR or UNSUPPORTED with text in msg.
  fusednorm_status (*cast)(const fusednorm::CastCall* call, int32_t device_id, void* stream, char* msg,
                           size_t msg_size);
  fusednorm_status (*rmsnorm_quant)(const fusednorm::RmsnormQuantCall* call, int32_t device_id, void* stream,
                                    char* msg, size_t msg_size);
  // Test hook: proves on device `device_id` that the kernels' encoders (hardware conversions
  // included) equal the shared math for all 2^32 f32 inputs, for every output format.
  // SUCCESS, or INTERNAL_ERROR naming the format, the mismatch count and the first input.
  fusednorm_status (*verify_encoders)(int32_t device_id, char* msg, size_t msg_size);
  // The instruction-set target the backend runs now (CPU: Highway's pick, e.g. "AVX3"); NULL
  // where the backend has no such choice.
  const char* (*target)(void);
  // rmsnorm_fp4 and its inverse (NULL: not offered, UNSUPPORTED).
  fusednorm_status (*rmsnorm_fp4)(const fusednorm::RmsnormFp4Call* call, int32_t device_id, void* stream, char* msg,
                                  size_t msg_size);
  fusednorm_status (*dequantize_fp4)(const fusednorm::DequantizeFp4Call* call, int32_t device_id, void* stream,
                                     char* msg, size_t msg_size);
  // ---- qk_rmsnorm (ABI 3): sizeof(fusednorm::QkRmsnormCall), and its one entry for stats, apply
  // and the fused form (call->kind); NULL where the backend lacks it (UNSUPPORTED).
  uint32_t qk_call_size;
  fusednorm_status (*qk_rmsnorm)(const fusednorm::QkRmsnormCall* call, int32_t device_id, void* stream, char* msg,
                                 size_t msg_size);
  // ---- mla_rope_rmsnorm_quant (ABI 3)
  uint32_t mla_call_size;  // sizeof(fusednorm::MlaCall)
  fusednorm_status (*mla_rope_rmsnorm_quant)(const fusednorm::MlaCall* call, int32_t device_id, void* stream,
                                             char* msg, size_t msg_size);
} fusednorm_plugin;

typedef const fusednorm_plugin* (*fusednorm_plugin_entry_fn)(void);

// The CPU backend's table (backends/cpu/plugin_cpu.cc, linked into libfusednorm.so).
const fusednorm_plugin* fusednorm_plugin_entry_cpu(void);

}  // extern "C"
