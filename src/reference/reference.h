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

// One row's y (f32): x = input, or with res the sum input + res rounded to the input dtype (and
// written back to res); then (x × inv_rms) × (w + weight_offset) when rms, else x. x, y: h floats.
void normalized_row(DType in_type, const char* in, char* res, int64_t h, bool rms, DType w_type, const char* weight,
                    float weight_offset, float eps, float* x, float* y);

void cast_rows(const CastCall& call, int64_t row_begin, int64_t row_end);
void rmsnorm_quant_rows(const RmsnormQuantCall& call, int64_t row_begin, int64_t row_end);

// The public API's calls, computed by the reference (CPU tensors only; same validation).
fusednorm_status cast(const DLTensor* src, DLTensor* dst, const fusednorm_cast_options* options);
fusednorm_status rmsnorm_quant(const DLTensor* input, DLTensor* residual, const DLTensor* weight,
                               DLTensor* output, DLTensor* scales,
                               const fusednorm_rmsnorm_quant_options* options);

// rmsnorm_fp4 over rows [row_begin, row_end) (swizzled: up to the padded row count, whose padding
// rows get zero scales) and dequantize_fp4 (src/reference/rmsnorm_fp4.cc).
void rmsnorm_fp4_rows(const RmsnormFp4Call& call, int64_t row_begin, int64_t row_end);
void dequantize_fp4_rows(const DequantizeFp4Call& call, int64_t row_begin, int64_t row_end);
fusednorm_status rmsnorm_fp4(const DLTensor* input, DLTensor* residual, const DLTensor* weight, DLTensor* output,
                             DLTensor* scales, const DLTensor* global_scale,
                             const fusednorm_rmsnorm_fp4_options* options);
fusednorm_status dequantize_fp4(const DLTensor* codes, const DLTensor* scales, const DLTensor* global_scale,
                                DLTensor* output, const fusednorm_dequantize_fp4_options* options);
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
