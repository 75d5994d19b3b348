// The scalar reference: the op-level oracle that every backend must equal byte for byte. Plain
// C++ over the shared math, one element at a time, in the canonical order of docs/numerics.md.
// Built as a static library for the tests and fusednorm-bench; not part of libfusednorm.so.
#pragma once

#include "core/call.h"
#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace reference {

// Σ x_i² in the canonical order (docs/numerics.md §2).
float sum_squares(const float* x, int64_t h);

void cast_rows(const CastCall& call, int64_t row_begin, int64_t row_end);
void rmsnorm_quant_rows(const RmsnormQuantCall& call, int64_t row_begin, int64_t row_end);

// The public API's calls, computed by the reference (CPU tensors only; same validation).
fusednorm_status cast(const DLTensor* src, DLTensor* dst, const fusednorm_cast_options* options);
fusednorm_status rmsnorm_quant(const DLTensor* input, DLTensor* residual, const DLTensor* weight,
                               DLTensor* output, DLTensor* scales,
                               const fusednorm_rmsnorm_quant_options* options);

// qk_rmsnorm (src/reference/qk_rmsnorm.cc): the three entry points over one row function.
void qk_rmsnorm_rows(const QkRmsnormCall& call, int64_t row_begin, int64_t row_end);
fusednorm_status qk_rmsnorm_stats(const DLTensor* q, const DLTensor* k, DLTensor* stats,
                                  const fusednorm_qk_rmsnorm_options* options);
fusednorm_status qk_rmsnorm_apply(const DLTensor* q, const DLTensor* k, const DLTensor* stats,
                                  const DLTensor* q_weight, const DLTensor* k_weight, DLTensor* q_out,
                                  DLTensor* k_out, const DLTensor* out_scales,
                                  const fusednorm_qk_rmsnorm_options* options);
fusednorm_status qk_rmsnorm(const DLTensor* q, const DLTensor* k, const DLTensor* q_weight,
                            const DLTensor* k_weight, DLTensor* q_out, DLTensor* k_out, const DLTensor* out_scales,
                            const fusednorm_qk_rmsnorm_options* options);

}  // namespace reference
}  // namespace fusednorm
