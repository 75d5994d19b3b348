// rmsnorm_fp4's and dequantize_fp4's validation: options, every tensor on its own, shapes against
// each other, then overlaps; fills RmsnormFp4Call / DequantizeFp4Call (core/call.h).
#include <inttypes.h>
#include <math.h>

#include "core/validate_util.h"

namespace fusednorm {

namespace {

int64_t block_of(int32_t format) { return format == FUSEDNORM_FP4_NVFP4 ? math::kNvfp4Block : math::kMxfp4Block; }
const char* format_name(int32_t format) { return format == FUSEDNORM_FP4_NVFP4 ? "NVFP4" : "MXFP4"; }
DType scale_dtype_of(int32_t format) { return format == FUSEDNORM_FP4_NVFP4 ? DType::k_f8e4m3fn : DType::kE8M0; }

bool is_uint8(const DLTensor* t) { return t->dtype.code == kDLUInt && t->dtype.bits == 8 && t->dtype.lanes == 1; }

// A uint8 view of FP4 codes ([..., H/2] bytes) as the f4e2m1 tensor it holds ([..., H] elements,
// every stride doubled); other tensors pass through. `view` borrows shape/strides storage.
struct Fp4View {
  DLTensor t;
  int64_t shape[1 + kMaxLeadDims];
  int64_t strides[1 + kMaxLeadDims];
  const char* name;
};
fusednorm_status fp4_view(const DLTensor* t, const char* name, const char* view_name, Fp4View* v) {
  v->name = name;
  v->t = *t;
  if (!is_uint8(t) || t->ndim < 1 || t->ndim > 1 + kMaxLeadDims || t->shape == nullptr) {
    return FUSEDNORM_SUCCESS;
  }
  v->name = view_name;
  v->t.dtype = dl_from_dtype(DType::k_f4e2m1);
  for (int i = 0; i < t->ndim; ++i) {
    v->shape[i] = t->shape[i];
    if (t->strides != nullptr) v->strides[i] = t->strides[i];
  }
  const int last = t->ndim - 1;
  if (t->shape[last] > INT64_MAX / 2)
    return FN_FAIL_INVALID("%s.shape[%d] = %" PRId64 ": too many FP4 elements", name, last, t->shape[last]);
  v->shape[last] *= 2;
  v->t.shape = v->shape;
  if (t->strides != nullptr) {
    for (int i = 0; i < last; ++i) {
      if (t->strides[i] > INT64_MAX / 2 || t->strides[i] < INT64_MIN / 2)
        return FN_FAIL_INVALID("%s.strides[%d] = %" PRId64 ": too large", name, i, t->strides[i]);
      v->strides[i] = t->strides[i] * 2;
    }
    v->t.strides = v->strides;
  }
  return FUSEDNORM_SUCCESS;
}

// The scales: a uint8 tensor is read as the format's scale dtype.
void scale_view(const DLTensor* t, int32_t format, Fp4View* v) {
  v->t = *t;
  v->name = "scales";
  if (is_uint8(t)) v->t.dtype = dl_from_dtype(scale_dtype_of(format));
}

template <class Options>
fusednorm_status fp4_layout_options(const Options& o) {
  if (o.format != FUSEDNORM_FP4_NVFP4 && o.format != FUSEDNORM_FP4_MXFP4)
    return FN_FAIL_INVALID("options->format = %d: must be FUSEDNORM_FP4_NVFP4 (0) or FUSEDNORM_FP4_MXFP4 (1)",
                           o.format);
  if (o.scale_layout != FUSEDNORM_FP4_SCALES_ROW_MAJOR && o.scale_layout != FUSEDNORM_FP4_SCALES_SWIZZLED)
    return FN_FAIL_INVALID("options->scale_layout = %d: must be ROW_MAJOR (0) or SWIZZLED (1)", o.scale_layout);
  return FUSEDNORM_SUCCESS;
}

// Shared by both operations: the FP4 codes tensor (output of rmsnorm_fp4, input of dequantize)
// against `ref` ([..., H]), the scales in their layout, the global scale. Fills the fields the
// two calls share.
struct Fp4Tensors {
  RowView codes, scales;
  const char* global_scale = nullptr;
  int64_t swizzle_tiles = 0, swizzle_rows = 0;
};
fusednorm_status check_fp4_tensors(const DLTensor* ref, const char* ref_name, int64_t h, const LeadShape& lead,
                                   const Fp4View& codes, bool codes_written, const Fp4View& scales,
                                   bool scales_written, const DLTensor* global_scale, int32_t format,
                                   int32_t layout, Fp4Tensors* out) {
  const int64_t block = block_of(format);
  if (h % block != 0)
    return FN_FAIL_INVALID("%s H = %" PRId64 " is not a multiple of the %s block (%" PRId64 ")", ref_name, h,
                           format_name(format), block);
  const DLTensor* c = &codes.t;
  DType ct;
  FN_TRY(check_tensor(c, codes.name, &ct));
  FN_TRY(check_same_device(ref, ref_name, c, codes.name));
  if (ct != DType::k_f4e2m1)
    return fail(FUSEDNORM_UNSUPPORTED, "%s.dtype = %s: must be f4e2m1 (or its uint8 view, two codes a byte)",
                codes.name, dtype_name(ct));
  FN_TRY(check_lead(c, codes.name, ref, ref_name));
  if (c->shape[c->ndim - 1] != h)
    return FN_FAIL_INVALID("%s has shape %s but must end in %" PRId64 " FP4 elements (%" PRId64 " bytes), as %s %s",
                           codes.name, shape_string(c).c_str(), h, h / 2, ref_name, shape_string(ref).c_str());
  FN_TRY(check_data(c, codes.name));
  FN_TRY(make_row_view(c, codes.name, 4, &out->codes, codes_written));

  const int64_t blocks = h / block;
  const DLTensor* s = &scales.t;
  DType st;
  FN_TRY(check_tensor(s, scales.name, &st));
  FN_TRY(check_same_device(ref, ref_name, s, scales.name));
  if (st != scale_dtype_of(format))
    return fail(FUSEDNORM_UNSUPPORTED, "scales.dtype = %s: %s scales are %s (or uint8)", dtype_name(st),
                format_name(format), dtype_name(scale_dtype_of(format)));
  FN_TRY(check_data(s, scales.name));
  if (layout == FUSEDNORM_FP4_SCALES_ROW_MAJOR) {
    FN_TRY(check_lead(s, scales.name, ref, ref_name));
    if (s->shape[s->ndim - 1] != blocks)
      return FN_FAIL_INVALID("scales has shape %s but must end in %" PRId64 " (H / block = %" PRId64 " / %" PRId64 ")",
                             shape_string(s).c_str(), blocks, h, block);
    FN_TRY(make_row_view(s, scales.name, 8, &out->scales, scales_written));
  } else {
    out->swizzle_tiles = math::fp4_swizzled_tiles(blocks);
    out->swizzle_rows = math::fp4_swizzled_rows(lead.rows);
    int64_t need = 0;
    if (__builtin_mul_overflow(out->swizzle_rows, out->swizzle_tiles * 4, &need))
      return FN_FAIL_INVALID("%" PRId64 " rows of H = %" PRId64 ": the swizzled scales overflow 64 bits", lead.rows, h);
    if (numel(s) != need)
      return FN_FAIL_INVALID("scales has shape %s (%" PRId64 " elements) but SWIZZLED %s scales of %" PRId64
                             " rows x H = %" PRId64 " take exactly %" PRId64 " (%" PRId64 " x %" PRId64
                             ", see fusednorm_fp4_swizzled_size)",
                             shape_string(s).c_str(), numel(s), format_name(format), lead.rows, h, need,
                             out->swizzle_rows, out->swizzle_tiles * 4);
    // Compact: every stride is the product of the later dimensions (size-1 dimensions are free).
    int64_t expect = 1;
    for (int i = s->ndim - 1; i >= 0; --i) {
      int64_t stride = 0;
      elem_stride(s, i, &stride);
      if (s->shape[i] > 1 && stride != expect)
        return fail(FUSEDNORM_UNSUPPORTED, "scales: shape %s with strides %s: SWIZZLED scales must be compact",
                    shape_string(s).c_str(), strides_string(s).c_str());
      expect *= s->shape[i];
    }
    RowView sv;
    FN_TRY(make_row_view(s, scales.name, 8, &sv, scales_written));
    out->scales.data = sv.data;
  }

  if (global_scale != nullptr) {
    if (format != FUSEDNORM_FP4_NVFP4)
      return FN_FAIL_INVALID("global_scale must be NULL for MXFP4 (its scales are powers of two alone)");
    DType gt;
    FN_TRY(check_tensor(global_scale, "global_scale", &gt));
    FN_TRY(check_same_device(ref, ref_name, global_scale, "global_scale"));
    if (gt != DType::kF32)
      return fail(FUSEDNORM_UNSUPPORTED, "global_scale.dtype = %s: must be f32", dtype_name(gt));
    if (numel(global_scale) != 1)
      return FN_FAIL_INVALID("global_scale has shape %s: must have exactly one element",
                             shape_string(global_scale).c_str());
    FN_TRY(check_data(global_scale, "global_scale"));
    RowView gv;
    FN_TRY(make_row_view(global_scale, "global_scale", 32, &gv));
    out->global_scale = gv.data;
  }
  return FUSEDNORM_SUCCESS;
}

}  // namespace

fusednorm_status validate_rmsnorm_fp4(const DLTensor* input, const DLTensor* residual, const DLTensor* weight,
                                      const DLTensor* output, const DLTensor* scales,
                                      const DLTensor* global_scale, const fusednorm_rmsnorm_fp4_options* options,
                                      RmsnormFp4Call* call, CallDevice* device) {
  fusednorm_rmsnorm_fp4_options o;
  FN_TRY(FN_READ_OPTIONS(options, fusednorm_rmsnorm_fp4_options_init, &o));
  if (o.norm != FUSEDNORM_NORM_RMS && o.norm != FUSEDNORM_NORM_NONE)
    return FN_FAIL_INVALID("options->norm = %d: must be FUSEDNORM_NORM_RMS (0) or FUSEDNORM_NORM_NONE (1)", o.norm);
  FN_TRY(fp4_layout_options(o));
  if (!(o.eps >= 0.0f) || isinf(o.eps))
    return FN_FAIL_INVALID("options->eps = %g: must be finite and >= 0", double(o.eps));
  if (!isfinite(o.weight_offset))
    return FN_FAIL_INVALID("options->weight_offset = %g: must be finite", double(o.weight_offset));

  NormInputs ni;
  FN_TRY(check_norm_inputs(input, residual, weight, o.norm == FUSEDNORM_NORM_RMS, device, &ni));
  if (output == nullptr) return FN_FAIL_INVALID("output is NULL");
  if (scales == nullptr) return FN_FAIL_INVALID("scales is NULL");
  Fp4View out_v, sc_v;
  FN_TRY(fp4_view(output, "output", "output (uint8 view of f4e2m1)", &out_v));
  scale_view(scales, o.format, &sc_v);
  Fp4Tensors ft;
  FN_TRY(check_fp4_tensors(input, "input", ni.h, ni.lead, out_v, true, sc_v, true, global_scale, o.format,
                           o.scale_layout, &ft));

  call->lead = ni.lead;
  call->h = ni.h;
  call->block = block_of(o.format);
  call->in_type = ni.in_type;
  call->w_type = ni.w_type;
  call->in = ni.in;
  call->res = ni.res;
  call->out = ft.codes;
  call->weight = ni.weight;
  call->norm = o.norm;
  call->format = o.format;
  call->swizzled = o.scale_layout == FUSEDNORM_FP4_SCALES_SWIZZLED;
  call->eps = o.eps;
  call->weight_offset = o.weight_offset;
  call->global_scale = ft.global_scale;
  call->scales = ft.scales;
  call->swizzle_tiles = ft.swizzle_tiles;
  call->swizzle_rows = ft.swizzle_rows;

  // Aliasing: written tensors hold no element twice; no two tensors share a byte.
  if (residual != nullptr) FN_TRY(check_rows_disjoint(residual, "residual"));
  FN_TRY(check_rows_disjoint(&out_v.t, out_v.name));
  FN_TRY(check_rows_disjoint(&sc_v.t, "scales"));
  ByteRange r[6];
  int n = 0;
  FN_TRY(byte_range(input, "input", dtype_bits(call->in_type), &r[n++]));
  if (residual != nullptr) FN_TRY(byte_range(residual, "residual", dtype_bits(call->in_type), &r[n++]));
  if (call->norm == FUSEDNORM_NORM_RMS) FN_TRY(byte_range(weight, "weight", dtype_bits(call->w_type), &r[n++]));
  FN_TRY(byte_range(&out_v.t, out_v.name, 4, &r[n++]));
  FN_TRY(byte_range(&sc_v.t, "scales", 8, &r[n++]));
  if (global_scale != nullptr) FN_TRY(byte_range(global_scale, "global_scale", 32, &r[n++]));
  return check_no_overlap(r, n);
}

fusednorm_status validate_dequantize_fp4(const DLTensor* codes, const DLTensor* scales, const DLTensor* global_scale,
                                         const DLTensor* output, const fusednorm_dequantize_fp4_options* options,
                                         DequantizeFp4Call* call, CallDevice* device) {
  fusednorm_dequantize_fp4_options o;
  FN_TRY(FN_READ_OPTIONS(options, fusednorm_dequantize_fp4_options_init, &o));
  FN_TRY(fp4_layout_options(o));
  // The output carries the shape [..., H].
  FN_TRY(check_tensor(output, "output", &call->out_type));
  FN_TRY(check_device(output, "output", device));
  if (!is_input_dtype(call->out_type))
    return fail(FUSEDNORM_UNSUPPORTED, "output.dtype = %s: must be f32, f16 or bf16", dtype_name(call->out_type));
  call->h = output->shape[output->ndim - 1];
  if (call->h == 0)
    return FN_FAIL_INVALID("output.shape[%d] = 0 (output shape %s): H (the last dimension) must be >= 1",
                           output->ndim - 1, shape_string(output).c_str());
  FN_TRY(make_lead(output, "output", &call->lead));
  FN_TRY(check_data(output, "output"));
  FN_TRY(make_row_view(output, "output", dtype_bits(call->out_type), &call->out, /*written=*/true));

  if (codes == nullptr) return FN_FAIL_INVALID("codes is NULL");
  if (scales == nullptr) return FN_FAIL_INVALID("scales is NULL");
  Fp4View c_v, sc_v;
  FN_TRY(fp4_view(codes, "codes", "codes (uint8 view of f4e2m1)", &c_v));
  scale_view(scales, o.format, &sc_v);
  Fp4Tensors ft;
  FN_TRY(check_fp4_tensors(output, "output", call->h, call->lead, c_v, false, sc_v, false, global_scale, o.format,
                           o.scale_layout, &ft));
  call->block = block_of(o.format);
  call->codes = ft.codes;
  call->format = o.format;
  call->swizzled = o.scale_layout == FUSEDNORM_FP4_SCALES_SWIZZLED;
  call->global_scale = ft.global_scale;
  call->scales = ft.scales;
  call->swizzle_tiles = ft.swizzle_tiles;

  FN_TRY(check_rows_disjoint(output, "output"));
  ByteRange r[4];
  int n = 0;
  FN_TRY(byte_range(&c_v.t, c_v.name, 4, &r[n++]));
  FN_TRY(byte_range(&sc_v.t, "scales", 8, &r[n++]));
  if (global_scale != nullptr) FN_TRY(byte_range(global_scale, "global_scale", 32, &r[n++]));
  FN_TRY(byte_range(output, "output", dtype_bits(call->out_type), &r[n++]));
  return check_no_overlap(r, n);
}

}  // namespace fusednorm

extern "C" fusednorm_status fusednorm_fp4_swizzled_size(int64_t rows, int64_t h, int32_t format, int64_t* bytes) {
  using namespace fusednorm;
  if (bytes == nullptr) return FN_FAIL_INVALID("bytes is NULL");
  if (format != FUSEDNORM_FP4_NVFP4 && format != FUSEDNORM_FP4_MXFP4)
    return FN_FAIL_INVALID("format = %d: must be FUSEDNORM_FP4_NVFP4 (0) or FUSEDNORM_FP4_MXFP4 (1)", format);
  if (rows < 0 || h < 0) return FN_FAIL_INVALID("rows = %" PRId64 ", h = %" PRId64 ": must be >= 0", rows, h);
  const int64_t block = block_of(format);
  if (h % block != 0)
    return FN_FAIL_INVALID("h = %" PRId64 " is not a multiple of the %s block (%" PRId64 ")", h, format_name(format),
                           block);
  if (rows > INT64_MAX - 127)
    return FN_FAIL_INVALID("rows = %" PRId64 ": the swizzled scales overflow 64 bits", rows);
  if (__builtin_mul_overflow(math::fp4_swizzled_rows(rows), math::fp4_swizzled_tiles(h / block) * 4, bytes))
    return FN_FAIL_INVALID("rows = %" PRId64 ", h = %" PRId64 ": the swizzled scales overflow 64 bits", rows, h);
  return FUSEDNORM_SUCCESS;
}
