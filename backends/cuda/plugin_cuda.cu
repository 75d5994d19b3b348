// Build glue only: the GPU backend (backends/gpu/) compiled as CUDA into libfusednorm_cuda.so.
#include "backends/gpu/plugin.cuh"
