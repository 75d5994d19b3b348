// Aliasing: no two tensors of a call may share memory (the residual is the one tensor read and
// written in place), and a tensor the call writes must not overlap itself. Every overlapping
// call is INVALID_ARGUMENT with a message naming both tensors and their byte ranges, and writes
// nothing: every tensor is a view carved from ONE shared allocation (poisoned with 0xA5), and
// every byte of it is compared with a copy taken before the call. Positive controls: adjacent
// but disjoint views of one buffer are accepted and equal the scalar reference byte for byte.
//
// Each overlapping pair is its own TEST_CASE (one ctest entry each). A rejected call goes through
// the bad-input harness (tests/common/bad_call.h): made in a forked child, then by the reference,
// which must reject it with the same message; every view lies inside the pool, so a call wrongly
// let through writes into the pool (and fails the "nothing written" check) rather than outside it.
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/bad_call.h"
#include "common/test_tensor.h"
#include "core/dtype.h"
#include "core/elements.h"
#include "fusednorm/fusednorm.h"
#include "reference/reference.h"

namespace fusednorm {
namespace test {
namespace {

constexpr uint64_t kSlotBytes = 4096;  // each tensor starts in a slot of its own
constexpr int kSlots = 8;

// One tensor argument: a view of the pool at `offset` bytes from its (64-byte aligned) base.
struct Slot {
  const char* name = "";
  bool present = true;
  bool filled = false;  // an input: filled with finite values before the call
  DType type = DType::kF32;
  std::vector<int64_t> shape, strides;  // strides empty: NULL (compact row-major)
  uint64_t offset = 0;
  DLTensor dl{};

  int64_t stride(size_t i) const {
    if (!strides.empty()) return strides[i];
    int64_t s = 1;
    for (size_t j = i + 1; j < shape.size(); ++j) s *= shape[j];
    return s;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Bytes from the first to one past the last byte of the last element.
  uint64_t bytes() const {
    if (numel() == 0) return 0;
    int64_t span = 1;
    for (size_t i = 0; i < shape.size(); ++i) span += (shape[i] - 1) * stride(i);
    return uint64_t((span * dtype_bits(type) + 7) / 8);
  }
};

// The tensors of one call, all views of one allocation (the harness's one allocation, "pool").
class Call : public CallUnderTest {
 public:
  explicit Call(std::vector<Slot> slots) : slots_(std::move(slots)), mem_(kSlotBytes * kSlots + 64, 0xA5) {
    base_ = mem_.data() + (64 - reinterpret_cast<uintptr_t>(mem_.data()) % 64) % 64;
    for (size_t k = 0; k < slots_.size(); ++k) slots_[k].offset = k * kSlotBytes;
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  Slot& slot(int k) { return slots_[size_t(k)]; }
  DLTensor* ptr(int k) {
    Slot& s = slot(k);
    if (!s.present) return nullptr;
    s.dl = DLTensor{};
    s.dl.data = base_ + s.offset;
    s.dl.device = DLDevice{kDLCPU, 0};
    s.dl.ndim = int32_t(s.shape.size());
    s.dl.dtype = dl_from_dtype(s.type);
    s.dl.shape = s.shape.data();
    s.dl.strides = s.strides.empty() ? nullptr : s.strides.data();
    return &s.dl;
  }
  // Moves tensor b so that it starts `shift` bytes into tensor a.
  void place(int b, int a, uint64_t shift) { slot(b).offset = slot(a).offset + shift; }
  // Lays the present tensors out back to back from byte 0, in argument order: adjacent, disjoint.
  void pack() {
    uint64_t at = 0;
    for (Slot& s : slots_)
      if (s.present) {
        s.offset = at;
        at += s.bytes();
      }
  }
  // Writes finite values (f32, f16, bf16) into the input tensors; the rest stays poison.
  void fill(float static_scale = 0.0f) {
    for (size_t k = 0; k < slots_.size(); ++k) {
      Slot& s = slots_[k];
      if (!s.present || !s.filled) continue;
      std::mt19937 rng(777u + unsigned(k));
      std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
      std::vector<int64_t> idx(s.shape.size(), 0);
      for (int64_t e = 0; e < s.numel(); ++e) {
        int64_t off = 0, rest = e;
        for (size_t i = s.shape.size(); i-- > 0;) {
          off += (rest % s.shape[i]) * s.stride(i);
          rest /= s.shape[i];
        }
        const float v = static_scale > 0.0f ? static_scale : dist(rng);
        store_code(s.type, reinterpret_cast<char*>(base_ + s.offset), off, encode<true>(s.type, v));
      }
    }
  }
  std::vector<uint8_t> pool() const { return std::vector<uint8_t>(base_, base_ + kSlotBytes * kSlots); }
  uint64_t lo(int k) const { return uint64_t(reinterpret_cast<uintptr_t>(base_)) + slots_[size_t(k)].offset; }
  uint64_t hi(int k) const { return lo(k) + slots_[size_t(k)].bytes(); }
  // The text the library prints for tensor k's bytes.
  std::string range_text(int k) const {
    char buf[128];
    snprintf(buf, sizeof buf, "%s spans bytes [0x%" PRIx64 ", 0x%" PRIx64 ")", slots_[size_t(k)].name, lo(k), hi(k));
    return buf;
  }

  void prepare() override { fill(); }
  size_t allocation_count() const override { return 1; }
  const char* allocation_name(size_t) const override { return "pool"; }
  const std::vector<uint8_t>* allocation(size_t) const override { return &mem_; }

 protected:
  std::vector<Slot> slots_;
  std::vector<uint8_t> mem_;
  uint8_t* base_ = nullptr;
};

enum { kIn, kRes, kW, kOut, kSc };

// fusednorm_rmsnorm_quant: bf16 input/residual/weight [4, 128], f8e4m3fn output [4, 128], f32
// per-row scales [4, 1], default options. Valid as built (each tensor in its own slot).
class Rq : public Call {
 public:
  Rq()
      : Call({Slot{"input", true, true, DType::kBF16, {4, 128}, {}},
              Slot{"residual", true, true, DType::kBF16, {4, 128}, {}},
              Slot{"weight", true, true, DType::kBF16, {128}, {}},
              Slot{"output", true, false, DType::k_f8e4m3fn, {4, 128}, {}},
              Slot{"scales", true, false, DType::kF32, {4, 1}, {}}}) {
    fusednorm_rmsnorm_quant_options_init(&opts);
  }
  void use_static_scale() {
    opts.scale_mode = FUSEDNORM_SCALE_STATIC;
    slot(kSc).shape = {1};
    static_scale_ = true;
  }
  void use_packed() {
    opts.scale_placement = FUSEDNORM_SCALES_PACKED_ROW_END;
    slot(kOut).shape = {4, 132};
    slot(kSc).present = false;
  }
  void use_groups(int64_t g) {
    opts.scale_mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
    opts.group_size = g;
    slot(kSc).shape = {4, 128 / g};
  }
  void prepare() override {
    fill();
    if (static_scale_) {
      // The static scale is an input of 0.05 (written after fill: it may lie inside an input).
      const uint32_t c = encode<true>(DType::kF32, 0.05f);
      memcpy(base_ + slot(kSc).offset, &c, 4);
    }
  }
  fusednorm_status call() override {
    return fusednorm_rmsnorm_quant(ptr(kIn), ptr(kRes), ptr(kW), ptr(kOut), ptr(kSc), &opts, nullptr);
  }
  fusednorm_status call_reference() override {
    return reference::rmsnorm_quant(ptr(kIn), ptr(kRes), ptr(kW), ptr(kOut), ptr(kSc), &opts);
  }
  fusednorm_rmsnorm_quant_options opts;

 private:
  bool static_scale_ = false;
};

enum { kSrc, kDst };

// fusednorm_cast: f32 [4, 64] -> f8e4m3fn [4, 64] by default.
class Cast : public Call {
 public:
  explicit Cast(DType src = DType::kF32, DType dst = DType::k_f8e4m3fn, std::vector<int64_t> shape = {4, 64})
      : Call({Slot{"src", true, true, src, shape, {}}, Slot{"dst", true, false, dst, shape, {}}}) {}
  fusednorm_status call() override { return fusednorm_cast(ptr(kSrc), ptr(kDst), nullptr, nullptr); }
  fusednorm_status call_reference() override { return reference::cast(ptr(kSrc), ptr(kDst), nullptr); }
};

// "" if equal, else the first byte of the pool that differs.
std::string diff(const std::vector<uint8_t>& was, const std::vector<uint8_t>& now) {
  return first_difference("pool", was.data(), now.data(), was.size());
}

// The call (library, then the reference, which shares the validation) is INVALID_ARGUMENT, its
// message contains every part, the reference's message is the same, and no byte of the pool
// (its whole allocation) changed (tests/common/bad_call.h).
void expect_rejected(Call& c, const std::vector<Part>& parts) { check_rejected(c, FUSEDNORM_INVALID_ARGUMENT, parts); }

// Tensors a and b (a first in argument order) overlap: both named, with their byte ranges.
void expect_overlap(Call& c, int a, int b) {
  INFO(c.slot(a).name << " at pool byte " << c.slot(a).offset << ", " << c.slot(b).name << " at pool byte "
                      << c.slot(b).offset);
  REQUIRE(c.lo(a) < c.hi(b));  // the test builds a real overlap
  REQUIRE(c.lo(b) < c.hi(a));
  expect_rejected(c, {std::string(c.slot(a).name) + " and " + c.slot(b).name + " overlap", c.range_text(a),
                      c.range_text(b)});
}

// Library and reference on identical pools: both succeed, every byte is equal, and the call
// wrote something (so the comparison is not vacuous).
template <class T, class Setup>
void expect_matches_reference(Setup&& setup) {
  T a, b;
  setup(a);
  setup(b);
  a.prepare();
  b.prepare();
  const std::vector<uint8_t> before = a.pool();
  REQUIRE(before == b.pool());
  const fusednorm_status st = a.call();
  INFO("fusednorm_last_error(): \"" << fusednorm_last_error() << "\"");
  REQUIRE(status_name(st) == "SUCCESS");
  REQUIRE(status_name(b.call_reference()) == "SUCCESS");
  CHECK(diff(b.pool(), a.pool()) == "");
  CHECK(diff(before, a.pool()) != "");
}

// Shorthands: tensor b starts in the last byte of tensor a (one shared byte), or `shift` bytes in.
void rq_pair(int a, int b, uint64_t shift = UINT64_MAX) {
  Rq c;
  c.place(b, a, shift == UINT64_MAX ? c.slot(a).bytes() - 1 : shift);
  expect_overlap(c, a, b);
}

}  // namespace

// ================================================================ rmsnorm_quant: pairs

TEST_CASE("alias: rmsnorm_quant input and residual overlap", "[alias][rmsnorm_quant]") { rq_pair(kIn, kRes); }
TEST_CASE("alias: rmsnorm_quant input and residual share the same pointer", "[alias][rmsnorm_quant]") {
  rq_pair(kIn, kRes, 0);
}
TEST_CASE("alias: rmsnorm_quant input and weight overlap", "[alias][rmsnorm_quant]") { rq_pair(kIn, kW, 256); }
TEST_CASE("alias: rmsnorm_quant input and output overlap (the issue's example)", "[alias][rmsnorm_quant]") {
  rq_pair(kIn, kOut, 0);  // bf16 input [4, 128] and f8e4m3fn output [4, 128] at the same pointer
}
TEST_CASE("alias: rmsnorm_quant input and output overlap by one byte", "[alias][rmsnorm_quant]") {
  rq_pair(kIn, kOut);
}
TEST_CASE("alias: rmsnorm_quant input and scales overlap", "[alias][rmsnorm_quant]") { rq_pair(kIn, kSc); }
TEST_CASE("alias: rmsnorm_quant residual and weight overlap", "[alias][rmsnorm_quant]") { rq_pair(kRes, kW); }
TEST_CASE("alias: rmsnorm_quant residual and output overlap", "[alias][rmsnorm_quant]") {
  rq_pair(kRes, kOut, 100);
}
TEST_CASE("alias: rmsnorm_quant residual and scales overlap", "[alias][rmsnorm_quant]") { rq_pair(kRes, kSc); }
TEST_CASE("alias: rmsnorm_quant weight and output overlap", "[alias][rmsnorm_quant]") { rq_pair(kW, kOut); }
TEST_CASE("alias: rmsnorm_quant weight and scales overlap", "[alias][rmsnorm_quant]") { rq_pair(kW, kSc, 8); }
TEST_CASE("alias: rmsnorm_quant output and scales overlap", "[alias][rmsnorm_quant]") { rq_pair(kOut, kSc); }
TEST_CASE("alias: rmsnorm_quant output starts in the last byte of scales", "[alias][rmsnorm_quant]") {
  Rq c;
  c.place(kOut, kSc, c.slot(kSc).bytes() - 1);  // the pair is still reported in argument order
  expect_overlap(c, kOut, kSc);
}

TEST_CASE("alias: rmsnorm_quant static scale inside output", "[alias][rmsnorm_quant]") {
  Rq c;
  c.use_static_scale();
  c.place(kSc, kOut, 508);  // the last 4 bytes of the output
  expect_overlap(c, kOut, kSc);
}
TEST_CASE("alias: rmsnorm_quant static scale inside input", "[alias][rmsnorm_quant]") {
  Rq c;
  c.use_static_scale();
  c.place(kSc, kIn, 64);  // two read-only tensors: still rejected
  expect_overlap(c, kIn, kSc);
}
TEST_CASE("alias: rmsnorm_quant packed output overlaps input", "[alias][rmsnorm_quant]") {
  Rq c;
  c.use_packed();
  c.place(kOut, kIn, 512);  // output [4, 132] in the second half of the input
  expect_overlap(c, kIn, kOut);
}
TEST_CASE("alias: rmsnorm_quant packed output with its scale bytes in the weight", "[alias][rmsnorm_quant]") {
  Rq c;
  c.use_packed();
  c.place(kW, kOut, 3 * 132 + 128);  // the weight starts at the last row's 4 scale bytes
  expect_overlap(c, kW, kOut);
}
TEST_CASE("alias: rmsnorm_quant group scales overlap output", "[alias][rmsnorm_quant]") {
  Rq c;
  c.use_groups(32);  // scales [4, 4] f32: 64 bytes
  c.place(kSc, kOut, 500);
  expect_overlap(c, kOut, kSc);
}
TEST_CASE("alias: rmsnorm_quant interleaved views whose ranges intersect are rejected", "[alias][rmsnorm_quant]") {
  // input holds the even rows and residual the odd rows of one [8, 128] bf16 buffer: no byte is
  // shared, but the ranges intersect, and the check is by range (documented as conservative).
  Rq c;
  c.slot(kIn).strides = {256, 1};
  c.slot(kRes).strides = {256, 1};
  c.place(kRes, kIn, 256);
  expect_overlap(c, kIn, kRes);
}

// ================================================================ rmsnorm_quant: written tensors

TEST_CASE("alias: rmsnorm_quant output rows overlap each other", "[alias][rmsnorm_quant]") {
  Rq c;
  c.slot(kOut).strides = {64, 1};  // [4, 128] rows 64 bytes apart
  expect_rejected(c, {"output: shape [4, 128] with strides [64, 1]", "would overlap", "strides[0] = 64",
                      "smaller than 128"});
}
TEST_CASE("alias: rmsnorm_quant residual rows overlap each other", "[alias][rmsnorm_quant]") {
  Rq c;
  c.slot(kRes).strides = {127, 1};
  expect_rejected(c, {"residual: shape [4, 128] with strides [127, 1]", "would overlap", "strides[0] = 127"});
}
TEST_CASE("alias: rmsnorm_quant group scales overlap each other", "[alias][rmsnorm_quant]") {
  Rq c;
  c.use_groups(32);
  c.slot(kSc).strides = {2, 1};  // [4, 4] with rows 2 apart
  expect_rejected(c, {"scales: shape [4, 4] with strides [2, 1]", "would overlap", "strides[0] = 2"});
}
TEST_CASE("alias: rmsnorm_quant column-major group scales overlap each other", "[alias][rmsnorm_quant]") {
  Rq c;
  c.use_groups(32);
  c.slot(kSc).strides = {1, 3};  // column-major [4, 4] with a leading stride of 3 < 4 rows
  expect_rejected(c, {"scales: shape [4, 4] with strides [1, 3]", "would overlap", "strides[1] = 3"});
}
TEST_CASE("alias: rmsnorm_quant rank-3 output whose middle dimension overlaps", "[alias][rmsnorm_quant]") {
  Rq c;
  for (int k : {kIn, kRes, kOut}) c.slot(k).shape = {2, 2, 128};
  c.slot(kSc).shape = {2, 2, 1};
  c.slot(kOut).strides = {256, 100, 1};  // rows of one batch 100 bytes apart
  expect_rejected(c, {"output: shape [2, 2, 128] with strides [256, 100, 1]", "would overlap", "strides[1] = 100"});
}

// ================================================================ cast

TEST_CASE("alias: cast src and dst at the same pointer", "[alias][cast]") {
  Cast c;
  c.place(kDst, kSrc, 0);
  expect_overlap(c, kSrc, kDst);
}
TEST_CASE("alias: cast src and dst overlap partially", "[alias][cast]") {
  Cast c;
  c.place(kDst, kSrc, 1000);  // dst's first 24 bytes are src's last
  expect_overlap(c, kSrc, kDst);
}
TEST_CASE("alias: cast dst starts in the last byte of src", "[alias][cast]") {
  Cast c(DType::kBF16, DType::kF32, {2, 64});
  c.place(kDst, kSrc, c.slot(kSrc).bytes() - 1);
  expect_overlap(c, kSrc, kDst);
}
TEST_CASE("alias: cast f4e2m1 src whose last byte is dst's first", "[alias][cast]") {
  // f4e2m1 [2, 64]: 64 bytes, two elements a byte.
  Cast c(DType::k_f4e2m1, DType::kBF16, {2, 64});
  c.slot(kSrc).filled = false;  // any byte is an f4e2m1 pair
  REQUIRE(c.slot(kSrc).bytes() == 64);
  c.place(kDst, kSrc, 63);
  expect_overlap(c, kSrc, kDst);
}
TEST_CASE("alias: cast dst rows overlap each other", "[alias][cast]") {
  Cast c;
  c.slot(kDst).strides = {32, 1};
  expect_rejected(c, {"dst: shape [4, 64] with strides [32, 1]", "would overlap", "strides[0] = 32",
                      "smaller than 64"});
}
TEST_CASE("alias: cast f4e2m1 dst rows overlap each other", "[alias][cast]") {
  Cast c(DType::kF32, DType::k_f4e2m1, {4, 64});
  c.slot(kDst).strides = {32, 1};  // 16 bytes apart, 32 bytes a row
  expect_rejected(c, {"dst: shape [4, 64] with strides [32, 1]", "would overlap"});
}

// ================================================================ positive controls

TEST_CASE("alias: rmsnorm_quant adjacent views of one buffer equal the reference", "[alias][rmsnorm_quant]") {
  SECTION("dynamic per row, residual in place") {
    expect_matches_reference<Rq>([](Rq& c) { c.pack(); });
  }
  SECTION("static scale right after the output") {
    expect_matches_reference<Rq>([](Rq& c) {
      c.use_static_scale();
      c.pack();
    });
  }
  SECTION("packed scales, no residual") {
    expect_matches_reference<Rq>([](Rq& c) {
      c.use_packed();
      c.slot(kRes).present = false;
      c.pack();
    });
  }
  SECTION("column-major group scales") {
    expect_matches_reference<Rq>([](Rq& c) {
      c.use_groups(32);
      c.slot(kSc).strides = {1, 4};
      c.pack();
    });
  }
  SECTION("padded input rows, the residual right after the last input row") {
    // The input's range ends with its last row (not its last row's padding).
    expect_matches_reference<Rq>([](Rq& c) {
      c.slot(kIn).strides = {192, 1};
      c.pack();
    });
  }
}

TEST_CASE("alias: rmsnorm_quant in-place residual is read and written", "[alias][rmsnorm_quant]") {
  Rq c, r;
  c.pack();
  r.pack();
  c.prepare();
  r.prepare();
  const std::vector<uint8_t> before = c.pool();
  REQUIRE(status_name(c.call()) == "SUCCESS");
  REQUIRE(status_name(r.call_reference()) == "SUCCESS");
  // residual = round_bf16(input + residual), element by element, in its own bytes.
  const uint64_t off = c.slot(kRes).offset;
  const std::vector<uint8_t> now = c.pool();
  int changed = 0;
  for (int64_t i = 0; i < 4 * 128; ++i) {
    const auto* in = reinterpret_cast<const char*>(before.data() + c.slot(kIn).offset);
    const auto* res = reinterpret_cast<const char*>(before.data() + off);
    const float want = decode(DType::kBF16, encode<false>(DType::kBF16, decode(DType::kBF16, load_code(DType::kBF16, in, i)) +
                                                                             decode(DType::kBF16, load_code(DType::kBF16, res, i))));
    const uint32_t got = load_code(DType::kBF16, reinterpret_cast<const char*>(now.data() + off), i);
    CHECK(decode(DType::kBF16, got) == want);
    changed += got != load_code(DType::kBF16, res, i);
  }
  CHECK(changed > 0);
  CHECK(diff(r.pool(), now) == "");
}

TEST_CASE("alias: rmsnorm_quant weight is not checked with norm NONE", "[alias][rmsnorm_quant]") {
  // With norm NONE the weight is neither read nor validated: a weight inside the output is fine.
  Rq c;
  c.opts.norm = FUSEDNORM_NORM_NONE;
  c.place(kW, kOut, 0);
  c.slot(kW).filled = false;
  c.prepare();
  INFO(fusednorm_last_error());
  CHECK(status_name(c.call()) == "SUCCESS");
}

TEST_CASE("alias: cast adjacent views of one buffer equal the reference", "[alias][cast]") {
  SECTION("f32 -> f8e4m3fn") { expect_matches_reference<Cast>([](Cast& c) { c.pack(); }); }
  SECTION("bf16 -> f4e2m1 (dst right after src)") {
    struct C4 : Cast {
      C4() : Cast(DType::kBF16, DType::k_f4e2m1, {2, 64}) {}
    };
    expect_matches_reference<C4>([](C4& c) { c.pack(); });
  }
}

// ================================================================ zero sizes

TEST_CASE("alias: rmsnorm_quant zero hidden size names H", "[alias][rmsnorm_quant]") {
  SECTION("input [4, 0]") {
    Rq c;
    for (int k : {kIn, kRes, kOut}) c.slot(k).shape = {4, 0};
    c.slot(kW).shape = {0};
    expect_rejected(c, {"input.shape[1] = 0", "hidden size H", ">= 1"});
  }
  SECTION("input [2, 3, 0], no residual, norm NONE, data NULL") {
    Rq c;
    c.opts.norm = FUSEDNORM_NORM_NONE;
    c.slot(kRes).present = false;
    c.slot(kW).present = false;
    c.slot(kIn).shape = c.slot(kOut).shape = {2, 3, 0};
    c.slot(kSc).shape = {2, 3, 1};
    DLTensor in = *c.ptr(kIn);
    in.data = nullptr;
    c.prepare();
    const std::vector<uint8_t> before = c.pool();
    CHECK(status_name(fusednorm_rmsnorm_quant(&in, nullptr, nullptr, c.ptr(kOut), c.ptr(kSc), &c.opts, nullptr)) ==
          "INVALID_ARGUMENT");
    CHECK_THAT(std::string(fusednorm_last_error()), Catch::Contains("input.shape[2] = 0") &&
                                                        Catch::Contains("hidden size H"));
    CHECK(diff(before, c.pool()) == "");
  }
}

TEST_CASE("alias: cast with a 0-length last dimension is a no-op", "[alias][cast]") {
  for (bool strided : {false, true}) {
    DYNAMIC_SECTION((strided ? "strides [64, 1]" : "compact strides")) {
      Cast c(DType::kF32, DType::k_f8e4m3fn, {4, 0});
      if (strided) c.slot(kDst).strides = c.slot(kSrc).strides = {64, 1};
      c.place(kDst, kSrc, 0);  // empty tensors have no bytes: they overlap nothing
      c.prepare();
      const std::vector<uint8_t> before = c.pool();
      INFO(fusednorm_last_error());
      CHECK(status_name(c.call()) == "SUCCESS");
      CHECK(status_name(c.call_reference()) == "SUCCESS");
      CHECK(diff(before, c.pool()) == "");
    }
  }
}

}  // namespace test
}  // namespace fusednorm
