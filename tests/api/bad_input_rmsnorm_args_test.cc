// Bad input, fusednorm_rmsnorm_quant: the tensor arguments (NULL, shape, dtype, device, strides,
// rank, sizes and byte offsets that overflow). Each row breaks one thing of a valid call (Rq,
// tests/api/bad_input_calls.h) and is checked by the harness of tests/common/bad_call.h: status,
// message fragments, nothing written, the reference rejecting identically, in a forked child.
#include <catch2/catch.hpp>

#include "api/bad_input_calls.h"

namespace fusednorm {
namespace test {
namespace {

using namespace mut;  // NOLINT: the tables read as field = value

// input, residual and output [2^62 - 1, 64], scales [2^62 - 1, 1], over the small real buffers:
// validation must reject before touching any memory.
void huge_rows(Rq& c) {
  for (int s : {kIn, kRes, kOut}) c.set_shape(s, {kHuge, 64});
  c.set_shape(kSc, {kHuge, 1});
}

// input, residual and output [2^32, 2^32, 64], scales [2^32, 2^32, 1], rows broadcast: 2^64 rows.
void rows_2_64(Rq& c) {
  const int64_t n = int64_t(1) << 32;
  for (int s : {kIn, kRes, kOut}) c.set_layout(s, {n, n, 64}, {0, 0, 1});
  c.set_layout(kSc, {n, n, 1}, {0, 0, 1});
}

}  // namespace

TEST_CASE("rmsnorm_quant: NULL tensor or NULL data", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"input NULL", null(kIn), kInvalid, {"input is NULL"}},
      {"output NULL", null(kOut), kInvalid, {"output is NULL"}},
      {"weight NULL with norm RMS", null(kW), kInvalid, {"weight is NULL", "RMS"}},
      {"scales NULL with a dynamic mode", null(kSc), kInvalid, {"scales is NULL", "scale_mode 1"}},
      {"scales NULL with a static scale", static_scale(null(kSc)), kInvalid, {"scales is NULL", "scale_mode 0"}},
      {"input.data NULL", null_data(kIn), kInvalid, {"input.data is NULL"}},
      {"residual.data NULL", null_data(kRes), kInvalid, {"residual.data is NULL"}},
      {"weight.data NULL", null_data(kW), kInvalid, {"weight.data is NULL"}},
      {"output.data NULL", null_data(kOut), kInvalid, {"output.data is NULL"}},
      {"scales.data NULL", null_data(kSc), kInvalid, {"scales.data is NULL"}},
      {"static scales.data NULL", static_scale(null_data(kSc)), kInvalid, {"scales.data is NULL"}},
      {"input.shape NULL", null_shape(kIn), kInvalid, {"input.shape is NULL"}},
      {"output.shape NULL", null_shape(kOut), kInvalid, {"output.shape is NULL"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: shape mismatch", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"output rows differ", remake(kOut, DType::k_f8e4m3fn, {3, 64}), kInvalid,
       {"output has shape [3, 64]", "input has shape [4, 64]"}},
      {"output H differs", remake(kOut, DType::k_f8e4m3fn, {4, 32}), kInvalid, {"output has shape [4, 32]", "64"}},
      {"output rank differs", remake(kOut, DType::k_f8e4m3fn, {256}), kInvalid,
       {"output has shape [256]", "input has shape [4, 64]"}},
      {"residual H differs", remake(kRes, DType::kBF16, {4, 32}), kInvalid,
       {"residual has shape [4, 32]", "input has shape [4, 64]"}},
      {"residual rows differ", remake(kRes, DType::kBF16, {2, 64}), kInvalid,
       {"residual has shape [2, 64]", "input has shape [4, 64]"}},
      {"weight length differs", remake(kW, DType::kBF16, {32}), kInvalid, {"weight has shape [32]", "[64]", "[4, 64]"}},
      {"weight has rank 2", remake(kW, DType::kBF16, {1, 64}), kInvalid, {"weight has shape [1, 64]", "[64]"}},
      {"per-row scales end in 2", remake(kSc, DType::kF32, {4, 2}), kInvalid,
       {"scales has shape [4, 2]", "must end in 1"}},
      {"per-row scales rows differ", remake(kSc, DType::kF32, {3, 1}), kInvalid,
       {"scales has shape [3, 1]", "input has shape [4, 64]"}},
      {"per-row scales without the trailing 1 (rank differs)", remake(kSc, DType::kF32, {4}), kInvalid,
       {"scales has shape [4]", "input has shape [4, 64]"}},
      {"negative dimension", shape(kIn, {-4, 64}), kInvalid, {"input.shape[0] = -4"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: dtype mismatch or unsupported dtype", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"residual dtype differs from input", remake(kRes, DType::kF32, {4, 64}), kInvalid,
       {"residual.dtype = f32", "input.dtype = bf16"}},
      {"int8 input", remake(kIn, DType::kI8, {4, 64}), kUnsupported, {"input.dtype = int8"}},
      {"FP8 input", remake(kIn, DType::k_f8e4m3fn, {4, 64}), kUnsupported, {"input.dtype = f8e4m3fn"}},
      {"f64 input (not a fusednorm type)", dtype(kIn, DLDataType{kDLFloat, 64, 1}), kUnsupported,
       {"input.dtype", "code 2", "bits 64", "lanes 1"}},
      {"vector lanes", dtype(kIn, DLDataType{kDLBfloat, 16, 4}), kUnsupported, {"input.dtype", "lanes 4"}},
      {"int8 weight", remake(kW, DType::kI8, {64}), kUnsupported, {"weight.dtype = int8"}},
      {"f32 output", remake(kOut, DType::kF32, {4, 64}), kUnsupported, {"output.dtype = f32"}},
      {"f4e2m1 output", remake(kOut, DType::k_f4e2m1, {4, 64}), kUnsupported, {"output.dtype = f4e2m1"}},
      {"e8m0 output", remake(kOut, DType::kE8M0, {4, 64}), kUnsupported, {"output.dtype = e8m0"}},
      {"e8m0 static scale", static_scale(remake(kSc, DType::kE8M0, {1})), kUnsupported,
       {"scales.dtype = e8m0", "static"}},
      {"bf16 static scale", static_scale(remake(kSc, DType::kBF16, {1})), kUnsupported,
       {"scales.dtype = bf16", "static"}},
      {"int8 dynamic scales", remake(kSc, DType::kI8, {4, 1}), kUnsupported, {"scales.dtype = int8"}},
      {"FP8 dynamic scales", remake(kSc, DType::k_f8e4m3fn, {4, 1}), kUnsupported, {"scales.dtype = f8e4m3fn"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: tensors on different devices", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"output on cuda:0", device(kOut, kDLCUDA, 0), kInvalid, {"output is on cuda:0", "input is on cpu:0"}},
      {"residual on rocm:0", device(kRes, kDLROCM, 0), kInvalid, {"residual is on rocm:0", "input is on cpu:0"}},
      {"weight on another CPU device id", device(kW, kDLCPU, 1), kInvalid, {"weight is on cpu:1", "input is on cpu:0"}},
      {"scales on cuda:1, the rest on cuda:0", all<Rq>({all_devices(kDLCUDA, 0), device(kSc, kDLCUDA, 1)}), kInvalid,
       {"scales is on cuda:1", "input is on cuda:0"}},
      {"static scale on cuda:0", static_scale(device(kSc, kDLCUDA, 0)), kInvalid,
       {"scales is on cuda:0", "input is on cpu:0"}},
      {"input on cuda:0, the rest on the CPU", device(kIn, kDLCUDA, 0), kInvalid,
       {"residual is on cpu:0", "input is on cuda:0"}},
      {"device type fusednorm does not know (Vulkan)", all_devices(kDLVulkan, 0), kUnsupported,
       {"input.device.device_type = 7"}},
      {"negative device id", all_devices(kDLCPU, -1), kInvalid, {"input.device.device_id = -1"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: GPU device without a backend", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"all on cuda:0", all_devices(kDLCUDA, 0), kNoBackend, {"cuda:0", "CUDA"}},
      {"all on rocm:1", all_devices(kDLROCM, 1), kNoBackend, {"rocm:1"}},
      {"a malformed GPU call is still INVALID_ARGUMENT (validation comes first)",
       all<Rq>({all_devices(kDLCUDA, 0), remake(kOut, DType::k_f8e4m3fn, {4, 32}), device(kOut, kDLCUDA, 0)}),
       kInvalid,
       {"output has shape [4, 32]"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: negative strides", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"input", strides(kIn, {-64, 1}), kUnsupported, {"input.strides[0] = -64", "negative"}},
      {"residual", strides(kRes, {-64, 1}), kUnsupported, {"residual.strides[0] = -64", "negative"}},
      {"output", strides(kOut, {-64, 1}), kUnsupported, {"output.strides[0] = -64", "negative"}},
      {"scales, leading dimension", strides(kSc, {-1, 1}), kUnsupported, {"scales.strides[0] = -1", "negative"}},
      {"group scales, last dimension", groups(strides(kSc, {2, -1})), kUnsupported,
       {"scales.strides[1] = -1", "negative"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: non-contiguous last dimension", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"input, stride 2", strides(kIn, {128, 2}), kUnsupported, {"input.strides[1] = 2", "contiguous"}},
      {"input, stride 0", strides(kIn, {64, 0}), kUnsupported, {"input.strides[1] = 0", "contiguous"}},
      {"residual", strides(kRes, {128, 2}), kUnsupported, {"residual.strides[1] = 2", "contiguous"}},
      {"weight", strides(kW, {2}), kUnsupported, {"weight.strides[0] = 2", "contiguous"}},
      {"output", strides(kOut, {128, 2}), kUnsupported, {"output.strides[1] = 2", "contiguous"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: rank 0 and rank > 9", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"input rank 0", ndim(kIn, 0), kInvalid, {"input.ndim = 0", "1..9"}},
      {"input rank -1", ndim(kIn, -1), kInvalid, {"input.ndim = -1", "1..9"}},
      {"output rank 0", ndim(kOut, 0), kInvalid, {"output.ndim = 0", "1..9"}},
      {"input rank 10", [](Rq& c) { c.use_lead({1, 1, 1, 1, 1, 1, 1, 1, 4}); }, kUnsupported,
       {"input.ndim = 10", "1..9"}},
      {"scales rank 10", remake(kSc, DType::kF32, {1, 1, 1, 1, 1, 1, 1, 1, 4, 1}), kUnsupported,
       {"scales.ndim = 10", "1..9"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: sizes whose byte offsets overflow 64 bits", "[bad_input][rmsnorm_quant]") {
  const std::vector<int64_t> broadcast = {0, 1};  // every row is the same row: spans nothing
  const BadTable<Rq> table = {
      {"input: huge rows with a huge stride", all<Rq>({huge_rows, strides(kIn, {kHugeStride, 1})}), kInvalid,
       {"input", kHugeShape, "64 bits"}},
      {"input: huge rows, compact (strides NULL)", all<Rq>({huge_rows, null_strides(kIn)}), kInvalid,
       {"input", kHugeShape, "64 bits"}},
      {"residual: huge stride (input broadcast)",
       all<Rq>({huge_rows, strides(kIn, broadcast), strides(kRes, {kHugeStride, 1})}), kInvalid,
       {"residual", kHugeShape, "64 bits"}},
      {"output: compact huge rows (input broadcast, no residual)",
       all<Rq>({huge_rows, strides(kIn, broadcast), null(kRes), null_strides(kOut)}), kInvalid,
       {"output", kHugeShape, "64 bits"}},
      {"output: rows broadcast (stride 0) would overlap",
       all<Rq>({huge_rows, strides(kIn, broadcast), null(kRes), strides(kOut, broadcast)}), kInvalid,
       {"output.strides[0] = 0", "overlap"}},
      {"scales: huge column stride (column-major scales, 4 rows)", groups(strides(kSc, {1, kHugeStride})), kInvalid,
       {"scales", "[1, 2305843009213693951]", "64 bits"}},
      {"scales: column stride 0 would overlap", groups(strides(kSc, {1, 0})), kInvalid,
       {"scales.strides[1] = 0", "overlap"}},
      {"rows: 2^32 x 2^32 rows", rows_2_64, kInvalid, {"input", "[4294967296, 4294967296, 64]", "64 bits"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: byte_offset that overflows 64 bits", "[bad_input][rmsnorm_quant]") {
  // data + byte_offset with byte_offset = 2^63 is no address: reject, naming the tensor and the
  // byte_offset. Every other argument is valid.
  const Part wild = wild_offset_text();
  const BadTable<Rq> table = {
      {"input", byte_offset(kIn, kWildOffset), kInvalid, {"input", wild}},
      {"residual", byte_offset(kRes, kWildOffset), kInvalid, {"residual", wild}},
      {"weight", byte_offset(kW, kWildOffset), kInvalid, {"weight", wild}},
      {"output", byte_offset(kOut, kWildOffset), kInvalid, {"output", wild}},
      {"scales", byte_offset(kSc, kWildOffset), kInvalid, {"scales", wild}},
      {"scales (static scale)", static_scale(byte_offset(kSc, kWildOffset)), kInvalid, {"scales", wild}},
      {"input, byte_offset 2^64 - 1", byte_offset(kIn, UINT64_MAX), kInvalid,
       {"input", Part({"18446744073709551615", "0xffffffffffffffff", "byte_offset"})}},
  };
  run_bad_cases(table);
}

}  // namespace test
}  // namespace fusednorm
