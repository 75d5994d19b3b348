// Pieces shared by the GPU tuning harnesses (tests/bench/gpu_variants.cu, gpu_fp4_variants.cu;
// not part of the library or the test suite): a checked CUDA call, a bf16 fill, the copy
// bandwidth of the run.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

// bf16 values in [-2, 2) from a hash of the index and seed.
__global__ void fill_bf16(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    const float f = (float(x & 0xFFFF) / 65536.0f - 0.5f) * 4.0f;
    p[i] = uint16_t(__float_as_uint(f) >> 16);
  }
}

// GB/s (bytes read + written) of ten 1 GiB device-to-device copies after three warm-ups, printed
// as "# copy N GB/s".
inline double copy_bandwidth_gbs() {
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e0));
  for (int i = 0; i < 10; ++i) CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  const double gbs = 2.0 * bytes * 10 / (ms * 1e-3) / 1e9;
  printf("# copy %.0f GB/s\n", gbs);
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return gbs;
}
