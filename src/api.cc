// The C entry points: validate, pick the backend from the tensors' device, run, and turn every
// C++ exception into a status (nothing crosses the C boundary but a status and a message).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <new>
#include <thread>

#include <tbb/info.h>

#include "backends/cpu/cpu_backend.h"
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

const char* device_label(int32_t type) { return type == kDLCUDA ? "cuda" : "rocm"; }

// The plugin of a GPU device, loaded on first use; null (with the error set) if unavailable.
const fusednorm_plugin* gpu_backend(const CallDevice& dev, fusednorm_status* st) {
  const PluginState& p = plugin_for(dev.type);
  if (p.table == nullptr) {
    *st = fail(FUSEDNORM_BACKEND_UNAVAILABLE, "device %s:%d: %s", device_label(dev.type), dev.id, p.error.c_str());
    return nullptr;
  }
  const int32_t count = p.table->device_count();
  if (dev.id >= count) {
    *st = fail(FUSEDNORM_BACKEND_UNAVAILABLE, "device %s:%d: the %s backend sees %d device(s)", device_label(dev.type),
               dev.id, p.table->name, count);
    return nullptr;
  }
  return p.table;
}

// Runs a validated call on the device's backend.
template <class Call, class Fn>
fusednorm_status run_gpu(const CallDevice& dev, const Call& call, void* stream, Fn fusednorm_plugin::*entry) {
  fusednorm_status st = FUSEDNORM_SUCCESS;
  const fusednorm_plugin* plugin = gpu_backend(dev, &st);
  if (plugin == nullptr) return st;
  if (plugin->*entry == nullptr) return fail(FUSEDNORM_UNSUPPORTED, "the %s backend does not implement this operation", plugin->name);
  char msg[1024] = "";
  st = (plugin->*entry)(&call, dev.id, stream, msg, sizeof msg);
  return st == FUSEDNORM_SUCCESS ? st : fail(st, "device %s:%d: %s", device_label(dev.type), dev.id, msg);
}

}  // namespace
}  // namespace fusednorm

using namespace fusednorm;

extern "C" {

const char* fusednorm_last_error(void) { return last_error(); }

const char* fusednorm_status_string(fusednorm_status status) {
  switch (status) {
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

const char* fusednorm_cpu_target(void) { return cpu_target_name(); }

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
    if (device_type == kDLCPU) {
      info->available = 1;
      info->device_count = 1;
      snprintf(info->name, sizeof info->name, "cpu");
      snprintf(info->detail, sizeof info->detail, "Highway target %s; oneTBB, %d threads in the default arena",
               cpu_target_name(), tbb::info::default_concurrency());
    } else {
      snprintf(info->name, sizeof info->name, device_type == kDLCUDA ? "cuda" : "hip");
      const PluginState& p = plugin_for(device_type);
      if (p.table == nullptr) {
        snprintf(info->detail, sizeof info->detail, "%s", p.error.c_str());
      } else {
        info->device_count = p.table->device_count();
        info->available = info->device_count > 0;
        if (info->available) p.table->describe(0, info->detail, sizeof info->detail);
        else snprintf(info->detail, sizeof info->detail, "the %s backend sees no device", p.table->name);
      }
    }
    return FUSEDNORM_SUCCESS;
  });
}

void fusednorm_cast_options_init(fusednorm_cast_options* options) {
  if (options == nullptr) return;
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->e8m0_rounding = FUSEDNORM_E8M0_NEAREST;
}

fusednorm_status fusednorm_cast(const DLTensor* src, DLTensor* dst, const fusednorm_cast_options* options,
                                void* stream) {
  return guarded([&] {
    CastCall call;
    CallDevice dev;
    const fusednorm_status st = validate_cast(src, dst, options, &call, &dev);
    if (st != FUSEDNORM_SUCCESS) return st;
    if (dev.type != kDLCPU) return run_gpu(dev, call, stream, &fusednorm_plugin::cast);
    cpu_cast(call);
    return FUSEDNORM_SUCCESS;
  });
}

void fusednorm_rmsnorm_quant_options_init(fusednorm_rmsnorm_quant_options* options) {
  if (options == nullptr) return;
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->norm = FUSEDNORM_NORM_RMS;
  options->scale_mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
  options->scale_placement = FUSEDNORM_SCALES_TENSOR;
  options->group_size = 128;
  options->eps = 1e-6f;
  options->weight_offset = 0.0f;
  options->scale_ub = INFINITY;
  options->min_scale = 0.0f;
  options->qmax = 0.0f;
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
    if (dev.type != kDLCPU) return run_gpu(dev, call, stream, &fusednorm_plugin::rmsnorm_quant);
    cpu_rmsnorm_quant(call);
    return FUSEDNORM_SUCCESS;
  });
}

}  // extern "C"
