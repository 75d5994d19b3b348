// Compiled twice: as CUDA (backends/cuda) and as HIP (backends/hip). Vendor-neutral names for the
// few runtime calls and intrinsics the GPU backend uses; nothing else in backends/gpu/ names a
// vendor.
#pragma once

#include <stdint.h>

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define FN_GPU_VENDOR "HIP"
#define FN_GPU_NAME "hip"
#define FN_GPU_DEVICE_TYPE kDLROCM
#define FN_GPU_PLUGIN_ENTRY fusednorm_plugin_entry_hip
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuDeviceProp = hipDeviceProp_t;
constexpr gpuError_t gpuSuccess = hipSuccess;
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDevice hipGetDevice
#define gpuSetDevice hipSetDevice
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuGetErrorString hipGetErrorString
#define gpuGetErrorName hipGetErrorName
#define gpuGetLastError hipGetLastError
#define gpuDriverGetVersion hipDriverGetVersion
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemset hipMemset
#define gpuMemcpy hipMemcpy
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuFuncSetAttribute(f, a, v) hipFuncSetAttribute(reinterpret_cast<const void*>(f), a, v)
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define FN_SHFL_XOR(v, m, w) __shfl_xor((v), (m), (w))
#define FN_SHFL(v, l, w) __shfl((v), (l), (w))
constexpr int kGpuWarp = 64;  // CDNA wavefront
constexpr bool kGpuIsHip = true;
#define FN_GRID_CONSTANT  // kernel arguments are addressable memory already
#define FN_STORE_GLOBAL(p, v) (*(p) = (v))
#define FN_LOAD_RO(p) (*(p))
#define FN_STORE_STREAM(p, v) (*(p) = (v))
#define FN_LOAD_STREAM(p) (*(p))
#define FN_CUDA_ARCH 0  // no CUDA device pass: the portable paths everywhere
// Kernel register and thread bounds: HIP takes the block's maximum threads.
#define FN_KERNEL_BOUNDS(max_threads, max_regs) __launch_bounds__(max_threads)
__device__ __forceinline__ void gpu_prefetch_l2_range(const char*, uint32_t, int, int) {}
__device__ __forceinline__ void gpu_warm_line(const char*, int64_t) {}
template <int kBytes>
__device__ __forceinline__ void gpu_copy_async(void* smem, const void* src) { memcpy(smem, src, kBytes); }
__device__ __forceinline__ void gpu_copy_async_wait_all() {}
// An opaque copy of a per-thread value (a vector register): the compiler cannot see through it,
// so what is derived from it is computed after this point, not hoisted before it.
__device__ __forceinline__ void gpu_launder(int& v) { asm volatile("" : "+v"(v)); }
__device__ __forceinline__ void gpu_prefetch_l1(const void*) {}
__device__ __forceinline__ void gpu_wait_for_previous_grid() {}
__device__ __forceinline__ void gpu_allow_next_grid() {}
// A barrier of row `row`'s threads (see the CUDA one); here the whole block's, which every row's
// threads reach as often.
__device__ __forceinline__ void gpu_row_barrier(int, int) { __syncthreads(); }
// MI300 (gfx940, gfx941, gfx942): v_cvt_pk_fp8_f32 converts two f32 to f8e4m3fnuz codes, round to
// nearest even (the format of those chips' FP8). `word` 0 writes bytes 0-1 of `old`, 1 bytes 2-3;
// the other half of `old` is kept. Used only through encode.cuh's fnuz_hw* (their conditions:
// docs/numerics.md §3c, "MI300").
#if defined(__HIP_DEVICE_COMPILE__) && (defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__))
#define FN_HIP_FNUZ_CVT 1
#define FN_CVT_FNUZX2(old, lo, hi, word) uint32_t(__builtin_amdgcn_cvt_pk_fp8_f32((lo), (hi), int(old), (word)))
#else
#define FN_HIP_FNUZ_CVT 0
#endif
// f16 bits to f32 (fpext: v_cvt_f32_f16): exact for every finite f16, keeps Inf, a NaN stays a
// NaN, as on CUDA.
__device__ __forceinline__ float gpu_f16_to_f32(uint16_t h) { return static_cast<float>(__builtin_bit_cast(_Float16, h)); }
// PTX's prmt.b32 (default mode) in portable code: byte i of the result is byte (n & 7) of {b, a}
// (a's bytes 0-3, b's 4-7) for nibble n = (s >> 4i) & 15, or with n & 8 that byte's bit 7 copied
// to all eight bits.
__device__ __forceinline__ uint32_t gpu_prmt(uint32_t a, uint32_t b, uint32_t s) {
  const uint64_t x = (uint64_t(b) << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t n = (s >> (4 * i)) & 15u;
    uint32_t byte = uint32_t(x >> (8 * (n & 7u))) & 0xFFu;
    if (n & 8u) byte = (byte & 0x80u) != 0 ? 0xFFu : 0u;
    d |= byte << (8 * i);
  }
  return d;
}
// HIP's __fsqrt_rn is not correctly rounded (HIP 5.2 and clang's own HIP headers through 19 map it
// to __ocml_native_sqrt_f32, i.e. v_sqrt_f32, 1 ulp); numerics.md wants every operation correctly
// rounded. math::sqrt_rn calls __fsqrt_rn unqualified from namespace fusednorm::math, so this
// declaration hides HIP's there. __ocml_sqrt_f32 is correctly rounded with the
// oclc_correctly_rounded_sqrt_on device library (-fhip-fp32-correctly-rounded-divide-sqrt, the
// default, which backends/hip/CMakeLists.txt passes explicitly).
namespace fusednorm {
namespace math {
__device__ __forceinline__ float __fsqrt_rn(float a) { return __ocml_sqrt_f32(a); }
}  // namespace math
}  // namespace fusednorm
#else
#include <cuda_runtime.h>
#define FN_GPU_VENDOR "CUDA"
#define FN_GPU_NAME "cuda"
#define FN_GPU_DEVICE_TYPE kDLCUDA
#define FN_GPU_PLUGIN_ENTRY fusednorm_plugin_entry_cuda
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuDeviceProp = cudaDeviceProp;
constexpr gpuError_t gpuSuccess = cudaSuccess;
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDevice cudaGetDevice
#define gpuSetDevice cudaSetDevice
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuGetErrorString cudaGetErrorString
#define gpuGetErrorName cudaGetErrorName
#define gpuGetLastError cudaGetLastError
#define gpuDriverGetVersion cudaDriverGetVersion
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemset cudaMemset
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuFuncSetAttribute(f, a, v) cudaFuncSetAttribute(f, a, v)
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define FN_SHFL_XOR(v, m, w) __shfl_xor_sync(0xFFFFFFFFu, (v), (m), (w))
#define FN_SHFL(v, l, w) __shfl_sync(0xFFFFFFFFu, (v), (l), (w))
constexpr int kGpuWarp = 32;
constexpr bool kGpuIsHip = false;
// Lets device code take the address of a kernel argument without copying it to local memory.
#define FN_GRID_CONSTANT __grid_constant__
// A store known to go to global memory (a plain store through a pointer from a kernel argument
// is a generic one).
#define FN_STORE_GLOBAL(p, v) __stwb((p), (v))
// A load through the read-only (non-coherent) path: data the kernel does not write before
// reading it.
#define FN_LOAD_RO(p) __ldg(p)
// A load and a store with the streaming hint (ld/st.global.cs: evict first), for data a kernel
// reads or writes once.
#define FN_LOAD_STREAM(p) __ldcs(p)
#define FN_STORE_STREAM(p, v) __stcs((p), (v))
// The CUDA device pass's architecture (__CUDA_ARCH__: 800, 900, ...); 0 on the host pass. Device
// code tests it to choose between the PTX wrappers below and the portable paths.
#if defined(__CUDA_ARCH__)
#define FN_CUDA_ARCH __CUDA_ARCH__
#else
#define FN_CUDA_ARCH 0
#endif
// Kernel register and thread bounds: CUDA caps the registers a thread (__maxnreg__).
#define FN_KERNEL_BOUNDS(max_threads, max_regs) __maxnreg__(max_regs)
// kBytes (4, 8 or 16, aligned to that) from global memory to shared memory without a register
// (cp.async, sm_80+; a plain copy before); visible to this thread after gpu_copy_async_wait_all.
template <int kBytes>
__device__ __forceinline__ void gpu_copy_async(void* smem, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t d = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(d), "l"(src), "n"(kBytes) : "memory");
#else
  memcpy(smem, src, kBytes);
#endif
}
__device__ __forceinline__ void gpu_copy_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
// 16 bytes of shared memory at a 32-bit shared-window address (cvta of a __shared__ pointer,
// computed once): the compiler would otherwise rebuild the window address at every access. The
// load is volatile so that it stays where it is written (a loop-invariant table read would be
// hoisted out of the row loop into registers).
__device__ __forceinline__ uint32_t gpu_shared_address(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ float gpu_load_shared4(uint32_t a) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ float4 gpu_load_shared16(uint32_t a) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a));
  return v;
}
// A hint that brings bytes [p, p + n) into L2, called by threads i < count together (no value is
// read: safe before the previous grid's writes are visible, since L2 is where they land). On
// sm_90 one bulk prefetch by thread 0 over the 16-byte granules that hold the range (they lie in
// the same pages as the range); before, one line prefetch a thread.
__device__ __forceinline__ void gpu_prefetch_l2_range(const char* p, uint32_t n, int i, int count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (i == 0) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p), lo = a & ~uintptr_t(15), hi = (a + n + 15) & ~uintptr_t(15);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(lo), "r"(uint32_t(hi - lo)) : "memory");
  }
#else
  for (uint32_t off = uint32_t(i) * 128u; off < n; off += uint32_t(count) * 128u)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
#endif
}
// A hint that brings the 128-byte line at p + off into L2 where off starts one (off a multiple of
// 128: called by every thread for its vector, the thread whose vector starts a line warms it;
// no value is read, so it is as safe before the previous grid's writes are visible as
// gpu_prefetch_l2_range). For qk_rmsnorm's short fused calls faster than one bulk prefetch of a
// group by one thread (H200, 16 / 64 rows of 4096 + 512: 1.82 / 2.07 against 1.85 / 2.17 us);
// rmsnorm_quant keeps its bulk prefetch, where lines measured no faster (docs/performance.md).
__device__ __forceinline__ void gpu_warm_line(const char* p, int64_t off) {
#if defined(__CUDA_ARCH__)
  if ((off & 127) == 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
#endif
}
// An opaque copy of a per-thread value: the compiler cannot see through it, so what is derived
// from it is computed after this point, not hoisted before it.
__device__ __forceinline__ void gpu_launder(int& v) { asm volatile("" : "+r"(v)); }
// A hint: the line of p into L1 (after gpu_wait_for_previous_grid: L1 is not coherent with the
// previous kernel's writes).
__device__ __forceinline__ void gpu_prefetch_l1(const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#endif
}
// Programmatic dependent launch (griddepcontrol, sm_90 and later; no-ops before).
__device__ __forceinline__ void gpu_wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void gpu_allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#define FN_HIP_FNUZ_CVT 0  // MI300's fnuz conversion: HIP only
// Hardware conversions (PTX), used where FN_CUDA_ARCH allows them; each is proven equal to the
// shared math (math/quant_math.h) by the plugin's verify_encoders, except gpu_f16_to_f32 (exact).
// f16 bits to f32 (sm_53+): exact for every finite f16, keeps Inf, a NaN stays a NaN.
__device__ __forceinline__ float gpu_f16_to_f32(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
// Two f32 rounded to nearest even into bf16 / f16 halves of one word, `lo` in the low half
// (sm_80+; subnormals kept, overflow to Inf; the hardware's NaN is 0x7FFF).
__device__ __forceinline__ uint32_t gpu_f32x2_to_bf16x2(float lo, float hi) {
  uint32_t w;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}
__device__ __forceinline__ uint32_t gpu_f32x2_to_f16x2(float lo, float hi) {
  uint32_t w;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}
// Two f32 to FP8 codes into the uint16_t `w`, `lo`'s in the low byte (sm_89+): round to nearest
// even, saturating finite values and infinities, 0x7F for every NaN. Macros, not functions: as
// inline functions they changed the register allocation of the largest kernels (4-element
// vectors, 8 steps).
#define FN_CVT_E4M3X2(w, lo, hi) asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(w) : "f"(hi), "f"(lo))
#define FN_CVT_E5M2X2(w, lo, hi) asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(w) : "f"(hi), "f"(lo))
// f32 to int8: round to nearest even, saturate to [-128, 127], NaN to 0 (in a 32-bit register).
__device__ __forceinline__ int32_t gpu_f32_to_s8_sat(float v) {
  int32_t q;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(q) : "f"(v));
  return q;
}
// A barrier of the `count` threads of row `row` of a block (whole warps; rows 0 .. 14): named
// barrier 1 + row, so that rows sharing a block do not wait for each other (barrier 0 is
// __syncthreads').
__device__ __forceinline__ void gpu_row_barrier(int row, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(row + 1), "r"(count) : "memory");
}
// Byte permute (PRMT): byte i of the result is byte (n & 7) of {b, a} (a's bytes 0-3, b's 4-7) for
// nibble n = (s >> 4i) & 15, or with n & 8 that byte's bit 7 copied to all eight bits.
__device__ __forceinline__ uint32_t gpu_prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
}
// max(a, b) that returns the canonical NaN if either is a NaN (sm_80+, FMNMX.NAN).
__device__ __forceinline__ float gpu_max_nan(float a, float b) {
  float m;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(b));
  return m;
}
#endif
