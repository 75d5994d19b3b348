// The C entry points: validate, pick the backend from the tensors' device (every backend, the CPU
// included, through its function table: core/plugin_abi.h), run, and turn every C++ exception
// into a status (nothing crosses the C boundary but a status and a message).
#include <stdio.h>
#include <string.h>

#include <new>

#include "core/error.h"
#include "core/validate.h"
#include "plugins.h"
#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace {

template <class F>
fusednorm_status guarded(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(FUSEDNORM_INTERNAL_ERROR, "out of host memory");
  } catch (const std::exception& e) {
    return fail(FUSEDNORM_INTERNAL_ERROR, "unexpected exception: %s", e.what());
  } catch (...) {
    return fail(FUSEDNORM_INTERNAL_ERROR, "unexpected exception");
  }
}

const char* device_label(int32_t type) { return type == kDLCPU ? "cpu" : type == kDLCUDA ? "cuda" : "rocm"; }

// The backend of a device (the CPU's is linked in, a GPU's loaded on first use); null (with the
// error set) if unavailable.
const fusednorm_plugin* backend_for(const CallDevice& dev, fusednorm_status* st) {
  const PluginState& p = plugin_for(dev.type);
  if (p.table == nullptr) {
    *st = fail(FUSEDNORM_BACKEND_UNAVAILABLE, "device %s:%d: %s", device_label(dev.type), dev.id, p.error.c_str());
    return nullptr;
  }
  const int32_t count = p.table->device_count();
  if (dev.type != kDLCPU && dev.id >= count) {  // the CPU is one device whatever its id says
    *st = fail(FUSEDNORM_BACKEND_UNAVAILABLE, "device %s:%d: the %s backend sees %d device(s)", device_label(dev.type),
               dev.id, p.table->name, count);
    return nullptr;
  }
  return p.table;
}

// Runs a validated call on the device's backend.
template <class Call, class Fn>
fusednorm_status run(const CallDevice& dev, const Call& call, void* stream, Fn fusednorm_plugin::*entry) {
  fusednorm_status st = FUSEDNORM_SUCCESS;
  const fusednorm_plugin* backend = backend_for(dev, &st);
  if (backend == nullptr) return st;
  if (backend->*entry == nullptr)
    return fail(FUSEDNORM_UNSUPPORTED, "the %s backend does not implement this operation", backend->name);
  char msg[1024] = "";
  st = (backend->*entry)(&call, dev.id, stream, msg, sizeof msg);
  return st == FUSEDNORM_SUCCESS ? st : fail(st, "device %s:%d: %s", device_label(dev.type), dev.id, msg);
}

}  // namespace
}  // namespace fusednorm

using namespace fusednorm;

extern "C" {

const char* fusednorm_last_error(void) { return last_error(); }

const char* fusednorm_status_string(fusednorm_status status) {
  // A C caller may pass any int: compare the integer it stored (loading a value outside the
  // enum's range as the C++ enum is undefined).
  int32_t value;
  static_assert(sizeof status == sizeof value, "fusednorm_status is 32-bit");
  memcpy(&value, &status, sizeof value);
  switch (value) {
    case FUSEDNORM_SUCCESS: return "SUCCESS";
    case FUSEDNORM_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case FUSEDNORM_UNSUPPORTED: return "UNSUPPORTED";
    case FUSEDNORM_BACKEND_UNAVAILABLE: return "BACKEND_UNAVAILABLE";
    case FUSEDNORM_DEVICE_ERROR: return "DEVICE_ERROR";
    case FUSEDNORM_INTERNAL_ERROR: return "INTERNAL_ERROR";
  }
  return "UNKNOWN_STATUS";
}

#define FN_STR2(x) #x
#define FN_STR(x) FN_STR2(x)
const char* fusednorm_version(int* major, int* minor, int* patch) {
  if (major) *major = FUSEDNORM_VERSION_MAJOR;
  if (minor) *minor = FUSEDNORM_VERSION_MINOR;
  if (patch) *patch = FUSEDNORM_VERSION_PATCH;
  return FN_STR(FUSEDNORM_VERSION_MAJOR) "." FN_STR(FUSEDNORM_VERSION_MINOR) "." FN_STR(FUSEDNORM_VERSION_PATCH);
}

const char* fusednorm_cpu_target(void) {
  const fusednorm_plugin* cpu = plugin_for(kDLCPU).table;
  return cpu != nullptr && cpu->target != nullptr ? cpu->target() : "unknown";
}

fusednorm_status fusednorm_query_backend(int32_t device_type, fusednorm_backend_info* info) {
  if (info == nullptr) return fail(FUSEDNORM_INVALID_ARGUMENT, "info is NULL");
  if (info->struct_size < sizeof(fusednorm_backend_info))
    return fail(FUSEDNORM_INVALID_ARGUMENT, "info->struct_size = %zu: expected %zu", info->struct_size,
                sizeof(fusednorm_backend_info));
  if (device_type != kDLCPU && device_type != kDLCUDA && device_type != kDLROCM)
    return fail(FUSEDNORM_INVALID_ARGUMENT, "device_type = %d: must be kDLCPU (1), kDLCUDA (2) or kDLROCM (10)",
                device_type);
  return guarded([&] {
    const size_t size = info->struct_size;
    memset(info, 0, sizeof *info);
    info->struct_size = size;
    info->device_type = device_type;
    snprintf(info->name, sizeof info->name, "%s", device_type == kDLCPU ? "cpu" : device_type == kDLCUDA ? "cuda" : "hip");
    const PluginState& p = plugin_for(device_type);
    if (p.table == nullptr) {
      snprintf(info->detail, sizeof info->detail, "%s", p.error.c_str());
    } else {
      info->device_count = p.table->device_count();
      info->available = info->device_count > 0;
      if (info->available) p.table->describe(0, info->detail, sizeof info->detail);
      else snprintf(info->detail, sizeof info->detail, "the %s backend sees no device", p.table->name);
    }
    return FUSEDNORM_SUCCESS;
  });
}

fusednorm_status fusednorm_cast(const DLTensor* src, DLTensor* dst, const fusednorm_cast_options* options,
                                void* stream) {
  return guarded([&] {
    CastCall call;
    CallDevice dev;
    const fusednorm_status st = validate_cast(src, dst, options, &call, &dev);
    if (st != FUSEDNORM_SUCCESS) return st;
    return run(dev, call, stream, &fusednorm_plugin::cast);
  });
}

fusednorm_status fusednorm_rmsnorm_quant(const DLTensor* input, DLTensor* residual, const DLTensor* weight,
                                         DLTensor* output, DLTensor* scales,
                                         const fusednorm_rmsnorm_quant_options* options, void* stream) {
  return guarded([&] {
    RmsnormQuantCall call;
    CallDevice dev;
    const fusednorm_status st =
        validate_rmsnorm_quant(input, residual, weight, output, scales, options, &call, &dev);
    if (st != FUSEDNORM_SUCCESS) return st;
    return run(dev, call, stream, &fusednorm_plugin::rmsnorm_quant);
  });
}

fusednorm_status fusednorm_rmsnorm_fp4(const DLTensor* input, DLTensor* residual, const DLTensor* weight,
                                       DLTensor* output, DLTensor* scales, const DLTensor* global_scale,
                                       const fusednorm_rmsnorm_fp4_options* options, void* stream) {
  return guarded([&] {
    RmsnormFp4Call call;
    CallDevice dev;
    const fusednorm_status st =
        validate_rmsnorm_fp4(input, residual, weight, output, scales, global_scale, options, &call, &dev);
    if (st != FUSEDNORM_SUCCESS) return st;
    return run(dev, call, stream, &fusednorm_plugin::rmsnorm_fp4);
  });
}

fusednorm_status fusednorm_dequantize_fp4(const DLTensor* codes, const DLTensor* scales, const DLTensor* global_scale,
                                          DLTensor* output, const fusednorm_dequantize_fp4_options* options,
                                          void* stream) {
  return guarded([&] {
    DequantizeFp4Call call;
    CallDevice dev;
    const fusednorm_status st = validate_dequantize_fp4(codes, scales, global_scale, output, options, &call, &dev);
    if (st != FUSEDNORM_SUCCESS) return st;
    return run(dev, call, stream, &fusednorm_plugin::dequantize_fp4);
  });
}

fusednorm_status fusednorm_mla_rope_rmsnorm_quant(
    DLTensor* q, DLTensor* q_out, const DLTensor* kv, const DLTensor* weight, const DLTensor* cos_sin,
    const DLTensor* positions, const DLTensor* row_offsets, const DLTensor* cache_len, const DLTensor* page_table,
    DLTensor* kv_cache, const DLTensor* k_scale, DLTensor* invalid_tokens,
    const fusednorm_mla_rope_rmsnorm_quant_options* options, void* stream) {
  return guarded([&] {
    MlaCall call;
    CallDevice dev;
    const fusednorm_status st =
        validate_mla_rope_rmsnorm_quant(q, q_out, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table,
                                        kv_cache, k_scale, invalid_tokens, options, &call, &dev);
    if (st != FUSEDNORM_SUCCESS) return st;
    return run(dev, call, stream, &fusednorm_plugin::mla_rope_rmsnorm_quant);
  });
}

}  // extern "C"

// ---------------------------------------------------------------- qk_rmsnorm
namespace fusednorm {
namespace {
fusednorm_status qk_call(QkKind kind, const DLTensor* q, const DLTensor* k, const DLTensor* stats,
                         const DLTensor* q_weight, const DLTensor* k_weight, DLTensor* q_out, DLTensor* k_out,
                         const DLTensor* out_scales, const fusednorm_qk_rmsnorm_options* options, void* stream) {
  return guarded([&] {
    QkRmsnormCall call;
    CallDevice dev;
    const fusednorm_status st =
        validate_qk_rmsnorm(kind, q, k, stats, q_weight, k_weight, q_out, k_out, out_scales, options, &call, &dev);
    if (st != FUSEDNORM_SUCCESS) return st;
    return run(dev, call, stream, &fusednorm_plugin::qk_rmsnorm);
  });
}
}  // namespace
}  // namespace fusednorm

extern "C" {

fusednorm_status fusednorm_qk_rmsnorm_stats(const DLTensor* q, const DLTensor* k, DLTensor* stats,
                                            const fusednorm_qk_rmsnorm_options* options, void* stream) {
  return qk_call(QkKind::kStats, q, k, stats, nullptr, nullptr, nullptr, nullptr, nullptr, options, stream);
}

fusednorm_status fusednorm_qk_rmsnorm_apply(const DLTensor* q, const DLTensor* k, const DLTensor* stats,
                                            const DLTensor* q_weight, const DLTensor* k_weight, DLTensor* q_out,
                                            DLTensor* k_out, const DLTensor* out_scales,
                                            const fusednorm_qk_rmsnorm_options* options, void* stream) {
  return qk_call(QkKind::kApply, q, k, stats, q_weight, k_weight, q_out, k_out, out_scales, options, stream);
}

fusednorm_status fusednorm_qk_rmsnorm(const DLTensor* q, const DLTensor* k, const DLTensor* q_weight,
                                      const DLTensor* k_weight, DLTensor* q_out, DLTensor* k_out,
                                      const DLTensor* out_scales, const fusednorm_qk_rmsnorm_options* options,
                                      void* stream) {
  return qk_call(QkKind::kFused, q, k, nullptr, q_weight, k_weight, q_out, k_out, out_scales, options, stream);
}
}  // extern "C"
// ---------------------------------------------------------------- end of qk_rmsnorm
