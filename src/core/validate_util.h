// The checks every operation's validation is made of (src/core/validate.cc). Each returns SUCCESS,
// or a status with the last-error message naming the argument and its values. An operation's
// validation (validate_<op>.cc) checks every tensor on its own (check_tensor, make_row_view,
// check_device), then the shapes against each other, then the overlap of every pair
// (byte_range + check_no_overlap) and the self-overlap of every written tensor
// (check_rows_disjoint), and only then fills its call struct.
#pragma once

#include <stdint.h>

#include <string>

#include "core/call.h"
#include "core/error.h"
#include "core/validate.h"
#include "fusednorm/fusednorm.h"

#define FN_FAIL_INVALID(...) ::fusednorm::fail(FUSEDNORM_INVALID_ARGUMENT, __VA_ARGS__)

// The caller's options into *o, or the defaults where options is NULL. `init` is the options'
// _init function and `init_name` its name. An options struct smaller than this library's was not
// made by that function (or by an older header) and is refused, with both sizes named.
#define FN_READ_OPTIONS(options, init, o) ::fusednorm::read_options((options), &init, #init, (o))
#define FN_TRY(expr)                                \
  do {                                              \
    const fusednorm_status fn_st_ = (expr);         \
    if (fn_st_ != FUSEDNORM_SUCCESS) return fn_st_; \
  } while (0)

namespace fusednorm {

template <class Options>
fusednorm_status read_options(const Options* options, void (*init)(Options*), const char* init_name, Options* o) {
  init(o);
  if (options == nullptr) return FUSEDNORM_SUCCESS;
  if (options->struct_size < sizeof(Options))
    return fail(FUSEDNORM_INVALID_ARGUMENT, "options->struct_size = %zu: expected %zu (call %s)", options->struct_size,
                sizeof(Options), init_name);
  *o = *options;
  return FUSEDNORM_SUCCESS;
}

std::string shape_string(const DLTensor* t);    // "[4, 128]"
std::string strides_string(const DLTensor* t);  // "{128, 1}" (or "NULL (compact)")
const char* device_name(int32_t type);          // "cpu", "cuda", "rocm", "unknown"

// What every tensor argument must satisfy (non-NULL, rank 1..9, shape >= 0, a fusednorm dtype,
// no negative strides, the last dimension contiguous unless !contiguous_last); fills the dtype.
fusednorm_status check_tensor(const DLTensor* t, const char* name, DType* type, bool contiguous_last = true);
// A zero dimension: the tensor has no element.
bool is_empty(const DLTensor* t);
int64_t numel(const DLTensor* t);
// Element stride of dimension i (compact row-major when strides is NULL); false when a compact
// stride does not fit in 64 bits.
bool elem_stride(const DLTensor* t, int i, int64_t* stride);
// Checks that every byte offset the tensor spans (byte_offset included) fits in 64 bits, that a
// sub-byte (FP4) tensor's rows start on a byte, and that rows of a non-empty tensor written to do
// not coincide (stride 0; check_rows_disjoint catches every other self-overlap later). Fills
// `view` with the row view of the leading dimensions. bits: bits per element.
fusednorm_status make_row_view(const DLTensor* t, const char* name, int bits, RowView* view, bool written = false);
// data is not NULL (a non-empty tensor).
fusednorm_status check_data(const DLTensor* t, const char* name);
// The device type as the integer the caller stored: DLPack 0.6 declares the field as the enum
// DLDeviceType, and a C caller may store any value, which C++ may not load as that enum.
int32_t device_type_of(const DLTensor* t);
fusednorm_status check_same_device(const DLTensor* a, const char* an, const DLTensor* b, const char* bn);
// A supported device type; fills `device` (the call's device: its first tensor's).
fusednorm_status check_device(const DLTensor* t, const char* name, CallDevice* device);
// Leading dims of `t` (all but the last) must equal ref's.
fusednorm_status check_lead(const DLTensor* t, const char* name, const DLTensor* ref, const char* ref_name);
// The leading dimensions of `t` as a LeadShape (rank <= 9; the row count fits in 64 bits).
fusednorm_status make_lead(const DLTensor* t, const char* name, LeadShape* lead);

// The bytes a tensor touches, [lo, hi) as addresses. An empty tensor (a zero dimension) touches
// none and overlaps nothing.
struct ByteRange {
  const char* name = nullptr;
  const DLTensor* t = nullptr;
  bool empty = true;
  uint64_t lo = 0, hi = 0;
};

// Fills r; a tensor whose bytes would run past the end of the address space is INVALID_ARGUMENT.
// Call after make_row_view has checked the tensor.
fusednorm_status byte_range(const DLTensor* t, const char* name, int bits, ByteRange* r);
// No two non-empty ranges intersect (conservative: interleaved views of one buffer whose ranges
// intersect are rejected too). The first pair in argument order is reported.
fusednorm_status check_no_overlap(const ByteRange* r, int n);
// A tensor written by the call: no two of its elements share memory (stride 0 included).
fusednorm_status check_rows_disjoint(const DLTensor* t, const char* name);
// "32, 64 and 128": kGroupSizes in words.
std::string group_sizes_string();

// The normalized operations' inputs: input [..., H] (f32/f16/bf16, H >= 1), the optional in-place
// residual (same shape and dtype) and, when norm_rms, the weight [H] (f32/f16/bf16).
struct NormInputs {
  LeadShape lead;
  int64_t h = 0;
  DType in_type = DType::kInvalid, w_type = DType::kInvalid;
  RowView in, res;
  const char* weight = nullptr;
};
fusednorm_status check_norm_inputs(const DLTensor* input, const DLTensor* residual, const DLTensor* weight,
                                   bool norm_rms, CallDevice* device, NormInputs* out);

}  // namespace fusednorm
