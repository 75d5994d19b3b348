#include "reference/reference.h"

#include <string.h>

#include <vector>

#include "core/elements.h"
#include "core/error.h"
#include "core/validate.h"

namespace fusednorm {
namespace reference {

using namespace math;

float sum_squares(const float* x, int64_t h) {
  std::vector<float> part(size_t(reduction_partials(h)));
  return sum_squares_canonical([x](int64_t i) { return x[i]; }, h, part.data());
}

void cast_rows(const CastCall& c, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const char* src = row_ptr(c.lead, c.src, r);
    char* dst = row_ptr(c.lead, c.dst, r);
    for (int64_t i = 0; i < c.cols; ++i)
      store_code(c.dst_type, dst, i,
                 encode<true>(c.dst_type, decode(c.src_type, load_code(c.src_type, src, i)), c.e8m0_up));
  }
}

namespace {

// x rounded to the input dtype and back (the residual sum's one rounding).
float round_to(DType t, float x) { return decode(t, encode<false>(t, x)); }

uint32_t abs_bits(float y) { return bits_of(y) & kF32AbsMask; }

void store_scale(const RmsnormQuantCall& c, int64_t row, int64_t group, uint32_t stored) {
  if (c.packed) {
    memcpy(row_ptr(c.lead, c.out, row) + c.h, &stored, 4);  // little-endian hosts only
    return;
  }
  char* p = row_ptr(c.lead, c.scales, row) + group * c.scale_col_stride;
  store_code(dtype_of(c.scale_type), p, 0, stored);
}

}  // namespace

void normalized_row(DType in_type, const char* in, char* res, int64_t h, bool rms, DType w_type, const char* weight,
                    float weight_offset, float eps, float* x, float* y) {
  for (int64_t i = 0; i < h; ++i) {
    float v = decode(in_type, load_code(in_type, in, i));
    if (res) {
      v = add_rn(v, decode(in_type, load_code(in_type, res, i)));
      store_code(in_type, res, i, encode<false>(in_type, v));
      v = round_to(in_type, v);
    }
    x[i] = v;
  }
  if (!rms) {
    for (int64_t i = 0; i < h; ++i) y[i] = x[i];
    return;
  }
  const float inv = inv_rms(sum_squares(x, h), length_f32(h), eps);
  for (int64_t i = 0; i < h; ++i)
    y[i] = norm_apply(x[i], inv, add_rn(decode(w_type, load_code(w_type, weight, i)), weight_offset));
}

void rmsnorm_quant_rows(const RmsnormQuantCall& c, int64_t row_begin, int64_t row_end) {
  const int64_t h = c.h;
  std::vector<float> x(static_cast<size_t>(h)), y(static_cast<size_t>(h));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const char* in = row_ptr(c.lead, c.in, r);
    char* res = c.res.data ? row_ptr(c.lead, c.res, r) : nullptr;
    char* out = row_ptr(c.lead, c.out, r);
    normalized_row(c.in_type, in, res, h, c.norm == FUSEDNORM_NORM_RMS, c.w_type, c.weight, c.weight_offset, c.eps,
                   x.data(), y.data());
    for (int64_t g0 = 0; g0 < h; g0 += c.group) {
      float rcp;
      if (c.mode == FUSEDNORM_SCALE_STATIC) {
        rcp = div_rn(1.0f, static_scale_value(c));
      } else {
        uint32_t amax = 0;
        for (int64_t i = g0; i < g0 + c.group; ++i) amax = abs_bits(y[size_t(i)]) > amax ? abs_bits(y[size_t(i)]) : amax;
        const DynamicScale s = dynamic_scale(amax, c.qmax, c.scale_ub, c.min_scale, c.scale_type);
        store_scale(c, r, g0 / c.group, s.stored);
        rcp = s.r;
      }
      for (int64_t i = g0; i < g0 + c.group; ++i)
        store_code(c.out_type, out, i, encode<false>(c.out_type, clamp_sym(mul_rn(y[size_t(i)], rcp), c.qclamp)));
    }
  }
}

fusednorm_status cast(const DLTensor* src, DLTensor* dst, const fusednorm_cast_options* options) {
  CastCall call;
  CallDevice dev;
  const fusednorm_status st = validate_cast(src, dst, options, &call, &dev);
  if (st != FUSEDNORM_SUCCESS) return st;
  if (dev.type != kDLCPU) return fail(FUSEDNORM_UNSUPPORTED, "the reference runs on CPU tensors only");
  if (call.cols > 0) cast_rows(call, 0, call.lead.rows);  // empty rows address nothing (as cpu_cast)
  return FUSEDNORM_SUCCESS;
}

fusednorm_status rmsnorm_quant(const DLTensor* input, DLTensor* residual, const DLTensor* weight,
                               DLTensor* output, DLTensor* scales,
                               const fusednorm_rmsnorm_quant_options* options) {
  RmsnormQuantCall call;
  CallDevice dev;
  const fusednorm_status st =
      validate_rmsnorm_quant(input, residual, weight, output, scales, options, &call, &dev);
  if (st != FUSEDNORM_SUCCESS) return st;
  if (dev.type != kDLCPU) return fail(FUSEDNORM_UNSUPPORTED, "the reference runs on CPU tensors only");
  if (call.h > 0) rmsnorm_quant_rows(call, 0, call.lead.rows);
  return FUSEDNORM_SUCCESS;
}

}  // namespace reference
}  // namespace fusednorm
