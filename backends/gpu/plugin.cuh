// Compiled twice: as CUDA (backends/cuda/plugin_cuda.cu) and as HIP (backends/hip/plugin_hip.hip).
// The GPU backend's plugin table (src/core/plugin_abi.h): runtime start-up, device queries and the
// host side of each operation (kernel choice from H and the options, never from the row count).
#pragma once

#include <stdarg.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

#include "backends/gpu/encode.cuh"
#include "backends/gpu/fp4_encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/host.cuh"
#include "backends/gpu/kernel_table.cuh"
#include "backends/gpu/launch.cuh"
#include "backends/gpu/ops.h"
#include "backends/gpu/plan.h"
#include "core/plugin_abi.h"

namespace fusednorm {
namespace gpu {

// The kernels are instantiated in their own translation units, one per input dtype
// (FN_INSTANTIATE_RMSNORM_QUANT in backends/cuda/rmsnorm_quant_*.cu and backends/hip/*.hip).
extern template KernelFn rmsnorm_quant_kernel_for<DType::kF32>(DType, const RowShape&, Plan);
extern template KernelFn rmsnorm_quant_kernel_for<DType::kF16>(DType, const RowShape&, Plan);
extern template KernelFn rmsnorm_quant_kernel_for<DType::kBF16>(DType, const RowShape&, Plan);

namespace {

constexpr int64_t kMaxRowElements = int64_t(kMaxSteps) * math::kMaxPartials;  // 32768

int32_t g_device_count = 0;

fusednorm_status plugin_init(char* msg, size_t n) {
  int count = 0;
  const gpuError_t e = gpuGetDeviceCount(&count);
  if (e != gpuSuccess)
    return say(FUSEDNORM_BACKEND_UNAVAILABLE, msg, n, FN_GPU_VENDOR " runtime: error %d (%s): %s", int(e),
               gpuGetErrorName(e), gpuGetErrorString(e));
  if (count == 0) return say(FUSEDNORM_BACKEND_UNAVAILABLE, msg, n, FN_GPU_VENDOR " runtime: no device");
  std::vector<DeviceFacts> facts(count);
  for (int d = 0; d < count; ++d) {
    gpuDeviceProp prop;
    const gpuError_t pe = gpuGetDeviceProperties(&prop, d);
    if (pe != gpuSuccess)
      return say(FUSEDNORM_BACKEND_UNAVAILABLE, msg, n, FN_GPU_VENDOR " device %d: error %d (%s): %s", d, int(pe),
                 gpuGetErrorName(pe), gpuGetErrorString(pe));
    if (prop.warpSize != kGpuWarp)
      return say(FUSEDNORM_BACKEND_UNAVAILABLE, msg, n, "device %d (%s) has warp size %d; this plugin is built for %d", d,
                 prop.name, prop.warpSize, kGpuWarp);
    facts[d].major = prop.major;
    facts[d].multiprocessors = prop.multiProcessorCount;
#if defined(__HIPCC__)
    facts[d].max_smem_per_block = size_t(prop.sharedMemPerBlock);
#else
    facts[d].max_smem_per_block = std::max(size_t(prop.sharedMemPerBlockOptin), size_t(prop.sharedMemPerBlock));
#endif
  }
  g_devices = facts;
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

fusednorm_status plugin_rmsnorm_quant(const RmsnormQuantCall* call, int32_t device, void* stream, char* msg,
                                      size_t n) {
  const RmsnormQuantCall& c = *call;
  if (c.h > kMaxRowElements)
    return say(FUSEDNORM_UNSUPPORTED, msg, n, "input H = %lld: the " FN_GPU_VENDOR
               " backend keeps a row in registers and supports H <= %lld", (long long)c.h, (long long)kMaxRowElements);
  if (c.h == 0 || c.lead.rows == 0) return FUSEDNORM_SUCCESS;
  DeviceGuard guard(device);
  if (guard.error != gpuSuccess) return vendor_error(guard.error, "selecting the device", msg, n);
  const int in_bytes = c.in_type == DType::kF32 ? 4 : 2, w_bytes = c.w_type == DType::kF32 ? 4 : 2;
  const LeadShape one_row;  // the weight is a single row
  RowView wv;
  wv.data = const_cast<char*>(c.weight);
  auto accesses = [&](const RowShape& s) {
    Accesses a;
    a.in = std::min(access_for(c.lead, c.in, in_bytes, s.vec * in_bytes), access_for(c.lead, c.res, in_bytes, s.vec * in_bytes));
    a.out = access_for(c.lead, c.out, 1, s.vec);
    a.w = access_for(one_row, wv, w_bytes, s.vec * w_bytes);
    return a;
  };

  // A fast kernel (vectors of fast_vec elements) where the views allow one (vector access
  // everywhere, one leading dimension) and fast_plan has one for the options and H; else the
  // general kernel. The same arithmetic either way.
  RowShape shape = fast_row_shape(c.h, c.in_type);
  Accesses acc = accesses(shape);
  const Plan plan = acc.in == kVectors && acc.out == kVectors && acc.w == kVectors && c.lead.ndim <= 1
                        ? fast_plan(c, shape, kGpuWarp)
                        : Plan::kAll;
  if (plan == Plan::kAll) {
    shape = row_shape(c.h);
    acc = accesses(shape);
  } else if (!kGpuIsHip && (plan == Plan::kRow || plan == Plan::kGroup) && c.lead.rows <= g_devices[device].multiprocessors &&
             decode_vec(c.in_type, shape.steps) != shape.vec) {
    // A short call: decode_vec's vectors, where the plan stays the same with them.
    const RowShape d = row_shape(c.h, decode_vec(c.in_type, shape.steps));
    const Accesses da = accesses(d);
    if (da.in == kVectors && da.out == kVectors && da.w == kVectors && fast_plan(c, d, kGpuWarp) == plan) {
      shape = d;
      acc = da;
    }
  }
  KernelFn fn = nullptr;
  switch (c.in_type) {
    case DType::kF32: fn = rmsnorm_quant_kernel_for<DType::kF32>(c.out_type, shape, plan); break;
    case DType::kF16: fn = rmsnorm_quant_kernel_for<DType::kF16>(c.out_type, shape, plan); break;
    default: fn = rmsnorm_quant_kernel_for<DType::kBF16>(c.out_type, shape, plan); break;
  }
  if (fn == nullptr) return say(FUSEDNORM_INTERNAL_ERROR, msg, n, "no GPU kernel for this output type");
  const DeviceFacts& dev = g_devices[device];
  const unsigned threads = unsigned(shape.rows_per_block * shape.threads_per_row);
  // g = w + offset in shared memory (each thread's slice): always on CUDA (sm_80 and later have
  // room for the largest, 128 KiB), where the device has room for it on HIP.
  const size_t gamma_bytes = size_t(threads) * shape.vec * kernel_steps(shape, plan) * sizeof(float);
#if defined(__HIPCC__)
  const int32_t gamma_smem = c.norm == FUSEDNORM_NORM_RMS && gamma_bytes <= dev.max_smem_per_block ? 1 : 0;
#else
  if (c.norm == FUSEDNORM_NORM_RMS && gamma_bytes > dev.max_smem_per_block)
    return say(FUSEDNORM_UNSUPPORTED, msg, n, "input H = %lld needs %zu bytes of shared memory a block; device %d has %zu",
               (long long)c.h, gamma_bytes, device, dev.max_smem_per_block);
  const int32_t gamma_smem = c.norm == FUSEDNORM_NORM_RMS ? 1 : 0;
#endif
  const size_t smem = gamma_smem ? gamma_bytes : 0;
  gpuError_t e = launch_rmsnorm_quant(fn, dev, device, static_cast<gpuStream_t>(stream), c, shape, acc, smem, gamma_smem);
  if (e == gpuSuccess) e = gpuGetLastError();
  if (e != gpuSuccess) return vendor_error(e, "launching rmsnorm_quant", msg, n);
  return FUSEDNORM_SUCCESS;
}

fusednorm_status verify_one(VerifyKernel kernel, const char* name, unsigned long long* bad, unsigned int* first,
                            char* msg, size_t n) {
  gpuError_t e = gpuMemset(bad, 0, sizeof *bad);
  if (e == gpuSuccess) e = gpuMemset(first, 0xFF, sizeof *first);
  if (e != gpuSuccess) return vendor_error(e, "verify_encoders", msg, n);
  kernel<<<4096, 256>>>(0, uint64_t(1) << 32, bad, first);
  e = gpuDeviceSynchronize();
  unsigned long long b = 0;
  unsigned int f = 0;
  if (e == gpuSuccess) e = gpuMemcpy(&b, bad, sizeof b, gpuMemcpyDeviceToHost);
  if (e == gpuSuccess) e = gpuMemcpy(&f, first, sizeof f, gpuMemcpyDeviceToHost);
  if (e != gpuSuccess) return vendor_error(e, "verify_encoders", msg, n);
  if (b != 0)
    return say(FUSEDNORM_INTERNAL_ERROR, msg, n, "%s: %llu of 2^32 inputs differ from the shared math; first 0x%08x",
               name, b, f);
  return FUSEDNORM_SUCCESS;
}

fusednorm_status plugin_verify_encoders(int32_t device, char* msg, size_t n) {
  DeviceGuard guard(device);
  if (guard.error != gpuSuccess) return vendor_error(guard.error, "selecting the device", msg, n);
  void* mem = nullptr;
  gpuError_t e = gpuMalloc(&mem, 16);
  if (e != gpuSuccess) return vendor_error(e, "verify_encoders", msg, n);
  auto* bad = static_cast<unsigned long long*>(mem);
  auto* first = reinterpret_cast<unsigned int*>(static_cast<char*>(mem) + 8);
  fusednorm_status st = FUSEDNORM_SUCCESS;
#define FN_MINIFLOAT(name, ...) \
  if (st == FUSEDNORM_SUCCESS) st = verify_one(&verify_encoder_kernel<DType::k_##name>, #name, bad, first, msg, n);
#include "math/formats.inc"
#undef FN_MINIFLOAT
  if (st == FUSEDNORM_SUCCESS) st = verify_one(&verify_encoder_kernel<DType::kI8>, "int8", bad, first, msg, n);
  // The residual's sums rounded in pairs to the 16-bit input dtypes.
  if (st == FUSEDNORM_SUCCESS) st = verify_one(&verify_pair_kernel<DType::kBF16>, "bf16 pairs", bad, first, msg, n);
  if (st == FUSEDNORM_SUCCESS) st = verify_one(&verify_pair_kernel<DType::kF16>, "f16 pairs", bad, first, msg, n);
  // f8e4m3fnuz from halves (group scales; sm_89+: elsewhere the kernel checks nothing).
  if (st == FUSEDNORM_SUCCESS) st = verify_one(&verify_fnuz_halves_kernel<>, "f8e4m3fnuz from halves", bad, first, msg, n);
  if (st == FUSEDNORM_SUCCESS) st = verify_one(&verify_f4_kernel<>, "f4e2m1 (branch-free)", bad, first, msg, n);
  if (st == FUSEDNORM_SUCCESS) st = verify_one(&verify_f4_pack_kernel<>, "f4e2m1 (8 packed, |v| < 7)", bad, first, msg, n);
  (void)gpuFree(mem);
  return st;
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
    plugin_verify_encoders,
    nullptr,  // target: one build per architecture, nothing chosen at run time
    plugin_rmsnorm_fp4,
    plugin_dequantize_fp4,
    uint32_t(sizeof(QkRmsnormCall)),
    plugin_qk_rmsnorm,
    uint32_t(sizeof(MlaCall)),
    mla_rope_rmsnorm_quant,  // ops.h
};

}  // namespace
}  // namespace gpu
}  // namespace fusednorm

extern "C" __attribute__((visibility("default"))) const fusednorm_plugin* FN_GPU_PLUGIN_ENTRY(void) {
  return &fusednorm::gpu::kPlugin;
}
