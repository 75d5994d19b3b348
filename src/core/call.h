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

// rmsnorm_fp4 (fusednorm_rmsnorm_fp4) and its inverse (fusednorm_dequantize_fp4).
struct RmsnormFp4Call {
  LeadShape lead;
  int64_t h = 0;
  int64_t block = 0;                 // 16 (NVFP4) or 32 (MXFP4)
  DType in_type = DType::kInvalid;   // input and residual
  DType w_type = DType::kInvalid;    // weight (kInvalid: norm = NONE)
  RowView in, res, out;              // out: f4e2m1 rows (h / 2 bytes); res.data == nullptr: none
  const char* weight = nullptr;
  int32_t norm = FUSEDNORM_NORM_RMS;
  int32_t format = FUSEDNORM_FP4_NVFP4;
  int32_t swizzled = 0;
  float eps = 0, weight_offset = 0;
  const char* global_scale = nullptr;  // f32, any alignment; nullptr: gs = 1
  RowView scales;                    // row-major: a row's scale bytes; swizzled: data only
  int64_t swizzle_tiles = 0;         // swizzled: kt = ceil((h / block) / 4)
  int64_t swizzle_rows = 0;          // swizzled: rows padded to 128
};

struct DequantizeFp4Call {
  LeadShape lead;
  int64_t h = 0;
  int64_t block = 0;
  DType out_type = DType::kInvalid;  // f32, f16 or bf16
  RowView codes, out;
  int32_t format = FUSEDNORM_FP4_NVFP4;
  int32_t swizzled = 0;
  const char* global_scale = nullptr;
  RowView scales;
  int64_t swizzle_tiles = 0;
};

// Address of the scale of (row, block k): row-major through the row view, or swizzled.
FN_HD char* fp4_scale_ptr(const LeadShape& lead, const RowView& scales, int32_t swizzled, int64_t tiles, int64_t row,
                          int64_t k) {
  return swizzled ? scales.data + math::fp4_swizzled_offset(row, k, tiles) : row_ptr(lead, scales, row) + k;
}

// The global scale gs (1 when there is none), read at any alignment.
inline float global_scale_value(const char* gs) {
  float v = 1.0f;
  if (gs != nullptr) memcpy(&v, gs, sizeof v);
  return v;
}
// ---------------------------------------------------------------- qk_rmsnorm
// One call struct for the three qk_rmsnorm entry points (stats, apply, fused): each side (q, k)
// is a row of `width` elements in groups of `group` (one RMS a group: the whole row, or a head).
enum class QkKind : int32_t { kStats = 0, kApply = 1, kFused = 2 };

struct QkSide {
  int64_t width = 0;              // local last dimension, elements
  int64_t group = 0;              // elements per RMS group: width, or head_dim (fused per head)
  RowView in, out;                // out.data == nullptr for stats
  const char* weight = nullptr;   // [group] (apply: [width]); nullptr for stats
  DType w_type = DType::kInvalid;
  float divisor = 0;              // var = ss / divisor: f32(N_global) (apply, SUMS) or f32(group)
};

struct QkRmsnormCall {
  QkKind kind = QkKind::kStats;
  int32_t mean_squares = 0;       // apply: the stats are mean squares (var = stat)
  LeadShape lead;
  DType in_type = DType::kInvalid;   // q and k
  DType out_type = DType::kInvalid;  // the outputs: in_type, or f8e4m3fn / f8e4m3fnuz
  const char* out_scales = nullptr;  // FP8 outputs: [2] f32 dequant scales (q's, k's), any alignment
  QkSide q, k;
  RowView stats;                  // [..., 2] f32: stat j of row r at row_ptr(lead, stats, r) + 4 j
  float eps = 0, weight_offset = 0;
};

// inv = 1 / sqrt(var + eps) of side j (0: q, 1: k) from its stat (docs/numerics.md §5). rcp:
// math::pow2_rcp(s.divisor), or 0 for the division (the same value: math::inv_rms_rcp).
FN_HD float qk_inv_rms(const QkRmsnormCall& c, const QkSide& s, float stat, float rcp = 0.0f) {
  return c.mean_squares ? math::inv_rms_of_mean(stat, c.eps) : math::inv_rms_rcp(stat, s.divisor, rcp, c.eps);
}
// FP8 outputs: the multiplier 1 / s of side j (host code; the GPU kernel reads the scale itself).
inline float qk_out_rcp(const QkRmsnormCall& c, int j) {
  float s;
  memcpy(&s, c.out_scales + 4 * j, sizeof s);
  return math::div_rn(1.0f, s);
}
// ---------------------------------------------------------------- end of qk_rmsnorm

}  // namespace fusednorm
