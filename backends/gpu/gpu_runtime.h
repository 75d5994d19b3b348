// Compiled twice: as CUDA (backends/cuda) and as HIP (backends/hip). Vendor-neutral names for the
// few runtime calls and intrinsics the GPU backend uses; nothing else in backends/gpu/ names a
// vendor.
#pragma once

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
#define FN_SHFL_XOR(v, m, w) __shfl_xor((v), (m), (w))
#define FN_SHFL(v, l, w) __shfl((v), (l), (w))
constexpr int kGpuWarp = 64;  // CDNA wavefront
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
#define FN_SHFL_XOR(v, m, w) __shfl_xor_sync(0xFFFFFFFFu, (v), (m), (w))
#define FN_SHFL(v, l, w) __shfl_sync(0xFFFFFFFFu, (v), (l), (w))
constexpr int kGpuWarp = 32;
#endif
