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

// GPU device types have no backend in this build yet; say so with the device named.
fusednorm_status gpu_unavailable(const CallDevice& dev) {
  return fail(FUSEDNORM_BACKEND_UNAVAILABLE,
              "device %s:%d: this build of fusednorm has no %s backend (the GPU plugins are not built)",
              dev.type == kDLCUDA ? "cuda" : "rocm", dev.id, dev.type == kDLCUDA ? "CUDA" : "HIP");
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
      snprintf(info->detail, sizeof info->detail, "this build of fusednorm has no %s backend (the GPU plugins are not built)",
               device_type == kDLCUDA ? "CUDA" : "HIP");
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
  (void)stream;
  return guarded([&] {
    CastCall call;
    CallDevice dev;
    const fusednorm_status st = validate_cast(src, dst, options, &call, &dev);
    if (st != FUSEDNORM_SUCCESS) return st;
    if (dev.type != kDLCPU) return gpu_unavailable(dev);
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
  (void)stream;
  return guarded([&] {
    RmsnormQuantCall call;
    CallDevice dev;
    const fusednorm_status st =
        validate_rmsnorm_quant(input, residual, weight, output, scales, options, &call, &dev);
    if (st != FUSEDNORM_SUCCESS) return st;
    if (dev.type != kDLCPU) return gpu_unavailable(dev);
    cpu_rmsnorm_quant(call);
    return FUSEDNORM_SUCCESS;
  });
}

}  // extern "C"
