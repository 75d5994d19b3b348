// Bad input (product.md, "Bad input"): every invalid call returns INVALID_ARGUMENT or
// UNSUPPORTED (BACKEND_UNAVAILABLE for a GPU device without a backend) with a message naming the
// argument and the values, and writes nothing: every byte of every tensor's allocation (guard
// bytes included) is compared with a copy taken before the call.
//
// The rejected calls are tables of rows, one table per operation and family, in
// tests/api/bad_input_{rmsnorm_args,rmsnorm_options,cast}_test.cc, run by the harness of
// tests/common/bad_call.h (forked child per call, FUSEDNORM_TEST_NO_FORK=1 for a debugger; the
// reference must reject identically). This file holds the positive controls (valid calls succeed
// and equal the scalar reference byte for byte, so that a validation rejecting everything would
// be noticed), fusednorm_query_backend, the status strings and last error, and the C++ API.
#include <stddef.h>
#include <string.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/bad_input_calls.h"
#include "fusednorm/fusednorm.hpp"

namespace fusednorm {
namespace test {
namespace {

// fusednorm_query_backend into a fusednorm_backend_info filled with 0x5A (struct_size aside): a
// rejected query must leave every byte of it alone. There is no reference for it.
class Query : public CallUnderTest {
 public:
  Query() : bytes_(sizeof(fusednorm_backend_info), 0x5A) { set_struct_size(sizeof(fusednorm_backend_info)); }
  void set_struct_size(size_t n) { memcpy(bytes_.data() + offsetof(fusednorm_backend_info, struct_size), &n, sizeof n); }
  fusednorm_status call() override {
    return fusednorm_query_backend(device_type, null_info ? nullptr : reinterpret_cast<fusednorm_backend_info*>(bytes_.data()));
  }
  fusednorm_status call_reference() override { return FUSEDNORM_INTERNAL_ERROR; }
  bool has_reference() const override { return false; }
  size_t allocation_count() const override { return 1; }
  const char* allocation_name(size_t) const override { return "info"; }
  const std::vector<uint8_t>* allocation(size_t) const override { return &bytes_; }

  int32_t device_type = kDLCPU;
  bool null_info = false;

 private:
  std::vector<uint8_t> bytes_;
};

std::function<void(Query&)> query(int32_t device_type, size_t struct_size = sizeof(fusednorm_backend_info)) {
  return [=](Query& q) {
    q.device_type = device_type;
    q.set_struct_size(struct_size);
  };
}

}  // namespace

// ================================================================ positive controls

TEST_CASE("rmsnorm_quant: valid calls succeed and equal the reference (positive control)", "[bad_input][rmsnorm_quant]") {
  std::vector<Control<Rq>> table = {
      {"dynamic per-row, with residual", [](Rq&) {}},
      {"no residual, options NULL",
       [](Rq& c) {
         c.set_null(kRes);
         c.null_opts = true;
       }},
      {"f32 input, int8 output, qmax at the format's max (127)",
       [](Rq& c) {
         c.build(4, 64, DType::kF32);
         c.make(kOut, DType::kI8, {4, 64});
         c.opts.qmax = 127.0f;
       }},
      {"column-major group scales (shape [4, 2], strides {1, 4})",
       [](Rq& c) {
         c.use_groups(32);
         c.make(kSc, DType::kF32, {2, 4});  // storage for 8 scales
         c.set_layout(kSc, {4, 2}, {1, 4});
       }},
      {"static scale", [](Rq& c) { c.use_static_scale(); }},
      {"packed row end", [](Rq& c) { c.use_packed(); }},
      {"norm NONE with weight NULL",
       [](Rq& c) {
         c.opts.norm = FUSEDNORM_NORM_NONE;
         c.set_null(kW);
       }},
      {"boundary options: eps 0, min_scale 0, tiny scale_ub, group_size ignored outside groups",
       [](Rq& c) {
         c.opts.eps = 0.0f;
         c.opts.min_scale = 0.0f;
         c.opts.scale_ub = 1e-30f;
         c.opts.group_size = 48;  // only DYNAMIC_GROUP reads it
       }},
      {"rank 9 (8 leading dimensions)", [](Rq& c) { c.use_lead({1, 2, 1, 1, 1, 1, 1, 2}); }},
      {"misaligned pointers and padded rows",
       [](Rq& c) {
         c.make(kIn, DType::kBF16, {4, 64}, 3, 1);
         c.make(kRes, DType::kBF16, {4, 64}, 5, 3);
         c.make(kW, DType::kBF16, {64}, 0, 1);
         c.make(kOut, DType::k_f8e4m3fn, {4, 64}, 7, 5);
         c.make(kSc, DType::kF32, {4, 1}, 2, 3);
       }},
  };
  // Every FP8 output format with qmax at its max.
  for (const auto& f : {std::make_pair(DType::k_f8e4m3fn, 448.0f), std::make_pair(DType::k_f8e4m3fnuz, 240.0f),
                        std::make_pair(DType::k_f8e4m3, 240.0f), std::make_pair(DType::k_f8e5m2, 57344.0f),
                        std::make_pair(DType::k_f8e5m2fnuz, 57344.0f)})
    table.push_back({std::string(dtype_name(f.first)) + " output with qmax at its max", [f](Rq& c) {
                       c.make(kOut, f.first, {4, 64});
                       c.opts.qmax = f.second;
                     }});
  // Dynamic groups of 32, 64 and 128 with f32, f16, bf16 and e8m0 scales.
  for (int64_t g : kGroupSizes)
    for (DType st : {DType::kF32, DType::kF16, DType::kBF16, DType::kE8M0})
      table.push_back({"group " + std::to_string(g) + ", scales " + dtype_name(st), [g, st](Rq& c) {
                         c.build(4, 256);
                         c.use_groups(g, st);
                       }});
  run_controls(table);

  SECTION("the harness sees writes: a valid call through run_call reports changed output bytes") {
    Rq c;
    c.set_null(kRes);
    const Outcome o = run_call(c);
    REQUIRE(o.signal == 0);
    REQUIRE(o.lib.reported);
    CHECK(status_name(o.lib.status) == "SUCCESS");
    CHECK_THAT(o.lib.changes, Catch::StartsWith("output: byte"));
    REQUIRE(o.ref.reported);
    CHECK(status_name(o.ref.status) == "SUCCESS");
  }
  SECTION("a larger struct_size (a newer caller) is accepted") {
    struct Bigger {
      fusednorm_rmsnorm_quant_options o;
      char future[32];
    };
    Rq a;
    Bigger big{};
    fusednorm_rmsnorm_quant_options_init(&big.o);
    big.o.struct_size = sizeof big;
    REQUIRE(fusednorm_rmsnorm_quant(a.ptr(kIn), a.ptr(kRes), a.ptr(kW), a.ptr(kOut), a.ptr(kSc), &big.o, nullptr) ==
            FUSEDNORM_SUCCESS);
  }
  SECTION("no rows: NULL data is fine for empty tensors") {
    Rq c(0, 64);
    for (int s : {kIn, kRes, kOut, kSc}) c.dl(s).data = nullptr;
    c.snapshot();
    CHECK(status_name(c.call()) == "SUCCESS");
    CHECK(c.changes() == "");
  }
}

TEST_CASE("cast: valid calls succeed and equal the reference (positive control)", "[bad_input][cast]") {
  const std::vector<Control<Cast>> table = {
      {"f32 -> f8e4m3fn", [](Cast&) {}},
      {"bf16 -> f4e2m1, options NULL",
       [](Cast& c) {
         c.retype(DType::kBF16, DType::k_f4e2m1, {4, 64});
         c.null_opts = true;
       }},
      {"f32 -> e8m0, rounding up",
       [](Cast& c) {
         c.retype(DType::kF32, DType::kE8M0, {4, 64});
         c.opts.e8m0_rounding = FUSEDNORM_E8M0_UP;
       }},
      {"f16 -> int8, rank 9, padded rows, misaligned",
       [](Cast& c) {
         c.make(kSrc, DType::kF16, {1, 1, 1, 1, 1, 1, 2, 3, 40}, 3, 1);
         c.make(kDst, DType::kI8, {1, 1, 1, 1, 1, 1, 2, 3, 40}, 5, 3);
       }},
  };
  run_controls(table);
  SECTION("no rows: NULL data is fine for empty tensors") {
    Cast c(DType::kF32, DType::k_f8e4m3fn, {0, 64});
    c.dl(kSrc).data = nullptr;
    c.dl(kDst).data = nullptr;
    c.snapshot();
    CHECK(status_name(c.call()) == "SUCCESS");
    CHECK(c.changes() == "");
  }
}

// ================================================================ queries, status strings, errors

TEST_CASE("query_backend: CPU available, GPUs unavailable with a reason, bad calls rejected", "[bad_input][query]") {
  SECTION("CPU") {
    fusednorm_backend_info info{};
    info.struct_size = sizeof info;
    REQUIRE(fusednorm_query_backend(kDLCPU, &info) == FUSEDNORM_SUCCESS);
    CHECK(info.struct_size == sizeof info);
    CHECK(info.device_type == kDLCPU);
    CHECK(info.available == 1);
    CHECK(info.device_count == 1);
    CHECK(std::string(info.name) == "cpu");
    const std::string target = fusednorm_cpu_target();
    CHECK_FALSE(target.empty());
    CHECK_THAT(std::string(info.detail), Catch::Contains(target) && Catch::Contains("Highway"));
  }
  SECTION("CUDA and ROCm") {
    for (int32_t type : {int32_t(kDLCUDA), int32_t(kDLROCM)}) {
      INFO("device_type " << type);
      fusednorm_backend_info info{};
      info.struct_size = sizeof info;
      REQUIRE(fusednorm_query_backend(type, &info) == FUSEDNORM_SUCCESS);
      CHECK(info.device_type == type);
      CHECK(info.available == 0);
      CHECK(info.device_count == 0);
      CHECK(std::string(info.name) == (type == kDLCUDA ? "cuda" : "hip"));
      CHECK_THAT(std::string(info.detail), Catch::Contains(type == kDLCUDA ? "CUDA" : "HIP"));
    }
  }
  // A rejected query writes nothing into info.
  const BadTable<Query> table = {
      {"NULL info", [](Query& q) { q.null_info = true; }, kInvalid, {"info is NULL"}},
      {"device type Vulkan", query(kDLVulkan), kInvalid, {"device_type = 7"}},
      {"device type 0", query(0), kInvalid, {"device_type = 0"}},
      {"device type -1", query(-1), kInvalid, {"device_type = -1"}},
      {"device type CUDAHost", query(kDLCUDAHost), kInvalid, {"device_type = 3"}},
      {"struct_size 0", query(kDLCPU, 0), kInvalid, {"info->struct_size = 0"}},
      {"struct_size 8", query(kDLCPU, 8), kInvalid, {"info->struct_size = 8"}},
  };
  run_bad_cases(table);
}

TEST_CASE("status strings and the thread-local last error", "[bad_input][errors]") {
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_SUCCESS)) == "SUCCESS");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_INVALID_ARGUMENT)) == "INVALID_ARGUMENT");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_UNSUPPORTED)) == "UNSUPPORTED");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_BACKEND_UNAVAILABLE)) == "BACKEND_UNAVAILABLE");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_DEVICE_ERROR)) == "DEVICE_ERROR");
  CHECK(std::string(fusednorm_status_string(FUSEDNORM_INTERNAL_ERROR)) == "INTERNAL_ERROR");
  CHECK(fusednorm_status_string(fusednorm_status(99)) != nullptr);

  REQUIRE(fusednorm_cast(nullptr, nullptr, nullptr, nullptr) == FUSEDNORM_INVALID_ARGUMENT);
  const std::string mine = fusednorm_last_error();
  CHECK_THAT(mine, Catch::Contains("src is NULL"));
  std::string other_before, other_after;
  std::thread th([&] {
    other_before = fusednorm_last_error();
    fusednorm_backend_info info{};
    info.struct_size = sizeof info;
    fusednorm_query_backend(42, &info);
    other_after = fusednorm_last_error();
  });
  th.join();
  CHECK(other_before == "");
  CHECK_THAT(other_after, Catch::Contains("device_type = 42"));
  CHECK(std::string(fusednorm_last_error()) == mine);
}

// ================================================================ C++ API

namespace {

void rq_cpp(Args& a) { fusednorm::rmsnorm_quant(*a.ptr(kIn), a.ptr(kRes), a.ptr(kW), *a.ptr(kOut), a.ptr(kSc)); }
void cast_cpp(Args& a) { fusednorm::cast(*a.ptr(kSrc), *a.ptr(kDst)); }

// A call through the C++ API that must throw fusednorm::Error with `want` and a what() of
// "<STATUS>: <message>", and write nothing.
struct CppCase {
  const char* name;
  std::function<std::unique_ptr<Args>()> make;
  std::function<void(Args&)> call;
  fusednorm_status want;
  const char* part;
};

}  // namespace

TEST_CASE("C++ API: failures throw fusednorm::Error with the status and the message", "[bad_input][cpp]") {
  SECTION("positive control: valid calls do not throw") {
    Rq r;
    CHECK_NOTHROW(rq_cpp(r));
    Cast c;
    CHECK_NOTHROW(cast_cpp(c));
    int major = -1, minor = -1, patch = -1;
    fusednorm_version(&major, &minor, &patch);
    CHECK(fusednorm::version() ==
          std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch));
    CHECK(fusednorm::cpu_target() == std::string(fusednorm_cpu_target()));
    const auto all = fusednorm::backends();
    REQUIRE(all.size() == 3);
    CHECK(all[0].available == 1);
    CHECK(all[1].available == 0);
    CHECK(all[2].available == 0);
  }
  const CppCase table[] = {
      {"rmsnorm_quant: INVALID_ARGUMENT",
       [] {
         auto r = std::make_unique<Rq>();
         r->set_device(kOut, kDLCUDA, 0);
         return r;
       },
       rq_cpp, kInvalid, "output is on cuda:0 but input is on cpu:0"},
      {"rmsnorm_quant: UNSUPPORTED, with options", [] { return std::make_unique<Rq>(); },
       [](Args& a) {
         fusednorm::RmsnormQuantOptions o;
         o.scale_mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
         o.group_size = 48;
         fusednorm::rmsnorm_quant(*a.ptr(kIn), a.ptr(kRes), a.ptr(kW), *a.ptr(kOut), a.ptr(kSc), o);
       },
       kUnsupported, "options->group_size = 48"},
      {"cast: UNSUPPORTED",
       [] {
         auto c = std::make_unique<Cast>();
         c->dl(kSrc).dtype = DLDataType{kDLFloat, 64, 1};
         return c;
       },
       cast_cpp, kUnsupported, "src.dtype"},
      {"cast: INVALID_ARGUMENT from the options", [] { return std::make_unique<Cast>(DType::kF32, DType::kE8M0); },
       [](Args& a) {
         fusednorm::CastOptions o;
         o.e8m0_rounding = 7;
         fusednorm::cast(*a.ptr(kSrc), *a.ptr(kDst), o);
       },
       kInvalid, "options->e8m0_rounding = 7"},
      {"cast: BACKEND_UNAVAILABLE",
       [] {
         auto c = std::make_unique<Cast>();
         c->set_all_devices(kDLCUDA, 0);
         return c;
       },
       cast_cpp, kNoBackend, "cuda:0"},
  };
  for (const CppCase& row : table) {
    DYNAMIC_SECTION(row.name) {
      std::unique_ptr<Args> args = row.make();
      args->snapshot();
      try {
        row.call(*args);
        FAIL("no fusednorm::Error thrown");
      } catch (const fusednorm::Error& e) {
        INFO("what(): " << e.what());
        CHECK(status_name(e.status()) == status_name(row.want));
        CHECK_THAT(std::string(e.what()), Catch::StartsWith(status_name(row.want) + ": ") && Catch::Contains(row.part));
        CHECK_THAT(std::string(e.what()), Catch::Contains(fusednorm_last_error()));
      }
      CHECK(args->changes() == "");
    }
  }
  SECTION("query_backend: INVALID_ARGUMENT") {
    try {
      fusednorm::query_backend(kDLVulkan);
      FAIL("no fusednorm::Error thrown");
    } catch (const fusednorm::Error& e) {
      CHECK(e.status() == FUSEDNORM_INVALID_ARGUMENT);
      CHECK_THAT(std::string(e.what()), Catch::Contains("device_type = 7"));
    }
  }
}

}  // namespace test
}  // namespace fusednorm
