// Validated, backend-neutral descriptions of one call: plain structs (host and device) with
// 64-bit sizes and byte strides. src/api.cc builds them; every backend consumes them.
#pragma once

#include <stdint.h>
#include <string.h>

#include "core/dtype.h"
#include "math/quant_math.h"

namespace fusednorm {

// Leading dimensions (all but the last) of the tensors of a call; rows = their product.
constexpr int kMaxLeadDims = 8;

struct LeadShape {
  int32_t ndim = 0;
  int64_t dims[kMaxLeadDims] = {};
  int64_t rows = 1;
};

// A tensor seen as rows of its last dimension: the byte stride of each leading dimension.
struct RowView {
  char* data = nullptr;
  int64_t strides[kMaxLeadDims] = {};  // bytes
};

FN_HD int64_t row_offset(const LeadShape& shape, const RowView& view, int64_t row) {
  // row < shape.rows, so the outermost index needs no division (and 2-D tensors none at all:
  // 64-bit division is a long subroutine on GPUs).
  int64_t off = 0;
  for (int32_t d = shape.ndim - 1; d > 0; --d) {
    const int64_t n = shape.dims[d];
    off += (row % n) * view.strides[d];
    row /= n;
  }
  return shape.ndim > 0 ? off + row * view.strides[0] : off;
}
FN_HD char* row_ptr(const LeadShape& shape, const RowView& view, int64_t row) {
  return view.data + row_offset(shape, view, row);
}

struct CastCall {
  LeadShape lead;
  int64_t cols = 0;  // last dimension, elements
  DType src_type = DType::kInvalid, dst_type = DType::kInvalid;
  RowView src, dst;
  int32_t e8m0_up = 0;
};

struct RmsnormQuantCall {
  LeadShape lead;
  int64_t h = 0;
  DType in_type = DType::kInvalid;   // input and residual
  DType w_type = DType::kInvalid;    // weight (kInvalid: no weight, norm = NONE)
  DType out_type = DType::kInvalid;  // FP8 format or int8
  RowView in, res, out;              // res.data == nullptr: no residual
  const char* weight = nullptr;
  int32_t norm = FUSEDNORM_NORM_RMS;
  int32_t mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
  int32_t packed = 0;                // scales at the end of each output row
  int64_t group = 0;                 // elements per scale (h for per-row)
  float eps = 0, weight_offset = 0, scale_ub = 0, min_scale = 0;
  float qmax = 0;                    // divisor of the dynamic scale
  float qclamp = 0;                  // |q| clamp before encoding: qmax if the caller set it, +inf
  const float* static_scale = nullptr;
  math::ScaleType scale_type = math::ScaleType::kF32;
  RowView scales;                    // dynamic, tensor placement: row view of the scales
  int64_t scale_col_stride = 0;      // bytes between the scales of consecutive groups
};

// The static scale's value (STATIC mode), read at any alignment: the caller's f32 scalar need not
// be 4-byte aligned, so it is never dereferenced as a float. (The GPU kernel reads it the same way.)
inline float static_scale_value(const RmsnormQuantCall& c) {
  float s;
  memcpy(&s, c.static_scale, sizeof s);
  return s;
}

}  // namespace fusednorm
