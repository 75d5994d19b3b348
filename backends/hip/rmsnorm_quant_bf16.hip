// Build glue only: the rmsnorm_quant kernels of backends/gpu/ for bf16 input, compiled as HIP.
#include "backends/gpu/rmsnorm_quant.cuh"

namespace fusednorm {
namespace gpu {
FN_INSTANTIATE_RMSNORM_QUANT(DType::kBF16)
}  // namespace gpu
}  // namespace fusednorm
