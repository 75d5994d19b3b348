// rmsnorm_quant's validation: options, every tensor on its own, shapes against each other, then
// overlaps; fills RmsnormQuantCall (core/call.h).
#include <inttypes.h>
#include <math.h>

#include "core/validate_util.h"

namespace fusednorm {

namespace {

// Options and every tensor on its own (shape, dtype, device, strides, 64-bit spans).
fusednorm_status rmsnorm_quant_args(const DLTensor* input, const DLTensor* residual, const DLTensor* weight,
                                    const DLTensor* output, const DLTensor* scales,
                                    const fusednorm_rmsnorm_quant_options* options, RmsnormQuantCall* call,
                                    CallDevice* device) {
  fusednorm_rmsnorm_quant_options o;
  FN_TRY(FN_READ_OPTIONS(options, fusednorm_rmsnorm_quant_options_init, &o));
  // Options.
  if (o.norm != FUSEDNORM_NORM_RMS && o.norm != FUSEDNORM_NORM_NONE)
    return FN_FAIL_INVALID("options->norm = %d: must be FUSEDNORM_NORM_RMS (0) or FUSEDNORM_NORM_NONE (1)", o.norm);
  if (o.scale_mode < FUSEDNORM_SCALE_STATIC || o.scale_mode > FUSEDNORM_SCALE_DYNAMIC_GROUP)
    return FN_FAIL_INVALID("options->scale_mode = %d: must be STATIC (0), DYNAMIC_ROW (1) or DYNAMIC_GROUP (2)",
                           o.scale_mode);
  if (o.scale_placement != FUSEDNORM_SCALES_TENSOR && o.scale_placement != FUSEDNORM_SCALES_PACKED_ROW_END)
    return FN_FAIL_INVALID("options->scale_placement = %d: must be TENSOR (0) or PACKED_ROW_END (1)",
                           o.scale_placement);
  if (!(o.eps >= 0.0f) || isinf(o.eps))
    return FN_FAIL_INVALID("options->eps = %g: must be finite and >= 0", double(o.eps));
  if (!isfinite(o.weight_offset))
    return FN_FAIL_INVALID("options->weight_offset = %g: must be finite", double(o.weight_offset));
  if (!(o.scale_ub > 0.0f))
    return FN_FAIL_INVALID("options->scale_ub = %g: must be > 0 (+inf for no bound)", double(o.scale_ub));
  if (!(o.min_scale >= 0.0f) || isinf(o.min_scale))
    return FN_FAIL_INVALID("options->min_scale = %g: must be finite and >= 0", double(o.min_scale));
  if (o.scale_mode == FUSEDNORM_SCALE_DYNAMIC_GROUP && !is_group_size(o.group_size))
    return fail(FUSEDNORM_UNSUPPORTED, "options->group_size = %" PRId64 ": DYNAMIC_GROUP supports %s", o.group_size,
                group_sizes_string().c_str());
  const bool packed = o.scale_placement == FUSEDNORM_SCALES_PACKED_ROW_END;
  if (packed && o.scale_mode != FUSEDNORM_SCALE_DYNAMIC_ROW)
    return fail(FUSEDNORM_UNSUPPORTED, "options->scale_placement = PACKED_ROW_END needs scale_mode DYNAMIC_ROW, not %d",
                o.scale_mode);

  // Tensors.
  NormInputs ni;
  FN_TRY(check_norm_inputs(input, residual, weight, o.norm == FUSEDNORM_NORM_RMS, device, &ni));
  call->lead = ni.lead;
  call->h = ni.h;
  call->in_type = ni.in_type;
  call->w_type = ni.w_type;
  call->in = ni.in;
  call->res = ni.res;
  call->weight = ni.weight;

  FN_TRY(check_tensor(output, "output", &call->out_type));
  FN_TRY(check_same_device(input, "input", output, "output"));
  if (!is_quant_dtype(call->out_type))
    return fail(FUSEDNORM_UNSUPPORTED, "output.dtype = %s: must be an FP8 format or int8",
                dtype_name(call->out_type));
  FN_TRY(check_lead(output, "output", input, "input"));
  const int64_t out_cols = call->h + (packed ? 4 : 0);
  if (output->shape[output->ndim - 1] != out_cols)
    return FN_FAIL_INVALID("output has shape %s but must end in %" PRId64 " (H = %" PRId64 "%s)",
                           shape_string(output).c_str(), out_cols, call->h,
                           packed ? " + 4 bytes of packed f32 scale" : "");
  FN_TRY(check_data(output, "output"));
  FN_TRY(make_row_view(output, "output", 8, &call->out, /*written=*/true));

  const float fmt_max = quant_max(call->out_type);
  if (!(o.qmax >= 0.0f) || o.qmax > fmt_max)
    return FN_FAIL_INVALID("options->qmax = %g: must be 0 (format default) or in (0, %g] for %s", double(o.qmax),
                           double(fmt_max), dtype_name(call->out_type));
  call->qmax = o.qmax > 0.0f ? o.qmax : fmt_max;
  call->qclamp = o.qmax > 0.0f ? o.qmax : INFINITY;

  call->norm = o.norm;
  call->mode = o.scale_mode;
  call->packed = packed;
  call->group = o.scale_mode == FUSEDNORM_SCALE_DYNAMIC_GROUP ? o.group_size : call->h;
  call->eps = o.eps;
  call->weight_offset = o.weight_offset;
  call->scale_ub = o.scale_ub;
  call->min_scale = o.min_scale;
  if (o.scale_mode == FUSEDNORM_SCALE_DYNAMIC_GROUP && call->h % o.group_size != 0)
    return FN_FAIL_INVALID("input H = %" PRId64 " is not a multiple of options->group_size = %" PRId64, call->h,
                           o.group_size);

  if (packed) {
    if (scales != nullptr)
      return FN_FAIL_INVALID("scales must be NULL with PACKED_ROW_END (the scale is stored in the output row)");
    return FUSEDNORM_SUCCESS;
  }
  DType st;
  if (scales == nullptr) return FN_FAIL_INVALID("scales is NULL but scale_mode %d needs it", o.scale_mode);
  FN_TRY(check_tensor(scales, "scales", &st, /*contiguous_last=*/false));
  FN_TRY(check_same_device(input, "input", scales, "scales"));
  FN_TRY(check_data(scales, "scales"));
  if (o.scale_mode == FUSEDNORM_SCALE_STATIC) {
    if (st != DType::kF32)
      return fail(FUSEDNORM_UNSUPPORTED, "scales.dtype = %s: a static scale is f32", dtype_name(st));
    if (numel(scales) != 1)
      return FN_FAIL_INVALID("scales has shape %s: a static scale has exactly one element",
                             shape_string(scales).c_str());
    RowView sv;
    FN_TRY(make_row_view(scales, "scales", 32, &sv));
    call->static_scale = reinterpret_cast<const float*>(sv.data);
    return FUSEDNORM_SUCCESS;
  }
  if (!scale_type_of(st, &call->scale_type))
    return fail(FUSEDNORM_UNSUPPORTED, "scales.dtype = %s: dynamic scales are f32, f16, bf16 or e8m0",
                dtype_name(st));
  const int64_t groups = call->h / call->group;
  FN_TRY(check_lead(scales, "scales", input, "input"));
  if (scales->shape[scales->ndim - 1] != groups)
    return FN_FAIL_INVALID("scales has shape %s but must end in %" PRId64 " (H / group = %" PRId64 " / %" PRId64 ")",
                           shape_string(scales).c_str(), groups, call->h, call->group);
  // Scales may be column-major: the last dimension's stride is free (unlike other tensors).
  DLTensor s = *scales;
  int64_t strides[1 + kMaxLeadDims];
  for (int i = 0; i < s.ndim; ++i)
    if (!elem_stride(scales, i, &strides[i]))
      return FN_FAIL_INVALID("scales: shape %s has more elements than 64 bits can count", shape_string(scales).c_str());
  if (strides[s.ndim - 1] < 0)
    return fail(FUSEDNORM_UNSUPPORTED, "scales.strides[%d] = %" PRId64 ": negative strides are not supported",
                s.ndim - 1, strides[s.ndim - 1]);
  s.strides = strides;
  FN_TRY(make_row_view(&s, "scales", dtype_bits(st), &call->scales, /*written=*/true));
  if (groups > 1 && strides[s.ndim - 1] == 0)
    return FN_FAIL_INVALID("scales.strides[%d] = 0: the %" PRId64 " scales of a row would overlap", s.ndim - 1, groups);
  // With one group the last stride addresses nothing (and the span check did not bound it).
  call->scale_col_stride = groups > 1 ? strides[s.ndim - 1] * (dtype_bits(st) / 8) : 0;
  return FUSEDNORM_SUCCESS;
}

}  // namespace

fusednorm_status validate_rmsnorm_quant(const DLTensor* input, const DLTensor* residual,
                                        const DLTensor* weight, const DLTensor* output,
                                        const DLTensor* scales,
                                        const fusednorm_rmsnorm_quant_options* options,
                                        RmsnormQuantCall* call, CallDevice* device) {
  FN_TRY(rmsnorm_quant_args(input, residual, weight, output, scales, options, call, device));
  // Aliasing, after every per-tensor check and before anything is written. Written tensors: no
  // element twice. Every tensor the call touches (weight: norm RMS only; scales: TENSOR placement,
  // the static scale included): no two share a byte. The residual is one tensor, read and written
  // in place.
  const bool has_scales = !call->packed;
  if (residual != nullptr) FN_TRY(check_rows_disjoint(residual, "residual"));
  FN_TRY(check_rows_disjoint(output, "output"));
  if (has_scales && call->mode != FUSEDNORM_SCALE_STATIC) FN_TRY(check_rows_disjoint(scales, "scales"));
  ByteRange r[5];
  int n = 0;
  FN_TRY(byte_range(input, "input", dtype_bits(call->in_type), &r[n++]));
  if (residual != nullptr) FN_TRY(byte_range(residual, "residual", dtype_bits(call->in_type), &r[n++]));
  if (call->norm == FUSEDNORM_NORM_RMS) FN_TRY(byte_range(weight, "weight", dtype_bits(call->w_type), &r[n++]));
  FN_TRY(byte_range(output, "output", dtype_bits(call->out_type), &r[n++]));
  if (has_scales) FN_TRY(byte_range(scales, "scales", dtype_bits(dtype_from_dl(scales->dtype)), &r[n++]));
  return check_no_overlap(r, n);
}

}  // namespace fusednorm
