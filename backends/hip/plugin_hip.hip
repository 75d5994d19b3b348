// Build glue only: the GPU backend (backends/gpu/) compiled as HIP into libfusednorm_hip.so.
#include "backends/gpu/plugin.cuh"
