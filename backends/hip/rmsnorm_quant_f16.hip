// Build glue only: the rmsnorm_quant kernels of backends/gpu/ for f16 input, compiled as HIP.
#include "backends/gpu/rmsnorm_quant.cuh"

namespace fusednorm {
namespace gpu {
FN_INSTANTIATE_RMSNORM_QUANT(DType::kF16)
}  // namespace gpu
}  // namespace fusednorm
