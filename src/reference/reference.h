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

}  // namespace reference
}  // namespace fusednorm

// ---------------------------------------------------------------- mla_rope_rmsnorm_quant
#include "core/call_mla.h"

namespace fusednorm {
namespace reference {

// Tokens [t0, t1) of a validated call (src/reference/reference_mla.cc).
void mla_rope_rmsnorm_quant_tokens(const MlaCall& call, int64_t t0, int64_t t1);
fusednorm_status mla_rope_rmsnorm_quant(DLTensor* q, DLTensor* q_out, const DLTensor* kv, const DLTensor* weight,
                                        const DLTensor* cos_sin, const DLTensor* positions,
                                        const DLTensor* row_offsets, const DLTensor* cache_len,
                                        const DLTensor* page_table, DLTensor* kv_cache, const DLTensor* k_scale,
                                        DLTensor* invalid_tokens,
                                        const fusednorm_mla_rope_rmsnorm_quant_options* options);

}  // namespace reference
}  // namespace fusednorm
