#include "core/validate.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include <string>

#include "core/error.h"

namespace fusednorm {

float quant_max(DType t) {
  switch (t) {
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name:         \
    return math::float_of(math::name::kMaxBits);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kI8:
      return 127.0f;
    default:
      return 0.0f;
  }
}

namespace {

#define FN_FAIL_INVALID(...) fail(FUSEDNORM_INVALID_ARGUMENT, __VA_ARGS__)

std::string shape_string(const DLTensor* t) {
  std::string s = "[";
  for (int i = 0; i < t->ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(t->shape[i]);
  }
  return s + "]";
}

const char* device_name(int32_t type) {
  switch (type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLROCM: return "rocm";
    default: return "unknown";
  }
}

// What every tensor argument must satisfy; fills the element type.
fusednorm_status check_tensor(const DLTensor* t, const char* name, DType* type,
                              bool contiguous_last = true) {
  if (t == nullptr) return FN_FAIL_INVALID("%s is NULL", name);
  if (t->ndim < 1 || t->ndim > 1 + kMaxLeadDims)
    return fail(t->ndim < 1 ? FUSEDNORM_INVALID_ARGUMENT : FUSEDNORM_UNSUPPORTED,
                "%s.ndim = %d: must be 1..%d", name, t->ndim, 1 + kMaxLeadDims);
  if (t->shape == nullptr) return FN_FAIL_INVALID("%s.shape is NULL", name);
  for (int i = 0; i < t->ndim; ++i)
    if (t->shape[i] < 0)
      return FN_FAIL_INVALID("%s.shape[%d] = %" PRId64 " is negative", name, i, t->shape[i]);
  *type = dtype_from_dl(t->dtype);
  if (*type == DType::kInvalid)
    return fail(FUSEDNORM_UNSUPPORTED, "%s.dtype (code %u, bits %u, lanes %u) is not a fusednorm type",
                name, unsigned(t->dtype.code), unsigned(t->dtype.bits), unsigned(t->dtype.lanes));
  if (t->strides != nullptr) {
    if (contiguous_last && t->shape[t->ndim - 1] > 1 && t->strides[t->ndim - 1] != 1)
      return fail(FUSEDNORM_UNSUPPORTED, "%s.strides[%d] = %" PRId64 ": the last dimension must be contiguous",
                  name, t->ndim - 1, t->strides[t->ndim - 1]);
    for (int i = 0; i + 1 < t->ndim; ++i)
      if (t->strides[i] < 0)
        return fail(FUSEDNORM_UNSUPPORTED, "%s.strides[%d] = %" PRId64 ": negative strides are not supported",
                    name, i, t->strides[i]);
  }
  return FUSEDNORM_SUCCESS;
}

// A zero dimension: the tensor has no element.
bool is_empty(const DLTensor* t) {
  for (int i = 0; i < t->ndim; ++i)
    if (t->shape[i] == 0) return true;
  return false;
}

int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

// Element stride of dimension i (compact row-major when strides is NULL); false when a compact
// stride does not fit in 64 bits.
bool elem_stride(const DLTensor* t, int i, int64_t* stride) {
  if (t->strides) {
    *stride = t->strides[i];
    return true;
  }
  int64_t s = 1;
  for (int j = i + 1; j < t->ndim; ++j)
    if (__builtin_mul_overflow(s, t->shape[j], &s)) return false;
  *stride = s;
  return true;
}

std::string strides_string(const DLTensor* t) {
  if (t->strides == nullptr) return "compact";
  std::string s = "[";
  for (int i = 0; i < t->ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(t->strides[i]);
  }
  return s + "]";
}

// Checks that every byte offset the tensor spans (byte_offset included) fits in 64 bits, that a
// sub-byte (FP4) tensor's rows start on a byte, and that rows of a non-empty tensor written to do
// not coincide (stride 0; check_rows_disjoint catches every other self-overlap later). Fills
// `view` with the row view of the leading dimensions.
fusednorm_status make_row_view(const DLTensor* t, const char* name, int bits, RowView* view,
                               bool written = false) {
  if (t->byte_offset > uint64_t(INT64_MAX) / 8)
    return FN_FAIL_INVALID("%s.byte_offset = %" PRIu64 ": beyond what a 64-bit byte offset can address", name,
                           uint64_t(t->byte_offset));
  // The largest bit offset: byte_offset * 8 + sum over dims of (n - 1) * stride * bits.
  int64_t span_bits = int64_t(t->byte_offset) * 8;
  const bool empty = is_empty(t);
  for (int i = 0; i < t->ndim && !empty; ++i) {
    int64_t stride, term;
    if (!elem_stride(t, i, &stride) || __builtin_mul_overflow(t->shape[i] - 1, stride, &term) ||
        __builtin_mul_overflow(term, int64_t(bits), &term) || __builtin_add_overflow(span_bits, term, &span_bits))
      return FN_FAIL_INVALID("%s: shape %s with strides %s and byte_offset %" PRIu64
                             " spans more bytes than 64 bits can address",
                             name, shape_string(t).c_str(), strides_string(t).c_str(), uint64_t(t->byte_offset));
  }
  // Address arithmetic in integers: data may be NULL (an empty tensor) with a byte_offset.
  view->data = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(t->data) + uintptr_t(t->byte_offset));
  for (int i = 0; i + 1 < t->ndim; ++i) {
    int64_t s = 0;
    elem_stride(t, i, &s);  // fits: checked above (or the tensor is empty)
    if (written && !empty && t->shape[i] > 1 && s == 0)
      return FN_FAIL_INVALID("%s.strides[%d] = 0 with shape %s: rows written by the call would overlap", name, i,
                             shape_string(t).c_str());
    if (bits < 8 && (s % 2) != 0)
      return fail(FUSEDNORM_UNSUPPORTED, "%s.strides[%d] = %" PRId64 ": rows of a %d-bit type must start on a byte",
                  name, i, s, bits);
    // The span check above bounds the strides of dimensions that move an address (size > 1 of a
    // non-empty tensor); any other stride is never used, and is stored as 0 (it may not fit in bytes).
    view->strides[i] = empty || t->shape[i] <= 1 ? 0 : bits < 8 ? s / 2 : s * (bits / 8);
  }
  return FUSEDNORM_SUCCESS;
}

fusednorm_status check_data(const DLTensor* t, const char* name) {
  if (t->data == nullptr && numel(t) != 0) return FN_FAIL_INVALID("%s.data is NULL", name);
  return FUSEDNORM_SUCCESS;
}

// The device type as the integer the caller stored: DLPack 0.6 declares the field as the enum
// DLDeviceType, and a C caller may store any value, which C++ may not load as that enum.
int32_t device_type_of(const DLTensor* t) {
  int32_t type;
  static_assert(sizeof t->device.device_type == sizeof type, "DLDeviceType is 32-bit");
  memcpy(&type, &t->device.device_type, sizeof type);
  return type;
}

fusednorm_status check_same_device(const DLTensor* a, const char* an, const DLTensor* b,
                                   const char* bn) {
  if (device_type_of(a) != device_type_of(b) || a->device.device_id != b->device.device_id)
    return FN_FAIL_INVALID("%s is on %s:%d but %s is on %s:%d", bn, device_name(device_type_of(b)),
                           b->device.device_id, an, device_name(device_type_of(a)),
                           a->device.device_id);
  return FUSEDNORM_SUCCESS;
}

fusednorm_status check_device(const DLTensor* t, const char* name, CallDevice* device) {
  const int32_t type = device_type_of(t);
  if (type != kDLCPU && type != kDLCUDA && type != kDLROCM)
    return fail(FUSEDNORM_UNSUPPORTED, "%s.device.device_type = %d: fusednorm runs on kDLCPU (1), kDLCUDA (2) and kDLROCM (10)",
                name, type);
  if (t->device.device_id < 0)
    return FN_FAIL_INVALID("%s.device.device_id = %d is negative", name, t->device.device_id);
  device->type = type;
  device->id = t->device.device_id;
  return FUSEDNORM_SUCCESS;
}

// Leading dims of `t` (all but the last) must equal `lead`.
fusednorm_status check_lead(const DLTensor* t, const char* name, const DLTensor* ref, const char* ref_name) {
  if (t->ndim != ref->ndim)
    return FN_FAIL_INVALID("%s has shape %s but %s has shape %s: the ranks differ", name,
                           shape_string(t).c_str(), ref_name, shape_string(ref).c_str());
  for (int i = 0; i + 1 < t->ndim; ++i)
    if (t->shape[i] != ref->shape[i])
      return FN_FAIL_INVALID("%s has shape %s but %s has shape %s: dimension %d differs", name,
                             shape_string(t).c_str(), ref_name, shape_string(ref).c_str(), i);
  return FUSEDNORM_SUCCESS;
}

fusednorm_status make_lead(const DLTensor* t, const char* name, LeadShape* lead) {
  lead->ndim = t->ndim - 1;
  lead->rows = 1;
  for (int i = 0; i < lead->ndim; ++i) {
    lead->dims[i] = t->shape[i];
    if (__builtin_mul_overflow(lead->rows, t->shape[i], &lead->rows))
      return FN_FAIL_INVALID("%s: shape %s has more rows than 64 bits can count", name, shape_string(t).c_str());
  }
  return FUSEDNORM_SUCCESS;
}

// ---------------------------------------------------------------- aliasing
// These run after every per-tensor check of a call: make_row_view has proven that each tensor's
// span fits in 64 bits, and every dimension of more than one element has a stride >= 0.

// The bytes a tensor touches, [lo, hi) as addresses. An empty tensor (a zero dimension) touches
// none and overlaps nothing.
struct ByteRange {
  const char* name = nullptr;
  const DLTensor* t = nullptr;
  bool empty = true;
  uint64_t lo = 0, hi = 0;
};

fusednorm_status byte_range(const DLTensor* t, const char* name, int bits, ByteRange* r) {
  r->name = name;
  r->t = t;
  r->empty = is_empty(t);
  if (r->empty) return FUSEDNORM_SUCCESS;
  // Bit offset of the last element from data + byte_offset (<= INT64_MAX: make_row_view).
  uint64_t span_bits = 0;
  for (int i = 0; i < t->ndim; ++i) {
    int64_t stride = 0;
    elem_stride(t, i, &stride);
    if (t->shape[i] > 1) span_bits += uint64_t(t->shape[i] - 1) * uint64_t(stride) * uint64_t(bits);
  }
  const uint64_t bytes = (span_bits + uint64_t(bits) + 7) / 8;  // FP4: two elements a byte
  const uint64_t base = uint64_t(reinterpret_cast<uintptr_t>(t->data));
  if (__builtin_add_overflow(base, uint64_t(t->byte_offset), &r->lo) || __builtin_add_overflow(r->lo, bytes, &r->hi))
    return FN_FAIL_INVALID("%s: data %p + byte_offset %" PRIu64 " + %" PRIu64
                           " bytes runs past the end of the 64-bit address space",
                           name, t->data, uint64_t(t->byte_offset), bytes);
  return FUSEDNORM_SUCCESS;
}

// No two non-empty ranges intersect (conservative: interleaved views of one buffer whose ranges
// intersect are rejected too). The first pair in argument order is reported.
fusednorm_status check_no_overlap(const ByteRange* r, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const ByteRange& a = r[i];
      const ByteRange& b = r[j];
      if (a.empty || b.empty || !(a.lo < b.hi && b.lo < a.hi)) continue;
      return FN_FAIL_INVALID(
          "%s and %s overlap: %s spans bytes [0x%" PRIx64 ", 0x%" PRIx64 ") (%" PRIu64 " bytes, %s %s, strides %s) and "
          "%s spans bytes [0x%" PRIx64 ", 0x%" PRIx64 ") (%" PRIu64 " bytes, %s %s, strides %s); no two tensors of a "
          "call may share memory (the residual alone is read and written in place)",
          a.name, b.name, a.name, a.lo, a.hi, a.hi - a.lo, dtype_name(dtype_from_dl(a.t->dtype)),
          shape_string(a.t).c_str(), strides_string(a.t).c_str(), b.name, b.lo, b.hi, b.hi - b.lo,
          dtype_name(dtype_from_dl(b.t->dtype)), shape_string(b.t).c_str(), strides_string(b.t).c_str());
    }
  return FUSEDNORM_SUCCESS;
}

// A tensor written by the call: no two of its elements share memory. Sufficient check: with the
// dimensions of more than one element sorted by stride, each stride is at least the extent (in
// elements) spanned by the dimensions of smaller stride. Stride 0 fails it too.
fusednorm_status check_rows_disjoint(const DLTensor* t, const char* name) {
  if (is_empty(t)) return FUSEDNORM_SUCCESS;
  int dims[1 + kMaxLeadDims];
  int64_t strides[1 + kMaxLeadDims];
  int n = 0;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] <= 1) continue;
    elem_stride(t, i, &strides[i]);
    int k = n++;
    for (; k > 0 && strides[dims[k - 1]] > strides[i]; --k) dims[k] = dims[k - 1];
    dims[k] = i;
  }
  int64_t extent = 1;  // elements from the first to the last of the dimensions placed so far, + 1
  for (int k = 0; k < n; ++k) {
    const int d = dims[k];
    if (strides[d] < extent)
      return FN_FAIL_INVALID("%s: shape %s with strides %s: elements written by the call would overlap "
                             "(strides[%d] = %" PRId64 " is smaller than %" PRId64
                             ", the elements spanned by the dimensions of smaller stride)",
                             name, shape_string(t).c_str(), strides_string(t).c_str(), d, strides[d], extent);
    extent += (t->shape[d] - 1) * strides[d];  // fits: at most the tensor's span
  }
  return FUSEDNORM_SUCCESS;
}

// "32, 64 and 128": kGroupSizes in words.
std::string group_sizes_string() {
  std::string s;
  const size_t n = sizeof kGroupSizes / sizeof kGroupSizes[0];
  for (size_t i = 0; i < n; ++i) s += (i == 0 ? "" : i + 1 == n ? " and " : ", ") + std::to_string(kGroupSizes[i]);
  return s;
}

#define FN_TRY(expr)                              \
  do {                                            \
    const fusednorm_status fn_st_ = (expr);       \
    if (fn_st_ != FUSEDNORM_SUCCESS) return fn_st_; \
  } while (0)

}  // namespace

fusednorm_status validate_cast(const DLTensor* src, const DLTensor* dst,
                               const fusednorm_cast_options* options, CastCall* call,
                               CallDevice* device) {
  fusednorm_cast_options opts;
  fusednorm_cast_options_init(&opts);
  if (options != nullptr) {
    if (options->struct_size < sizeof(size_t) + sizeof(int32_t))
      return FN_FAIL_INVALID("options->struct_size = %zu is smaller than any fusednorm_cast_options",
                             options->struct_size);
    opts.e8m0_rounding = options->e8m0_rounding;
  }
  if (opts.e8m0_rounding != FUSEDNORM_E8M0_NEAREST && opts.e8m0_rounding != FUSEDNORM_E8M0_UP)
    return FN_FAIL_INVALID("options->e8m0_rounding = %d: must be FUSEDNORM_E8M0_NEAREST (0) or FUSEDNORM_E8M0_UP (1)",
                           opts.e8m0_rounding);
  FN_TRY(check_tensor(src, "src", &call->src_type));
  FN_TRY(check_tensor(dst, "dst", &call->dst_type));
  FN_TRY(check_device(src, "src", device));
  FN_TRY(check_same_device(src, "src", dst, "dst"));
  if (src->ndim != dst->ndim)
    return FN_FAIL_INVALID("dst has shape %s but src has shape %s", shape_string(dst).c_str(),
                           shape_string(src).c_str());
  for (int i = 0; i < src->ndim; ++i)
    if (src->shape[i] != dst->shape[i])
      return FN_FAIL_INVALID("dst has shape %s but src has shape %s", shape_string(dst).c_str(),
                             shape_string(src).c_str());
  FN_TRY(check_data(src, "src"));
  FN_TRY(check_data(dst, "dst"));
  call->cols = src->shape[src->ndim - 1];
  for (const DLTensor* t : {src, dst})
    if (dtype_bits(dtype_from_dl(t->dtype)) == 4 && call->cols % 2 != 0)
      return FN_FAIL_INVALID("%s: f4e2m1 rows hold two elements per byte; the last dimension %" PRId64 " must be even",
                             t == src ? "src" : "dst", call->cols);
  FN_TRY(make_lead(src, "src", &call->lead));
  FN_TRY(make_row_view(src, "src", dtype_bits(call->src_type), &call->src));
  FN_TRY(make_row_view(dst, "dst", dtype_bits(call->dst_type), &call->dst, /*written=*/true));
  call->e8m0_up = opts.e8m0_rounding == FUSEDNORM_E8M0_UP;
  // Aliasing, after every per-tensor check: no in-place cast.
  FN_TRY(check_rows_disjoint(dst, "dst"));
  ByteRange r[2];
  FN_TRY(byte_range(src, "src", dtype_bits(call->src_type), &r[0]));
  FN_TRY(byte_range(dst, "dst", dtype_bits(call->dst_type), &r[1]));
  return check_no_overlap(r, 2);
}

namespace {

// Options and every tensor on its own (shape, dtype, device, strides, 64-bit spans).
fusednorm_status rmsnorm_quant_args(const DLTensor* input, const DLTensor* residual, const DLTensor* weight,
                                    const DLTensor* output, const DLTensor* scales,
                                    const fusednorm_rmsnorm_quant_options* options, RmsnormQuantCall* call,
                                    CallDevice* device) {
  fusednorm_rmsnorm_quant_options o;
  fusednorm_rmsnorm_quant_options_init(&o);
  if (options != nullptr) {
    if (options->struct_size < sizeof(fusednorm_rmsnorm_quant_options))
      return FN_FAIL_INVALID("options->struct_size = %zu: expected %zu (call fusednorm_rmsnorm_quant_options_init)",
                             options->struct_size, sizeof(fusednorm_rmsnorm_quant_options));
    o = *options;
  }
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
  FN_TRY(check_tensor(input, "input", &call->in_type));
  FN_TRY(check_device(input, "input", device));
  if (!is_input_dtype(call->in_type))
    return fail(FUSEDNORM_UNSUPPORTED, "input.dtype = %s: must be f32, f16 or bf16", dtype_name(call->in_type));
  call->h = input->shape[input->ndim - 1];
  if (call->h == 0)
    return FN_FAIL_INVALID("input.shape[%d] = 0 (input shape %s): the hidden size H (the last dimension) must be >= 1",
                           input->ndim - 1, shape_string(input).c_str());
  FN_TRY(make_lead(input, "input", &call->lead));
  FN_TRY(check_data(input, "input"));
  FN_TRY(make_row_view(input, "input", dtype_bits(call->in_type), &call->in));

  if (residual != nullptr) {
    DType rt;
    FN_TRY(check_tensor(residual, "residual", &rt));
    FN_TRY(check_same_device(input, "input", residual, "residual"));
    if (rt != call->in_type)
      return FN_FAIL_INVALID("residual.dtype = %s but input.dtype = %s: they must match", dtype_name(rt),
                             dtype_name(call->in_type));
    FN_TRY(check_lead(residual, "residual", input, "input"));
    if (residual->shape[residual->ndim - 1] != call->h)
      return FN_FAIL_INVALID("residual has shape %s but input has shape %s", shape_string(residual).c_str(),
                             shape_string(input).c_str());
    FN_TRY(check_data(residual, "residual"));
    FN_TRY(make_row_view(residual, "residual", dtype_bits(rt), &call->res, /*written=*/true));
  }

  if (o.norm == FUSEDNORM_NORM_RMS) {
    if (weight == nullptr) return FN_FAIL_INVALID("weight is NULL but options->norm = RMS needs it");
    FN_TRY(check_tensor(weight, "weight", &call->w_type));
    FN_TRY(check_same_device(input, "input", weight, "weight"));
    if (!is_input_dtype(call->w_type))
      return fail(FUSEDNORM_UNSUPPORTED, "weight.dtype = %s: must be f32, f16 or bf16", dtype_name(call->w_type));
    if (weight->ndim != 1 || weight->shape[0] != call->h)
      return FN_FAIL_INVALID("weight has shape %s: must be [%" PRId64 "] (H of input %s)",
                             shape_string(weight).c_str(), call->h, shape_string(input).c_str());
    FN_TRY(check_data(weight, "weight"));
    RowView wv;
    FN_TRY(make_row_view(weight, "weight", dtype_bits(call->w_type), &wv));
    call->weight = wv.data;
  }

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
