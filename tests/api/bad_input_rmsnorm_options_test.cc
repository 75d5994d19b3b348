// Bad input, fusednorm_rmsnorm_quant: the options (group size, combinations of scale mode and
// placement, scale tensors that do not fit them, eps, scale_ub, min_scale, qmax, struct_size).
// Each row breaks one thing of a valid call (Rq, tests/api/bad_input_calls.h) and is checked by
// the harness of tests/common/bad_call.h.
#include <stddef.h>

#include <catch2/catch.hpp>
#include <string>

#include "api/bad_input_calls.h"

namespace fusednorm {
namespace test {
namespace {

using namespace mut;  // NOLINT: the tables read as field = value
using Options = fusednorm_rmsnorm_quant_options;

// options->*field = v.
template <class T, class V>
std::function<void(Rq&)> opt(T Options::*field, V v) {
  return [=](Rq& c) { c.opts.*field = T(v); };
}

}  // namespace

TEST_CASE("rmsnorm_quant: H not a multiple of the group size", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"H = 96, group 64",
       [](Rq& c) {
         c.build(4, 96);
         c.use_groups(32);  // a [4, 3] scale tensor
         c.opts.group_size = 64;
       },
       kInvalid,
       {"input H = 96", "group_size = 64"}},
      {"H = 64, group 128",
       [](Rq& c) {
         c.use_groups(64);
         c.opts.group_size = 128;
       },
       kInvalid,
       {"input H = 64", "group_size = 128"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: unsupported group size", "[bad_input][rmsnorm_quant]") {
  // The scales fit groups of 32; group_size is then set to a size the library does not support.
  const BadTable<Rq> table = {
      {"group_size 48", groups(opt(&Options::group_size, 48)), kUnsupported, {"options->group_size = 48"}},
      {"group_size 16", groups(opt(&Options::group_size, 16)), kUnsupported, {"options->group_size = 16"}},
      {"group_size 256", groups(opt(&Options::group_size, 256)), kUnsupported, {"options->group_size = 256"}},
      {"group_size 0", groups(opt(&Options::group_size, 0)), kUnsupported, {"options->group_size = 0"}},
      {"group_size -32", groups(opt(&Options::group_size, -32)), kUnsupported, {"options->group_size = -32"}},
      {"group_size 1099511627776", groups(opt(&Options::group_size, int64_t(1) << 40)), kUnsupported,
       {"options->group_size = 1099511627776"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: option combinations the library rejects", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"PACKED_ROW_END with DYNAMIC_GROUP",
       packed(all<Rq>({opt(&Options::scale_mode, FUSEDNORM_SCALE_DYNAMIC_GROUP), opt(&Options::group_size, 32)})),
       kUnsupported,
       {"PACKED_ROW_END", "DYNAMIC_ROW", "not 2"}},
      {"PACKED_ROW_END with STATIC", packed(opt(&Options::scale_mode, FUSEDNORM_SCALE_STATIC)), kUnsupported,
       {"PACKED_ROW_END", "DYNAMIC_ROW", "not 0"}},
      {"PACKED_ROW_END with a scales tensor", packed(remake(kSc, DType::kF32, {4, 1})), kInvalid,
       {"scales must be NULL", "PACKED_ROW_END"}},
      {"PACKED_ROW_END with output of H columns", packed(remake(kOut, DType::k_f8e4m3fn, {4, 64})), kInvalid,
       {"output has shape [4, 64]", "68"}},
      {"norm out of range", opt(&Options::norm, 2), kInvalid, {"options->norm = 2"}},
      {"scale_mode out of range", opt(&Options::scale_mode, 3), kInvalid, {"options->scale_mode = 3"}},
      {"negative scale_mode", opt(&Options::scale_mode, -1), kInvalid, {"options->scale_mode = -1"}},
      {"scale_placement out of range", opt(&Options::scale_placement, 2), kInvalid, {"options->scale_placement = 2"}},
      {"weight_offset NaN", opt(&Options::weight_offset, kNaN), kInvalid, {"options->weight_offset = ", "nan"}},
      {"weight_offset inf", opt(&Options::weight_offset, kInf), kInvalid, {"options->weight_offset = inf"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: scale tensor too small", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"groups of 32: [4, 1] instead of [4, 2]", groups(remake(kSc, DType::kF32, {4, 1})), kInvalid,
       {"scales has shape [4, 1]", "must end in 2", "64 / 32"}},
      {"groups of 32, e8m0: [4, 1] instead of [4, 2]",
       [](Rq& c) {
         c.use_groups(32, DType::kE8M0);
         c.make(kSc, DType::kE8M0, {4, 1});
       },
       kInvalid,
       {"scales has shape [4, 1]", "must end in 2"}},
      {"per-row scales with no column", remake(kSc, DType::kF32, {4, 0}), kInvalid,
       {"scales has shape [4, 0]", "must end in 1"}},
      {"static scale of 2 elements", static_scale(remake(kSc, DType::kF32, {2})), kInvalid,
       {"scales has shape [2]", "exactly one element"}},
      {"static scale of 0 elements", static_scale(remake(kSc, DType::kF32, {0})), kInvalid,
       {"scales has shape [0]", "exactly one element"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: eps negative, NaN or infinite", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"-1e-6", opt(&Options::eps, -1e-6f), kInvalid, {"options->eps = -1e-06"}},
      {"-0.5", opt(&Options::eps, -0.5f), kInvalid, {"options->eps = -0.5"}},
      {"NaN", opt(&Options::eps, kNaN), kInvalid, {"options->eps = ", "nan"}},
      {"+inf", opt(&Options::eps, kInf), kInvalid, {"options->eps = inf"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: scale_ub <= 0", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"0", opt(&Options::scale_ub, 0.0f), kInvalid, {"options->scale_ub = 0"}},
      {"-0", opt(&Options::scale_ub, -0.0f), kInvalid, {"options->scale_ub = -0"}},
      {"-1", opt(&Options::scale_ub, -1.0f), kInvalid, {"options->scale_ub = -1"}},
      {"NaN", opt(&Options::scale_ub, kNaN), kInvalid, {"options->scale_ub = ", "nan"}},
      {"-inf", opt(&Options::scale_ub, -kInf), kInvalid, {"options->scale_ub = -inf"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: min_scale < 0 or not finite", "[bad_input][rmsnorm_quant]") {
  const BadTable<Rq> table = {
      {"-1", opt(&Options::min_scale, -1.0f), kInvalid, {"options->min_scale = -1"}},
      {"-1e-30", opt(&Options::min_scale, -1e-30f), kInvalid, {"options->min_scale = -1e-30"}},
      {"NaN", opt(&Options::min_scale, kNaN), kInvalid, {"options->min_scale = ", "nan"}},
      {"+inf", opt(&Options::min_scale, kInf), kInvalid, {"options->min_scale = inf"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: qmax beyond the format's max", "[bad_input][rmsnorm_quant]") {
  // The output in this format with this qmax: the message names the value, the format's max and
  // the format.
  auto out = [](DType type, float qmax) {
    return all<Rq>({remake(kOut, type, {4, 64}), opt(&Options::qmax, qmax)});
  };
  const BadTable<Rq> table = {
      {"f8e4m3fn qmax 449", out(DType::k_f8e4m3fn, 449.0f), kInvalid, {"options->qmax = 449", "448", "f8e4m3fn"}},
      {"f8e4m3fnuz qmax 241", out(DType::k_f8e4m3fnuz, 241.0f), kInvalid,
       {"options->qmax = 241", "240", "f8e4m3fnuz"}},
      {"f8e4m3 qmax 448", out(DType::k_f8e4m3, 448.0f), kInvalid, {"options->qmax = 448", "240", "f8e4m3"}},
      {"f8e5m2 qmax 57345", out(DType::k_f8e5m2, 57345.0f), kInvalid, {"options->qmax = 57345", "57344", "f8e5m2"}},
      {"f8e5m2fnuz qmax 65536", out(DType::k_f8e5m2fnuz, 65536.0f), kInvalid,
       {"options->qmax = 65536", "57344", "f8e5m2fnuz"}},
      {"int8 qmax 128", out(DType::kI8, 128.0f), kInvalid, {"options->qmax = 128", "127", "int8"}},
      {"f8e4m3fn qmax inf", out(DType::k_f8e4m3fn, kInf), kInvalid, {"options->qmax = inf", "448", "f8e4m3fn"}},
      {"f8e4m3fn qmax -1", out(DType::k_f8e4m3fn, -1.0f), kInvalid, {"options->qmax = -1", "448", "f8e4m3fn"}},
      {"f8e4m3fn qmax nan", out(DType::k_f8e4m3fn, kNaN), kInvalid, {"options->qmax = ", "448", "f8e4m3fn"}},
  };
  run_bad_cases(table);
}

TEST_CASE("rmsnorm_quant: options->struct_size too small", "[bad_input][rmsnorm_quant]") {
  // The message names the size given and the size of the struct this header declares.
  const std::string full = std::to_string(sizeof(Options));
  const size_t short4 = sizeof(Options) - 4;
  const BadTable<Rq> table = {
      {"struct_size 0", opt(&Options::struct_size, 0), kInvalid, {"options->struct_size = 0", full}},
      {"struct_size 8", opt(&Options::struct_size, 8), kInvalid, {"options->struct_size = 8", full}},
      {"struct_size " + std::to_string(short4), opt(&Options::struct_size, short4), kInvalid,
       {"options->struct_size = " + std::to_string(short4), full}},
  };
  run_bad_cases(table);
}

}  // namespace test
}  // namespace fusednorm
