// The valid baseline calls that the bad-input tables (tests/api/bad_input_*_test.cc) break one
// argument at a time, on the harness of tests/common/bad_call.h.
#pragma once

#include <stdint.h>

#include <limits>
#include <vector>

#include "common/bad_call.h"
#include "fusednorm/fusednorm.h"
#include "reference/reference.h"

namespace fusednorm {
namespace test {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kHuge = INT64_MAX / 2;             // 4611686018427387903 rows
constexpr int64_t kHugeStride = INT64_MAX / 4;       // elements between rows
constexpr uint64_t kWildOffset = uint64_t(1) << 63;  // byte_offset that overflows int64 offsets
constexpr const char* kHugeShape = "[4611686018427387903, 64]";  // [kHuge, 64] as messages print it
constexpr fusednorm_status kInvalid = FUSEDNORM_INVALID_ARGUMENT;
constexpr fusednorm_status kUnsupported = FUSEDNORM_UNSUPPORTED;
constexpr fusednorm_status kNoBackend = FUSEDNORM_BACKEND_UNAVAILABLE;

enum { kIn, kRes, kW, kOut, kSc };

// fusednorm_rmsnorm_quant: bf16 input/residual/weight [4, 64], f8e4m3fn output, f32 per-row
// scales [4, 1], default options (dynamic per row, RMS). A valid call as built.
class Rq : public Args {
 public:
  explicit Rq(int64_t rows = 4, int64_t h = 64, DType in_type = DType::kBF16)
      : Args({"input", "residual", "weight", "output", "scales"}) {
    fusednorm_rmsnorm_quant_options_init(&opts);
    build(rows, h, in_type);
  }
  // (Re)allocates every tensor for `rows` rows of H = h (the options stay as they are).
  void build(int64_t rows, int64_t h, DType in_type = DType::kBF16) {
    make(kIn, in_type, {rows, h});
    make(kRes, in_type, {rows, h});
    make(kW, in_type, {h});
    make(kOut, DType::k_f8e4m3fn, {rows, h});
    make(kSc, DType::kF32, {rows, 1});
  }
  void use_static_scale(float s = 0.05f) {
    opts.scale_mode = FUSEDNORM_SCALE_STATIC;
    make(kSc, DType::kF32, {1});
    tensor(kSc).set(0, 0, s);
  }
  void use_groups(int64_t group, DType scale_type = DType::kF32) {
    opts.scale_mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
    opts.group_size = group;
    const auto& sh = tensor(kIn).shape();
    make(kSc, scale_type, {sh[0], sh[1] / group});
  }
  void use_packed() {
    opts.scale_placement = FUSEDNORM_SCALES_PACKED_ROW_END;
    const auto& sh = tensor(kIn).shape();
    make(kOut, DType::k_f8e4m3fn, {sh[0], sh[1] + 4});
    set_null(kSc);
  }
  // Every tensor rebuilt with leading dimensions `lead` (scales per row).
  void use_lead(const std::vector<int64_t>& lead) {
    auto with = [&](int64_t last) {
      std::vector<int64_t> s = lead;
      s.push_back(last);
      return s;
    };
    for (int s : {kIn, kRes}) make(s, tensor(s).type(), with(64));
    make(kOut, tensor(kOut).type(), with(64));
    make(kSc, DType::kF32, with(1));
  }
  const fusednorm_rmsnorm_quant_options* options() { return null_opts ? nullptr : &opts; }
  fusednorm_status call() override {
    return fusednorm_rmsnorm_quant(ptr(kIn), ptr(kRes), ptr(kW), ptr(kOut), ptr(kSc), options(), nullptr);
  }
  fusednorm_status call_reference() override {
    return reference::rmsnorm_quant(ptr(kIn), ptr(kRes), ptr(kW), ptr(kOut), ptr(kSc), options());
  }

  fusednorm_rmsnorm_quant_options opts;
  bool null_opts = false;
};

// Rq mutations for table rows: the call switched to a static scale ([1] f32 0.05), to dynamic
// group scales of 32 ([4, 2] f32) or to scales packed at the row end, then `then`.
inline std::function<void(Rq&)> static_scale(std::function<void(Rq&)> then = [](Rq&) {}) {
  return [=](Rq& c) {
    c.use_static_scale();
    then(c);
  };
}
inline std::function<void(Rq&)> groups(std::function<void(Rq&)> then = [](Rq&) {}) {
  return [=](Rq& c) {
    c.use_groups(32);
    then(c);
  };
}
inline std::function<void(Rq&)> packed(std::function<void(Rq&)> then = [](Rq&) {}) {
  return [=](Rq& c) {
    c.use_packed();
    then(c);
  };
}

// data + byte_offset with byte_offset = 2^63 is no address: the message names the byte_offset,
// in decimal or hex.
inline Part wild_offset_text() { return {"9223372036854775808", "0x8000000000000000", "byte_offset"}; }

enum { kSrc, kDst };

// fusednorm_cast: f32 [4, 64] -> f8e4m3fn [4, 64], default options. A valid call as built.
class Cast : public Args {
 public:
  explicit Cast(DType src = DType::kF32, DType dst = DType::k_f8e4m3fn, std::vector<int64_t> shape = {4, 64})
      : Args({"src", "dst"}) {
    fusednorm_cast_options_init(&opts);
    retype(src, dst, shape);
  }
  // (Re)allocates both tensors (the options stay as they are).
  void retype(DType src, DType dst, const std::vector<int64_t>& shape) {
    make(kSrc, src, shape);
    make(kDst, dst, shape);
  }
  const fusednorm_cast_options* options() { return null_opts ? nullptr : &opts; }
  fusednorm_status call() override { return fusednorm_cast(ptr(kSrc), ptr(kDst), options(), nullptr); }
  fusednorm_status call_reference() override { return reference::cast(ptr(kSrc), ptr(kDst), options()); }

  fusednorm_cast_options opts;
  bool null_opts = false;
};

}  // namespace test
}  // namespace fusednorm
