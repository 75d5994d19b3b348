// Bad input, fusednorm_cast. Each row breaks one thing of a valid call (Cast,
// tests/api/bad_input_calls.h: f32 [4, 64] -> f8e4m3fn) and is checked by the harness of
// tests/common/bad_call.h: status, message fragments, nothing written, the reference rejecting
// identically, in a forked child.
#include <catch2/catch.hpp>

#include "api/bad_input_calls.h"

namespace fusednorm {
namespace test {
namespace {

using namespace mut;  // NOLINT: the tables read as field = value

// The call converted to src -> dst of this shape.
std::function<void(Cast&)> types(DType src, DType dst, std::vector<int64_t> shape) {
  return [=](Cast& c) { c.retype(src, dst, shape); };
}

// src and dst [2^62 - 1, 64] over the small real buffers.
void huge_rows(Cast& c) {
  c.set_shape(kSrc, {kHuge, 64});
  c.set_shape(kDst, {kHuge, 64});
}

// src and dst [2^32, 2^32, 64], rows broadcast: 2^64 rows.
void rows_2_64(Cast& c) {
  for (int s : {kSrc, kDst}) c.set_layout(s, {int64_t(1) << 32, int64_t(1) << 32, 64}, {0, 0, 1});
}

}  // namespace

TEST_CASE("cast: NULL tensor or NULL data", "[bad_input][cast]") {
  const BadTable<Cast> table = {
      {"src NULL", null(kSrc), kInvalid, {"src is NULL"}},
      {"dst NULL", null(kDst), kInvalid, {"dst is NULL"}},
      {"src.data NULL", null_data(kSrc), kInvalid, {"src.data is NULL"}},
      {"dst.data NULL", null_data(kDst), kInvalid, {"dst.data is NULL"}},
      {"dst.shape NULL", null_shape(kDst), kInvalid, {"dst.shape is NULL"}},
      {"src and dst NULL", all<Cast>({null(kSrc), null(kDst)}), kInvalid, {"src is NULL"}},
  };
  run_bad_cases(table);
}

TEST_CASE("cast: shape mismatch", "[bad_input][cast]") {
  const BadTable<Cast> table = {
      {"last dimension", remake(kDst, DType::k_f8e4m3fn, {4, 32}), kInvalid,
       {"dst has shape [4, 32]", "src has shape [4, 64]"}},
      {"leading dimension", remake(kDst, DType::k_f8e4m3fn, {5, 64}), kInvalid,
       {"dst has shape [5, 64]", "src has shape [4, 64]"}},
      {"rank", remake(kDst, DType::k_f8e4m3fn, {256}), kInvalid, {"dst has shape [256]", "src has shape [4, 64]"}},
      {"negative dimension", shape(kSrc, {4, -64}), kInvalid, {"src.shape[1] = -64"}},
  };
  run_bad_cases(table);
}

TEST_CASE("cast: unsupported dtype", "[bad_input][cast]") {
  const BadTable<Cast> table = {
      {"f64 src", dtype(kSrc, DLDataType{kDLFloat, 64, 1}), kUnsupported, {"src.dtype", "code 2", "bits 64"}},
      {"int16 dst", dtype(kDst, DLDataType{kDLInt, 16, 1}), kUnsupported, {"dst.dtype", "code 0", "bits 16"}},
      {"uint8 dst", dtype(kDst, DLDataType{kDLUInt, 8, 1}), kUnsupported, {"dst.dtype", "code 1", "bits 8"}},
      {"2 lanes", dtype(kSrc, DLDataType{kDLFloat, 32, 2}), kUnsupported, {"src.dtype", "lanes 2"}},
  };
  run_bad_cases(table);
}

TEST_CASE("cast: tensors on different devices", "[bad_input][cast]") {
  const BadTable<Cast> table = {
      {"dst on cuda:0", device(kDst, kDLCUDA, 0), kInvalid, {"dst is on cuda:0", "src is on cpu:0"}},
      {"src on rocm:0", device(kSrc, kDLROCM, 0), kInvalid, {"dst is on cpu:0", "src is on rocm:0"}},
      {"cuda:0 and cuda:1", all<Cast>({all_devices(kDLCUDA, 0), device(kDst, kDLCUDA, 1)}), kInvalid,
       {"dst is on cuda:1", "src is on cuda:0"}},
      {"unknown device type", all_devices(kDLOpenCL, 0), kUnsupported, {"src.device.device_type = 4"}},
  };
  run_bad_cases(table);
}

TEST_CASE("cast: GPU device without a backend", "[bad_input][cast]") {
  const BadTable<Cast> table = {
      {"cuda:0", all_devices(kDLCUDA, 0), kNoBackend, {"cuda:0", "CUDA"}},
      {"rocm:2", all_devices(kDLROCM, 2), kNoBackend, {"rocm:2"}},
  };
  run_bad_cases(table);
}

TEST_CASE("cast: f4e2m1 with an odd last dimension", "[bad_input][cast]") {
  const BadTable<Cast> table = {
      {"dst", types(DType::kF32, DType::k_f4e2m1, {4, 63}), kInvalid, {"dst", "f4e2m1", "63", "even"}},
      {"src", types(DType::k_f4e2m1, DType::kF32, {4, 63}), kInvalid, {"src", "f4e2m1", "63", "even"}},
      {"f4e2m1 rows that do not start on a byte",
       all<Cast>({types(DType::kF32, DType::k_f4e2m1, {4, 64}), strides(kDst, {65, 1})}), kUnsupported,
       {"dst.strides[0] = 65", "byte"}},
  };
  run_bad_cases(table);
}

TEST_CASE("cast: invalid options", "[bad_input][cast]") {
  // f32 -> e8m0, the one pair e8m0_rounding applies to.
  const BadTable<Cast> table = {
      {"e8m0_rounding 2", [](Cast& c) { c.opts.e8m0_rounding = 2; }, kInvalid, {"options->e8m0_rounding = 2"}},
      {"e8m0_rounding -1", [](Cast& c) { c.opts.e8m0_rounding = -1; }, kInvalid, {"options->e8m0_rounding = -1"}},
      {"struct_size 0", [](Cast& c) { c.opts.struct_size = 0; }, kInvalid, {"options->struct_size = 0"}},
      {"struct_size 8", [](Cast& c) { c.opts.struct_size = 8; }, kInvalid, {"options->struct_size = 8"}},
  };
  run_bad_cases<Cast>(table, [] { return std::make_unique<Cast>(DType::kF32, DType::kE8M0); });
}

TEST_CASE("cast: strides and rank", "[bad_input][cast]") {
  const BadTable<Cast> table = {
      {"negative stride", strides(kSrc, {-64, 1}), kUnsupported, {"src.strides[0] = -64", "negative"}},
      {"non-contiguous last dimension", strides(kDst, {128, 2}), kUnsupported, {"dst.strides[1] = 2", "contiguous"}},
      {"rank 0", all<Cast>({ndim(kSrc, 0), ndim(kDst, 0)}), kInvalid, {"src.ndim = 0", "1..9"}},
      {"rank 10", types(DType::kF32, DType::k_f8e4m3fn, {1, 1, 1, 1, 1, 1, 1, 1, 4, 64}), kUnsupported,
       {"src.ndim = 10", "1..9"}},
  };
  run_bad_cases(table);
}

TEST_CASE("cast: sizes whose byte offsets overflow 64 bits", "[bad_input][cast]") {
  const std::vector<int64_t> broadcast = {0, 1};
  const BadTable<Cast> table = {
      {"src: huge stride", all<Cast>({huge_rows, strides(kSrc, {kHugeStride, 1})}), kInvalid,
       {"src", kHugeShape, "64 bits"}},
      {"dst: compact (src broadcast)", all<Cast>({huge_rows, strides(kSrc, broadcast), null_strides(kDst)}),
       kInvalid,
       {"dst", kHugeShape, "64 bits"}},
      {"f4e2m1 dst: huge stride (src broadcast)",
       all<Cast>({remake(kDst, DType::k_f4e2m1, {4, 64}), huge_rows, strides(kDst, {kHugeStride, 1}),
                  strides(kSrc, broadcast)}),
       kInvalid,
       {"dst", kHugeShape, "64 bits"}},
      {"rows: 2^32 x 2^32 rows", rows_2_64, kInvalid, {"src", "[4294967296, 4294967296, 64]", "64 bits"}},
  };
  run_bad_cases(table);
}

TEST_CASE("cast: byte_offset that overflows 64 bits", "[bad_input][cast]") {
  const BadTable<Cast> table = {
      {"src", byte_offset(kSrc, kWildOffset), kInvalid, {"src", wild_offset_text()}},
      {"dst", byte_offset(kDst, kWildOffset), kInvalid, {"dst", wild_offset_text()}},
  };
  run_bad_cases(table);
}

}  // namespace test
}  // namespace fusednorm
