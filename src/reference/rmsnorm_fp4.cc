// The scalar reference of rmsnorm_fp4 and dequantize_fp4 (docs/numerics.md, "rmsnorm_fp4"): one
// element at a time over the shared math.
#include <vector>

#include "core/elements.h"
#include "core/error.h"
#include "core/validate.h"
#include "reference/reference.h"

namespace fusednorm {
namespace reference {

using namespace math;

namespace {

uint32_t abs_bits(float y) { return bits_of(y) & kF32AbsMask; }

// Rows [M, swizzle_rows) of a swizzled layout and blocks [H/block, 4*tiles) of every row: 0.
void swizzle_padding(const RmsnormFp4Call& c, int64_t row) {
  const int64_t blocks = c.h / c.block;
  const int64_t first = row < c.lead.rows ? blocks : 0;
  for (int64_t k = first; k < 4 * c.swizzle_tiles; ++k) *fp4_scale_ptr(c.lead, c.scales, 1, c.swizzle_tiles, row, k) = 0;
}

}  // namespace

void rmsnorm_fp4_rows(const RmsnormFp4Call& c, int64_t row_begin, int64_t row_end) {
  const int64_t h = c.h;
  const float gs = global_scale_value(c.global_scale);
  std::vector<float> x(static_cast<size_t>(h)), y(static_cast<size_t>(h));
  for (int64_t r = row_begin; r < row_end; ++r) {
    if (c.swizzled) swizzle_padding(c, r);
    if (r >= c.lead.rows) continue;  // a swizzled layout's padding row
    const char* in = row_ptr(c.lead, c.in, r);
    char* res = c.res.data ? row_ptr(c.lead, c.res, r) : nullptr;
    char* out = row_ptr(c.lead, c.out, r);
    normalized_row(c.in_type, in, res, h, c.norm == FUSEDNORM_NORM_RMS, c.w_type, c.weight, c.weight_offset, c.eps,
                   x.data(), y.data());
    for (int64_t b = 0; b < h / c.block; ++b) {
      uint32_t amax = 0;
      for (int64_t i = b * c.block; i < (b + 1) * c.block; ++i) amax = abs_bits(y[size_t(i)]) > amax ? abs_bits(y[size_t(i)]) : amax;
      const BlockScale s = c.format == FUSEDNORM_FP4_NVFP4 ? nvfp4_block_scale(amax, gs) : mxfp4_block_scale(amax);
      *fp4_scale_ptr(c.lead, c.scales, c.swizzled, c.swizzle_tiles, r, b) = char(s.code);
      for (int64_t i = b * c.block; i < (b + 1) * c.block; ++i)
        store_code(DType::k_f4e2m1, out, i, f4e2m1::encode<false>(mul_rn(y[size_t(i)], s.r)));
    }
  }
}

void dequantize_fp4_rows(const DequantizeFp4Call& c, int64_t row_begin, int64_t row_end) {
  const float gs = global_scale_value(c.global_scale);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const char* q = row_ptr(c.lead, c.codes, r);
    char* out = row_ptr(c.lead, c.out, r);
    for (int64_t i = 0; i < c.h; ++i) {
      const uint32_t sf = uint8_t(*fp4_scale_ptr(c.lead, c.scales, c.swizzled, c.swizzle_tiles, r, i / c.block));
      const float scale = c.format == FUSEDNORM_FP4_NVFP4 ? f8e4m3fn::decode(sf) : decode_e8m0(sf);
      const float v = div_rn(mul_rn(f4e2m1::decode(load_code(DType::k_f4e2m1, q, i)), scale), gs);
      store_code(c.out_type, out, i, encode<false>(c.out_type, v));
    }
  }
}

fusednorm_status rmsnorm_fp4(const DLTensor* input, DLTensor* residual, const DLTensor* weight, DLTensor* output,
                             DLTensor* scales, const DLTensor* global_scale,
                             const fusednorm_rmsnorm_fp4_options* options) {
  RmsnormFp4Call call;
  CallDevice dev;
  const fusednorm_status st =
      validate_rmsnorm_fp4(input, residual, weight, output, scales, global_scale, options, &call, &dev);
  if (st != FUSEDNORM_SUCCESS) return st;
  if (dev.type != kDLCPU) return fail(FUSEDNORM_UNSUPPORTED, "the reference runs on CPU tensors only");
  rmsnorm_fp4_rows(call, 0, call.swizzled ? call.swizzle_rows : call.lead.rows);
  return FUSEDNORM_SUCCESS;
}

fusednorm_status dequantize_fp4(const DLTensor* codes, const DLTensor* scales, const DLTensor* global_scale,
                                DLTensor* output, const fusednorm_dequantize_fp4_options* options) {
  DequantizeFp4Call call;
  CallDevice dev;
  const fusednorm_status st = validate_dequantize_fp4(codes, scales, global_scale, output, options, &call, &dev);
  if (st != FUSEDNORM_SUCCESS) return st;
  if (dev.type != kDLCPU) return fail(FUSEDNORM_UNSUPPORTED, "the reference runs on CPU tensors only");
  dequantize_fp4_rows(call, 0, call.lead.rows);
  return FUSEDNORM_SUCCESS;
}

}  // namespace reference
}  // namespace fusednorm
