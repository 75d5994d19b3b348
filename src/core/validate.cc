#include "core/validate.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include <string>

#include "core/error.h"
#include "core/validate_util.h"

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
                              bool contiguous_last) {
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
                               bool written) {
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

fusednorm_status check_norm_inputs(const DLTensor* input, const DLTensor* residual, const DLTensor* weight,
                                   bool norm_rms, CallDevice* device, NormInputs* out) {
  FN_TRY(check_tensor(input, "input", &out->in_type));
  FN_TRY(check_device(input, "input", device));
  if (!is_input_dtype(out->in_type))
    return fail(FUSEDNORM_UNSUPPORTED, "input.dtype = %s: must be f32, f16 or bf16", dtype_name(out->in_type));
  out->h = input->shape[input->ndim - 1];
  if (out->h == 0)
    return FN_FAIL_INVALID("input.shape[%d] = 0 (input shape %s): the hidden size H (the last dimension) must be >= 1",
                           input->ndim - 1, shape_string(input).c_str());
  FN_TRY(make_lead(input, "input", &out->lead));
  FN_TRY(check_data(input, "input"));
  FN_TRY(make_row_view(input, "input", dtype_bits(out->in_type), &out->in));

  if (residual != nullptr) {
    DType rt;
    FN_TRY(check_tensor(residual, "residual", &rt));
    FN_TRY(check_same_device(input, "input", residual, "residual"));
    if (rt != out->in_type)
      return FN_FAIL_INVALID("residual.dtype = %s but input.dtype = %s: they must match", dtype_name(rt),
                             dtype_name(out->in_type));
    FN_TRY(check_lead(residual, "residual", input, "input"));
    if (residual->shape[residual->ndim - 1] != out->h)
      return FN_FAIL_INVALID("residual has shape %s but input has shape %s", shape_string(residual).c_str(),
                             shape_string(input).c_str());
    FN_TRY(check_data(residual, "residual"));
    FN_TRY(make_row_view(residual, "residual", dtype_bits(rt), &out->res, /*written=*/true));
  }

  if (norm_rms) {
    if (weight == nullptr) return FN_FAIL_INVALID("weight is NULL but options->norm = RMS needs it");
    FN_TRY(check_tensor(weight, "weight", &out->w_type));
    FN_TRY(check_same_device(input, "input", weight, "weight"));
    if (!is_input_dtype(out->w_type))
      return fail(FUSEDNORM_UNSUPPORTED, "weight.dtype = %s: must be f32, f16 or bf16", dtype_name(out->w_type));
    if (weight->ndim != 1 || weight->shape[0] != out->h)
      return FN_FAIL_INVALID("weight has shape %s: must be [%" PRId64 "] (H of input %s)",
                             shape_string(weight).c_str(), out->h, shape_string(input).c_str());
    FN_TRY(check_data(weight, "weight"));
    RowView wv;
    FN_TRY(make_row_view(weight, "weight", dtype_bits(out->w_type), &wv));
    out->weight = wv.data;
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

}  // namespace fusednorm
