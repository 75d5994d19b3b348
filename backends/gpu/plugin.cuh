// Compiled twice: as CUDA (backends/cuda/plugin_cuda.cu) and as HIP (backends/hip/plugin_hip.hip).
// The GPU backend's plugin table (src/core/plugin_abi.h): runtime start-up, device queries and the
// host side of each operation (kernel choice from H and the options, never from the row count).
#pragma once

#include <stdarg.h>
#include <stdio.h>

#include <algorithm>

#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/rmsnorm_quant.cuh"
#include "core/plugin_abi.h"

namespace fusednorm {
namespace gpu {
namespace {

constexpr int64_t kMaxRowElements = int64_t(kMaxSteps) * math::kMaxPartials;  // 32768
constexpr int64_t kMaxBlocksPerLaunch = int64_t(1) << 30;

fusednorm_status say(fusednorm_status st, char* msg, size_t n, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(msg, n, fmt, args);
  va_end(args);
  return st;
}

fusednorm_status vendor_error(gpuError_t e, const char* what, char* msg, size_t n) {
  return say(FUSEDNORM_DEVICE_ERROR, msg, n, "%s: " FN_GPU_VENDOR " error %d (%s): %s", what, int(e),
             gpuGetErrorName(e), gpuGetErrorString(e));
}

int32_t g_device_count = 0;

fusednorm_status plugin_init(char* msg, size_t n) {
  int count = 0;
  const gpuError_t e = gpuGetDeviceCount(&count);
  if (e != gpuSuccess)
    return say(FUSEDNORM_BACKEND_UNAVAILABLE, msg, n, FN_GPU_VENDOR " runtime: error %d (%s): %s", int(e),
               gpuGetErrorName(e), gpuGetErrorString(e));
  if (count == 0) return say(FUSEDNORM_BACKEND_UNAVAILABLE, msg, n, FN_GPU_VENDOR " runtime: no device");
  for (int d = 0; d < count; ++d) {
    gpuDeviceProp prop;
    if (gpuGetDeviceProperties(&prop, d) == gpuSuccess && prop.warpSize != kGpuWarp)
      return say(FUSEDNORM_BACKEND_UNAVAILABLE, msg, n, "device %d (%s) has warp size %d; this plugin is built for %d", d,
                 prop.name, prop.warpSize, kGpuWarp);
  }
  g_device_count = count;
  return FUSEDNORM_SUCCESS;
}

int32_t plugin_device_count() { return g_device_count; }

void plugin_describe(int32_t id, char* msg, size_t n) {
  gpuDeviceProp prop;
  if (gpuGetDeviceProperties(&prop, id) != gpuSuccess) {
    snprintf(msg, n, FN_GPU_VENDOR " device %d", id);
    return;
  }
  snprintf(msg, n, "%s, compute capability %d.%d, %d multiprocessors, %.1f GiB, %d device(s)", prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, double(prop.totalGlobalMem) / (1u << 30), g_device_count);
}

// Every row of a view starts on an `align`-byte boundary.
bool rows_aligned(const LeadShape& lead, const RowView& v, int align) {
  if (reinterpret_cast<uintptr_t>(v.data) % align != 0) return false;
  for (int d = 0; d < lead.ndim; ++d)
    if (lead.dims[d] > 1 && v.strides[d] % align != 0) return false;
  return true;
}

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

// The widest access every row of a view allows: vectors of vec_bytes (when H is a multiple of
// 8 elements), whole elements, or bytes.
int32_t access_for(const LeadShape& lead, const RowView& v, int64_t h, int elem_bytes, int vec_bytes) {
  if (v.data == nullptr) return kVectors;
  if (h % 8 == 0 && rows_aligned(lead, v, vec_bytes)) return kVectors;
  return rows_aligned(lead, v, elem_bytes) ? kElements : kBytesOnly;
}

template <DType kIn>
void launch_rows(const RmsnormQuantCall& c, const RowShape& shape, int64_t first, int64_t blocks,
                 const int32_t access[3], gpuStream_t stream) {
  const dim3 grid{unsigned(blocks)}, block{unsigned(shape.rows_per_block * shape.threads_per_row)};
  if (shape.steps <= 4)
    rmsnorm_quant_kernel<kIn, kGpuWarp, 4><<<grid, block, 0, stream>>>(c, shape, first, access[0], access[1], access[2]);
  else
    rmsnorm_quant_kernel<kIn, kGpuWarp, 8><<<grid, block, 0, stream>>>(c, shape, first, access[0], access[1], access[2]);
}

fusednorm_status plugin_rmsnorm_quant(const RmsnormQuantCall* call, int32_t device, void* stream, char* msg,
                                      size_t n) {
  const RmsnormQuantCall& c = *call;
  if (c.h > kMaxRowElements)
    return say(FUSEDNORM_UNSUPPORTED, msg, n, "input H = %lld: the " FN_GPU_VENDOR
               " backend keeps a row in registers and supports H <= %lld", (long long)c.h, (long long)kMaxRowElements);
  if (c.h == 0 || c.lead.rows == 0) return FUSEDNORM_SUCCESS;
  DeviceGuard guard(device);
  if (guard.error != gpuSuccess) return vendor_error(guard.error, "selecting the device", msg, n);
  const RowShape shape = row_shape(c.h);
  const int in_bytes = c.in_type == DType::kF32 ? 4 : 2, w_bytes = c.w_type == DType::kF32 ? 4 : 2;
  const LeadShape one_row;  // the weight is a single row
  RowView wv;
  wv.data = const_cast<char*>(c.weight);
  const int32_t access[3] = {
      std::min(access_for(c.lead, c.in, c.h, in_bytes, 16), access_for(c.lead, c.res, c.h, in_bytes, 16)),
      access_for(c.lead, c.out, c.h, 1, 8),
      access_for(one_row, wv, c.h, w_bytes, 16)};
  const int64_t blocks = (c.lead.rows + shape.rows_per_block - 1) / shape.rows_per_block;
  const gpuStream_t s = static_cast<gpuStream_t>(stream);
  for (int64_t b0 = 0; b0 < blocks; b0 += kMaxBlocksPerLaunch) {
    const int64_t nb = blocks - b0 < kMaxBlocksPerLaunch ? blocks - b0 : kMaxBlocksPerLaunch;
    const int64_t first = b0 * shape.rows_per_block;
    switch (c.in_type) {
      case DType::kF32: launch_rows<DType::kF32>(c, shape, first, nb, access, s); break;
      case DType::kF16: launch_rows<DType::kF16>(c, shape, first, nb, access, s); break;
      default: launch_rows<DType::kBF16>(c, shape, first, nb, access, s); break;
    }
    const gpuError_t e = gpuGetLastError();
    if (e != gpuSuccess) return vendor_error(e, "launching rmsnorm_quant", msg, n);
  }
  return FUSEDNORM_SUCCESS;
}

const fusednorm_plugin kPlugin = {
    FUSEDNORM_PLUGIN_ABI_VERSION,
    uint32_t(sizeof(fusednorm_plugin)),
    uint32_t(sizeof(CastCall)),
    uint32_t(sizeof(RmsnormQuantCall)),
    FN_GPU_NAME,
    FN_GPU_DEVICE_TYPE,
    plugin_init,
    plugin_device_count,
    plugin_describe,
    nullptr,  // cast: not offered on the GPU yet (UNSUPPORTED)
    plugin_rmsnorm_quant,
};

}  // namespace
}  // namespace gpu
}  // namespace fusednorm

extern "C" __attribute__((visibility("default"))) const fusednorm_plugin* FN_GPU_PLUGIN_ENTRY(void) {
  return &fusednorm::gpu::kPlugin;
}
