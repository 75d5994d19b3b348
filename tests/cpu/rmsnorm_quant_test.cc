// rmsnorm_quant on the CPU backend: the Highway path equals the scalar reference byte for byte
// on every compiled target, for every option combination; special rows; thread and batch
// invariance; and checks of the reference itself against plain double-precision math.
#include <math.h>

#include <catch2/catch.hpp>
#include <tbb/task_arena.h>

#include "common/rmsnorm_case.h"
#include "common/targets.h"
#include "core/validate.h"

namespace fusednorm {
namespace test {
namespace {

const auto& kHs = kTestHs;
const auto& kIns = kTestIns;
const auto& kOuts = kTestOuts;

// Runs the case on every target and compares with the reference (computed once).
void check_case(CaseTensors& base, uint64_t seed) {
  auto ref = base.clone_inputs();
  REQUIRE(ref->run_reference() == FUSEDNORM_SUCCESS);
  for_each_target([&](int64_t) {
    auto lib = base.clone_inputs();
    INFO(base.spec.describe() << " seed=" << seed);
    const fusednorm_status st = lib->run_library();
    INFO(fusednorm_last_error());
    REQUIRE(st == FUSEDNORM_SUCCESS);
    REQUIRE(compare_outputs(*lib, *ref) == "");
  });
}

TEST_CASE("rmsnorm_quant: SIMD equals the reference for every option combination, every target",
          "[rmsnorm_quant][cpu]") {
  const uint64_t seed = Catch::rngSeed() ? Catch::rngSeed() : 20261122;
  std::mt19937_64 rng(seed);
  const int64_t cases = for_each_option_combination(rng, {2, 2}, {3}, [&](const CaseSpec& s) {
    CaseTensors t(s);
    t.fill_random(rng);
    check_case(t, seed);
  });
  INFO("cases " << cases);
  CHECK(cases == 3 * 6 * int64_t(scale_variants().size()) * 4);
}

TEST_CASE("rmsnorm_quant: every H of the list, main modes, every target", "[rmsnorm_quant][cpu]") {
  const uint64_t seed = Catch::rngSeed() ? Catch::rngSeed() : 7;
  std::mt19937_64 rng(seed);
  for (int64_t h : kHs)
    for (int mode : {FUSEDNORM_SCALE_STATIC, FUSEDNORM_SCALE_DYNAMIC_ROW, FUSEDNORM_SCALE_DYNAMIC_GROUP})
      for (DType in : {DType::kBF16, DType::kF32}) {
        CaseSpec s;
        s.in = s.w = in;
        s.mode = mode;
        s.group = 32;
        if (mode == FUSEDNORM_SCALE_DYNAMIC_GROUP && h % 32 != 0) continue;
        s.h = h;
        s.lead = {4};
        s.residual = mode == FUSEDNORM_SCALE_DYNAMIC_ROW;
        CaseTensors t(s);
        t.fill_random(rng);
        check_case(t, seed);
      }
}

// Rows that stress the edges (tests/common/rmsnorm_case.h): zeros, subnormals, huge values,
// squares that overflow, NaN, Inf; and the edge policy of docs/numerics.md checked directly.
TEST_CASE("rmsnorm_quant: special rows on every target", "[rmsnorm_quant][cpu]") {
  for (DType in : kIns)
    for (DType out : kOuts)
      for (int variant = 0; variant < kSpecialVariants; ++variant) {
        CaseTensors t(special_spec(in, out, variant));
        const CaseSpec& s = t.spec;
        fill_special_rows(t);
        check_case(t, 0);
        auto ref = t.clone_inputs();
        REQUIRE(ref->run_reference() == FUSEDNORM_SUCCESS);
        INFO(s.describe());
        const bool int8 = out == DType::kI8;
        // A NaN y encodes as the format's NaN code (int8: 0); with norm, rows 3, 4, 8, 9, 10 are
        // all NaN (non-finite sum of squares), never silent zeros with a finite scale.
        auto all_nan_codes = [&](int64_t r) {
          for (int64_t i = 0; i < s.h; ++i) {
            const uint32_t c = ref->output->code(r, i);
            if (int8 ? c != 0 : !std::isnan(decode(out, c))) return false;
          }
          return true;
        };
        if (s.norm) {
          for (int64_t r : {3, 4, 8, 9, 10}) {
            CHECK(all_nan_codes(r));
            if (s.mode != FUSEDNORM_SCALE_STATIC)
              for (int64_t g = 0; g < s.groups(); ++g) CHECK(std::isnan(ref->scales->get(r, g)));
          }
          CHECK(all_nan_codes(2));  // squares overflow (or, in f16, the values are Inf)
          if (s.mode == FUSEDNORM_SCALE_DYNAMIC_ROW && s.scale == DType::kF32) {
            CHECK(ref->scales->get(0, 0) == 0.0f);  // zero row: scale 0 (min_scale 0)
            for (int64_t i = 0; i < s.h; ++i) CHECK((ref->output->code(0, i) & 0x7F) == 0);
          }
        } else if (s.mode == FUSEDNORM_SCALE_DYNAMIC_ROW) {
          for (int64_t r : {3, 4, 9, 10}) CHECK(std::isnan(ref->scales->get(r, 0)));
          // f16 scale of the huge row: amax / qmax is above 65504, stored as +Inf, codes 0.
          if (s.scale == DType::kF16 && in != DType::kF16) {
            CHECK(std::isinf(ref->scales->get(2, 0)));
            for (int64_t i = 0; i < s.h; ++i) CHECK((ref->output->code(2, i) & 0x7F) == 0);
          }
        }
      }
}

// The same rows at H 8192, where per-row scales (f32 and bf16 input) and groups (f32 input) take
// the maxima and then the codes from x again (no y buffer beyond L1: rmsnorm_quant.cc,
// per_row_from_x and groups_from_x): NaN and Inf rows (groups: the fallback to the y buffer),
// saturating and clamped (qmax) rows, each encoder branch of those paths.
TEST_CASE("rmsnorm_quant: special rows at H 8192, every target", "[rmsnorm_quant][cpu]") {
  for (DType in : kIns)
    for (DType out : kOuts)
      for (int variant : {0, 1, 2, 3, 4, 5, 6}) {
        // 6: variant 2 with a clamp (qmax below the format's largest value).
        CaseTensors t([&] {
          CaseSpec s = special_spec(in, out, variant == 6 ? 2 : variant);
          s.h = 8192;
          if (variant == 6) s.qmax = out == DType::kI8 ? 100.0f : 8.0f;
          return s;
        }());
        fill_special_rows(t);
        check_case(t, 0);
      }
}

TEST_CASE("rmsnorm_quant: static scale with an Inf, NaN or huge weight, every target", "[rmsnorm_quant][cpu]") {
  // A static row takes the NaN-free encoder only where inv, every weight and 1 / s are finite: an
  // Inf weight times x = 0 and a NaN weight give NaN codes, a huge finite weight overflows y to
  // +-Inf (saturated), each as the reference writes them.
  std::mt19937_64 rng(5);
  for (DType out : kOuts)
    for (int kind = 0; kind < 3; ++kind) {
      CaseSpec s;
      s.in = s.w = DType::kF32;
      s.out = out;
      s.mode = FUSEDNORM_SCALE_STATIC;
      s.h = 100;
      s.lead = {4};
      CaseTensors t(s);
      t.fill_random(rng);
      t.weight->set(0, 7, kind == 0 ? INFINITY : kind == 1 ? NAN : 3e38f);
      t.input->set(1, 7, 0.0f);
      check_case(t, uint64_t(kind));
    }
}

// Calls whose outputs outgrow the threads' private caches write their codes with streaming
// stores (backends/cpu/parallel.h stream_outputs: at least 2 MiB a thread; one thread here, 520
// rows of 4096 codes). The same bytes as the reference on every target, for each way of scaling,
// packed scales (rows of H + 4 bytes: most stores misaligned for streaming) and a misaligned,
// padded layout (plain stores where a vector is not aligned).
TEST_CASE("rmsnorm_quant: outputs large enough for streaming stores, every target", "[rmsnorm_quant][cpu]") {
  std::mt19937_64 rng(31);
  tbb::task_arena single(1);
  single.execute([&] {
    for (int variant = 0; variant < 5; ++variant) {
      CaseSpec s;
      s.h = 4096;
      s.lead = {520};
      s.mode = variant == 0 ? FUSEDNORM_SCALE_STATIC : variant == 2 ? FUSEDNORM_SCALE_DYNAMIC_GROUP : FUSEDNORM_SCALE_DYNAMIC_ROW;
      if (variant == 3) s.placement = FUSEDNORM_SCALES_PACKED_ROW_END;
      if (variant == 4) {
        s.row_pad = 3;
        s.misalign = 2;
        s.residual = true;
        s.out = DType::kI8;
      }
      CaseTensors t(s);
      t.fill_random(rng);
      check_case(t, 31);
    }
  });
}

TEST_CASE("rmsnorm_quant: results do not depend on the thread count", "[rmsnorm_quant][cpu]") {
  std::mt19937_64 rng(11);
  for (int mode : {FUSEDNORM_SCALE_DYNAMIC_ROW, FUSEDNORM_SCALE_DYNAMIC_GROUP}) {
    CaseSpec s;
    s.mode = mode;
    s.h = 4096;
    s.lead = {257};
    s.residual = true;
    CaseTensors t(s);
    t.fill_random(rng);
    auto one = t.clone_inputs(), many = t.clone_inputs();
    tbb::task_arena single(1);
    fusednorm_status st1 = FUSEDNORM_INTERNAL_ERROR;
    single.execute([&] { st1 = one->run_library(); });
    REQUIRE(st1 == FUSEDNORM_SUCCESS);
    tbb::task_arena wide;  // every core; 4 rows per task: many splits
    fusednorm_status st2 = FUSEDNORM_INTERNAL_ERROR;
    wide.execute([&] { st2 = many->run_library(); });
    REQUIRE(st2 == FUSEDNORM_SUCCESS);
    REQUIRE(compare_outputs(*one, *many) == "");
  }
}

TEST_CASE("rmsnorm_quant: a row alone equals the same row inside a batch of 1000", "[rmsnorm_quant][cpu]") {
  std::mt19937_64 rng(12);
  for (int64_t h : {17, 4096}) {
    CaseSpec batch;
    batch.h = h;
    batch.lead = {1000};
    batch.group = 32;
    batch.mode = h % 32 == 0 ? FUSEDNORM_SCALE_DYNAMIC_GROUP : FUSEDNORM_SCALE_DYNAMIC_ROW;
    CaseTensors big(batch);
    big.fill_random(rng);
    REQUIRE(big.run_library() == FUSEDNORM_SUCCESS);
    CaseSpec alone = batch;
    alone.lead = {1};
    for (int64_t r : {int64_t(0), int64_t(499), int64_t(999)}) {
      CaseTensors one(alone);
      memcpy(one.input->row(0), big.input->row(r), size_t(h * 2));
      one.weight->copy_from(*big.weight);
      REQUIRE(one.run_library() == FUSEDNORM_SUCCESS);
      REQUIRE(memcmp(one.output->row(0), big.output->row(r), size_t(h)) == 0);
      const int64_t g = batch.mode == FUSEDNORM_SCALE_DYNAMIC_GROUP ? h / 32 : 1;
      REQUIRE(memcmp(one.scales->row(0), big.scales->row(r), size_t(g * 4)) == 0);
    }
  }
}

TEST_CASE("rmsnorm_quant: rank 1 and rank 4 with strided leading dimensions", "[rmsnorm_quant][cpu]") {
  std::mt19937_64 rng(13);
  for (auto lead : {std::vector<int64_t>{}, std::vector<int64_t>{2, 1, 3}}) {
    CaseSpec s;
    s.lead = lead;
    s.h = 333;
    s.row_pad = 3;
    s.residual = true;
    CaseTensors t(s);
    t.fill_random(rng);
    check_case(t, 13);
  }
}

// The reference itself against plain double-precision arithmetic: the scale is max|y| / qmax
// and dequantized codes approximate y within the format's precision.
TEST_CASE("rmsnorm_quant: the reference computes RMSNorm and a max-abs scale", "[rmsnorm_quant][reference]") {
  std::mt19937_64 rng(14);
  for (DType out : {DType::k_f8e4m3fn, DType::kI8, DType::k_f8e5m2}) {
    CaseSpec s;
    s.in = s.w = DType::kF32;
    s.out = out;
    s.h = 256;
    s.lead = {6};
    s.weight_offset = 1.0f;
    CaseTensors t(s);
    t.fill_random(rng);
    REQUIRE(t.run_reference() == FUSEDNORM_SUCCESS);
    const double rel = out == DType::kI8 ? 1.0 / 127 : out == DType::k_f8e5m2 ? 0.125 : 0.0625;
    for (int64_t r = 0; r < 6; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < s.h; ++i) ss += double(t.input->get(r, i)) * t.input->get(r, i);
      const double inv = 1.0 / std::sqrt(ss / s.h + s.eps);
      double amax = 0;
      std::vector<double> y(size_t(s.h));
      for (int64_t i = 0; i < s.h; ++i) {
        y[size_t(i)] = t.input->get(r, i) * inv * (t.weight->get(0, i) + 1.0);
        amax = std::max(amax, std::fabs(y[size_t(i)]));
      }
      const double scale = t.scales->get(r, 0);
      CHECK(scale == Approx(amax / quant_max(out)).epsilon(1e-5));
      for (int64_t i = 0; i < s.h; ++i) {
        const double deq = decode(out, t.output->code(r, i)) * scale;
        CHECK(std::fabs(deq - y[size_t(i)]) <= rel * std::fabs(y[size_t(i)]) + amax * 1e-2);
      }
    }
  }
}

TEST_CASE("rmsnorm_quant: scale_ub, min_scale, qmax and packed scales behave as specified",
          "[rmsnorm_quant][reference]") {
  CaseSpec s;
  s.in = s.w = DType::kF32;
  s.h = 32;
  s.lead = {2};
  s.norm = false;  // y = x: easy to reason about
  CaseTensors base(s);
  for (int64_t i = 0; i < s.h; ++i) {
    base.input->set(0, i, float(i) - 16.0f);  // max |x| = 16
    base.input->set(1, i, 1e-9f);
  }
  for (int64_t i = 0; i < s.h; ++i) base.weight->set(0, i, 1.0f);
  {  // scale_ub clips the scale; values above clip to the format max
    CaseSpec u = s;
    u.scale_ub = 4.0f;
    CaseTensors t(u);
    t.input->copy_from(*base.input);
    REQUIRE(t.run_library() == FUSEDNORM_SUCCESS);
    CHECK(t.scales->get(0, 0) == 4.0f / 448.0f);
    CHECK(t.output->code(0, 0) == 0xFE);  // -16 saturates to -448
  }
  {  // min_scale bounds the scale from below
    CaseSpec m = s;
    m.min_scale = 1e-6f;
    CaseTensors t(m);
    t.input->copy_from(*base.input);
    REQUIRE(t.run_library() == FUSEDNORM_SUCCESS);
    CHECK(t.scales->get(1, 0) == 1e-6f);
  }
  {  // an explicit qmax is both the divisor and the clamp
    CaseSpec q = s;
    q.qmax = 224.0f;
    q.out = DType::k_f8e4m3fnuz;
    q.scale_ub = 4.0f;
    CaseTensors t(q);
    t.input->copy_from(*base.input);
    REQUIRE(t.run_library() == FUSEDNORM_SUCCESS);
    CHECK(t.scales->get(0, 0) == 4.0f / 224.0f);
    CHECK(decode(DType::k_f8e4m3fnuz, t.output->code(0, 0)) == -224.0f);
  }
  {  // packed: bytes H..H+3 of each output row hold the f32 scale, little-endian
    CaseSpec p = s;
    p.placement = FUSEDNORM_SCALES_PACKED_ROW_END;
    CaseTensors t(p);
    t.input->copy_from(*base.input);
    REQUIRE(t.run_library() == FUSEDNORM_SUCCESS);
    const uint8_t* row = reinterpret_cast<const uint8_t*>(t.output->row(0)) + s.h;
    const uint32_t bits = uint32_t(row[0]) | uint32_t(row[1]) << 8 | uint32_t(row[2]) << 16 | uint32_t(row[3]) << 24;
    CHECK(math::float_of(bits) == 16.0f / 448.0f);
  }
  {  // column-major scales hold the same values as row-major ones
    CaseSpec g = s;
    g.mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
    g.group = 32;
    g.h = 64;
    g.lead = {5};
    CaseSpec gc = g;
    gc.col_major_scales = true;
    CaseTensors a(g), b(gc);
    std::mt19937_64 rng(3);
    a.fill_random(rng);
    b.input->copy_from(*a.input);
    REQUIRE(a.run_library() == FUSEDNORM_SUCCESS);
    REQUIRE(b.run_library() == FUSEDNORM_SUCCESS);
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t k = 0; k < 2; ++k) {
        const float col = decode(DType::kF32, load_code(DType::kF32, b.scales->row(k), r));
        CHECK(a.scales->get(r, k) == col);
      }
  }
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
