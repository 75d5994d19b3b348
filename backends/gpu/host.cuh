// Compiled twice: as CUDA and as HIP. Host helpers of every operation's launcher (plugin.cuh and
// the operations' own units): messages, vendor errors, the device facts read at init, and the
// guard that makes the call's device current.
#pragma once

#include <stdarg.h>
#include <stdio.h>

#include <vector>

#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/launch.cuh"
#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace gpu {

// printf into the plugin's message buffer; returns st.
inline fusednorm_status say(fusednorm_status st, char* msg, size_t n, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(msg, n, fmt, args);
  va_end(args);
  return st;
}

inline fusednorm_status vendor_error(gpuError_t e, const char* what, char* msg, size_t n) {
  return say(FUSEDNORM_DEVICE_ERROR, msg, n, "%s: " FN_GPU_VENDOR " error %d (%s): %s", what, int(e),
             gpuGetErrorName(e), gpuGetErrorString(e));
}

// One entry per device, filled once by the plugin's init (before any operation can run).
inline std::vector<DeviceFacts> g_devices;

// Makes `device` current for the launch and restores the caller's device afterwards.
struct DeviceGuard {
  int previous = -1;
  gpuError_t error = gpuSuccess;
  explicit DeviceGuard(int device) {
    error = gpuGetDevice(&previous);
    if (error == gpuSuccess && previous != device) error = gpuSetDevice(device);
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous >= 0 && gpuGetDevice(&now) == gpuSuccess && now != previous) (void)gpuSetDevice(previous);
  }
};

}  // namespace gpu
}  // namespace fusednorm
