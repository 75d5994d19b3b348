// rmsnorm_fp4 and dequantize_fp4 on the CPU backend: the Highway path equals the scalar reference
// byte for byte on every compiled target for every format, layout and option; the reference is
// checked against double-precision arithmetic (the dequantized result within half an e2m1 step
// of y), the swizzled layout against the row-major one; special rows; bad input.
#include <math.h>

#include <catch2/catch.hpp>
#include <tbb/task_arena.h>

#include <functional>

#include "common/fp4_case.h"
#include "common/targets.h"

namespace fusednorm {
namespace test {
namespace {

void check_fp4_case(Fp4Tensors& base) {
  auto ref = base.clone_inputs();
  REQUIRE(ref->run_reference() == FUSEDNORM_SUCCESS);
  for_each_target([&](int64_t) {
    auto lib = base.clone_inputs();
    INFO(base.spec.describe());
    const fusednorm_status st = lib->run_library();
    INFO(fusednorm_last_error());
    REQUIRE(st == FUSEDNORM_SUCCESS);
    REQUIRE(compare_fp4(*lib, *ref) == "");
  });
}

constexpr int64_t kFp4Hs[] = {32, 64, 96, 160, 224, 2048, 4096, 5120, 7168, 8192, 16384};

TEST_CASE("rmsnorm_fp4: SIMD equals the reference for every option, every target", "[rmsnorm_fp4][cpu]") {
  const uint64_t seed = Catch::rngSeed() ? Catch::rngSeed() : 20261125;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> coin(0, 1), kind(0, 3);
  int64_t cases = 0, hi = 0;
  for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4})
    for (DType in : {DType::kF32, DType::kF16, DType::kBF16})
      for (bool swizzled : {false, true})
        for (int flags = 0; flags < 4; ++flags) {
          Fp4Spec s;
          s.format = format;
          s.in = in;
          s.w = coin(rng) ? in : DType::kF32;
          s.swizzled = swizzled;
          s.residual = flags & 1;
          s.norm = !(flags & 2);
          s.global_scale = format == FUSEDNORM_FP4_NVFP4 && coin(rng);
          s.gs = s.global_scale ? ldexpf(1.0f + 0.37f * float(coin(rng)), 4 * coin(rng)) : 1.0f;
          s.uint8_views = coin(rng);
          s.weight_offset = coin(rng) ? 1.0f : 0.0f;
          s.h = kFp4Hs[size_t(hi++) % (sizeof kFp4Hs / sizeof kFp4Hs[0])];
          s.lead = swizzled && coin(rng) ? std::vector<int64_t>{2, 67} : std::vector<int64_t>{3};
          s.row_pad = coin(rng) ? 32 : 0;
          s.misalign = coin(rng) ? 2 : 0;
          INFO(s.describe() << " seed " << seed);
          Fp4Tensors t(s);
          t.fill_random(rng, kind(rng));
          check_fp4_case(t);
          ++cases;
        }
  CHECK(cases == 2 * 3 * 2 * 4);
}

TEST_CASE("rmsnorm_fp4: NVFP4 with any global scale value equals the reference, every target", "[rmsnorm_fp4][cpu]") {
  // The global scale is not validated (numerics.md §3b): zero, negative, subnormal, huge, Inf and
  // NaN values give what the formulas give, codes of every sign and the NaN scale code included.
  std::mt19937_64 rng(23);
  const float values[] = {0.0f, -0.0f, -3.0f, 0x1p-140f, 0x1p-126f, 0x1p100f, 3.0e38f, INFINITY, -INFINITY, NAN};
  for (float gs : values)
    for (int64_t h : {int64_t(96), int64_t(4096)}) {
      Fp4Spec s;
      s.format = FUSEDNORM_FP4_NVFP4;
      s.in = DType::kBF16;
      s.w = DType::kBF16;
      s.global_scale = true;
      s.gs = gs;
      s.h = h;
      s.lead = {5};
      INFO(s.describe() << " gs " << gs);
      Fp4Tensors t(s);
      t.fill_random(rng, int(h % 4));
      check_fp4_case(t);
    }
}

// y in double, from the inputs as the reference sees them (the residual sum rounded to the
// input dtype, then widened).
std::vector<double> y_double(Fp4Tensors& t, Fp4Tensors& after, int64_t r) {
  const Fp4Spec& s = t.spec;
  std::vector<double> x(size_t(s.h)), y(size_t(s.h));
  double ss = 0;
  for (int64_t i = 0; i < s.h; ++i) {
    x[size_t(i)] = s.residual ? after.residual->get(r, i) : t.input->get(r, i);
    ss += x[size_t(i)] * x[size_t(i)];
  }
  const double inv = s.norm ? 1.0 / sqrt(ss / double(s.h) + double(s.eps)) : 1.0;
  for (int64_t i = 0; i < s.h; ++i)
    y[size_t(i)] = s.norm ? x[size_t(i)] * inv * (double(t.weight->get(0, i)) + s.weight_offset) : x[size_t(i)];
  return y;
}

TEST_CASE("rmsnorm_fp4: the reference against double precision: scales and |y - deq| <= half a step",
          "[rmsnorm_fp4][cpu]") {
  std::mt19937_64 rng(5);
  for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4})
    for (bool residual : {false, true})
      for (int kind = 0; kind < 4; ++kind) {
        Fp4Spec s;
        s.format = format;
        s.in = DType::kF32;
        s.w = DType::kF32;
        s.residual = residual;
        s.global_scale = format == FUSEDNORM_FP4_NVFP4;
        s.gs = 2688.0f / 5.5f;  // 448 * 6 / amax, as a calibrated global scale is
        s.h = 256;
        s.lead = {8};
        Fp4Tensors t(s);
        t.fill_random(rng, kind);
        auto ref = t.clone_inputs();
        REQUIRE(ref->run_reference() == FUSEDNORM_SUCCESS);
        const double gs = format == FUSEDNORM_FP4_NVFP4 ? double(s.gs) : 1.0;
        for (int64_t r = 0; r < s.rows(); ++r) {
          const std::vector<double> y = y_double(t, *ref, r);
          for (int64_t b = 0; b < s.h / s.block(); ++b) {
            double amax = 0;
            for (int64_t i = b * s.block(); i < (b + 1) * s.block(); ++i) amax = fmax(amax, fabs(y[size_t(i)]));
            const uint32_t sf = fp4_scale_code(*ref, r, b);
            const double scale = decode(s.scale_type(), sf);
            INFO(s.describe() << " row " << r << " block " << b << " amax " << amax << " scale " << scale);
            // The scale: MXFP4 the smallest power of two >= amax / 6 (up to f32 rounding of y);
            // NVFP4 gs * amax / 6 to the nearest e4m3 value (within 2^-4 relative).
            if (format == FUSEDNORM_FP4_MXFP4) {
              CHECK(scale >= amax / 6 * (1 - 1e-6));
              CHECK((amax == 0 || scale < amax / 6 * 2 * (1 + 1e-6)));
            } else {
              // (saturating at 448; e4m3 subnormals are 2^-9 apart)
              const double want = fmin(gs * amax / 6, 448.0);
              CHECK(fabs(scale - want) <= want / 16 * (1 + 1e-6) + 0x1p-10);
            }
            for (int64_t i = b * s.block(); i < (b + 1) * s.block(); ++i) {
              const double deq = e2m1_value(ref->output->code(r, i)) * scale / gs;
              const double t_abs = scale > 0 ? fabs(y[size_t(i)]) * gs / scale : 0;  // |y| in code units
              const double step = t_abs < 2 ? 0.5 : t_abs < 4 ? 1 : 2;
              const double bound = (step / 2 + fmax(0.0, t_abs - 6)) * scale / gs;
              CHECK(fabs(y[size_t(i)] - deq) <= bound * (1 + 1e-5) + 1e-30);
            }
          }
        }
      }
}

TEST_CASE("rmsnorm_fp4: swizzled scales are the row-major scales placed by the 128x4 layout, padding 0",
          "[rmsnorm_fp4][cpu]") {
  std::mt19937_64 rng(8);
  const auto check = [&](int format, int64_t rows, int64_t h) {
    Fp4Spec s;
    s.format = format;
    s.h = h;
    s.lead = {rows};
    Fp4Tensors rm(s);
    rm.fill_random(rng);
    s.swizzled = true;
    Fp4Tensors sw(s);
    sw.input->copy_from(*rm.input);
    sw.weight->copy_from(*rm.weight);
    REQUIRE(rm.run_library() == FUSEDNORM_SUCCESS);
    REQUIRE(sw.run_library() == FUSEDNORM_SUCCESS);
    INFO(s.describe());
    REQUIRE(first_difference("output", *rm.output, *sw.output) == "");
    const int64_t blocks = h / s.block(), tiles = (blocks + 3) / 4, padded = (rows + 127) / 128 * 128;
    REQUIRE(sw.scales->cols() == padded * tiles * 4);
    std::vector<int> seen(size_t(sw.scales->cols()), 0);
    for (int64_t r = 0; r < padded; ++r)
      for (int64_t k = 0; k < 4 * tiles; ++k) {
        const uint32_t want = r < rows && k < blocks ? rm.scales->code(r, k) : 0;
        CHECK(fp4_scale_code(sw, r, k) == want);
        seen[size_t((r / 128) * tiles * 512 + (k / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + k % 4)]++;
      }
    for (int v : seen) REQUIRE(v == 1);  // the layout is a permutation: every byte written once
  };
  for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4})
    for (int64_t rows : {1, 127, 128, 130, 300})
      for (int64_t h : {32, 96, 160, 2048}) check(format, rows, h);
  // The CPU backend writes a group of 4 rows' scales together: row blocks (parallel.h's
  // block_rows: 65536 / H rows, one thread) of 3 rows (H 21824), which start and end inside
  // groups, and of 1 row (H 65536).
  tbb::task_arena single(1);
  single.execute([&] {
    for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4}) {
      check(format, 40, 21824);
      check(format, 7, 65536);
    }
  });
}

TEST_CASE("rmsnorm_fp4: special rows (zeros, huge, subnormal, NaN, Inf) on every target", "[rmsnorm_fp4][cpu]") {
  for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4})
    for (DType in : {DType::kF32, DType::kBF16, DType::kF16})
      for (bool norm : {true, false}) {
        Fp4Spec s;
        s.format = format;
        s.in = in;
        s.norm = norm;
        s.h = 64;
        s.lead = {6};
        Fp4Tensors t(s);
        std::mt19937_64 rng(3);
        t.fill_random(rng);
        for (int64_t i = 0; i < s.h; ++i) {
          t.input->set(0, i, 0.0f);                                 // zeros
          t.input->set(1, i, i == 5 ? 3e38f : 1.0f);                // one huge value (f16/bf16: Inf)
          t.input->set(2, i, ldexpf(float(i % 7) - 3.0f, -140));    // subnormals (f16: zero)
          t.input->set(3, i, i == 40 ? NAN : 0.25f);                // a NaN in the third block
          t.input->set(4, i, i == 20 ? -INFINITY : 0.25f);          // an Inf in the second block
        }
        check_fp4_case(t);
        auto ref = t.clone_inputs();
        REQUIRE(ref->run_reference() == FUSEDNORM_SUCCESS);
        INFO(s.describe());
        const uint32_t nan_code = format == FUSEDNORM_FP4_NVFP4 ? 0x7F : 0xFF;
        for (int64_t k = 0; k < s.h / s.block(); ++k) CHECK(ref->scales->code(0, k) == 0);
        for (int64_t i = 0; i < s.h; ++i) CHECK((ref->output->code(0, i) & 7) == 0);
        for (int64_t r : {3, 4}) {
          const int64_t bad = (r == 3 ? 40 : 20) / s.block();
          for (int64_t k = 0; k < s.h / s.block(); ++k) {
            // With the norm, a NaN/Inf makes the row's inv_rms NaN: every block is NaN.
            const bool nan_block = norm || k == bad;
            CHECK((ref->scales->code(r, k) == nan_code) == nan_block);
            if (nan_block)
              for (int64_t i = k * s.block(); i < (k + 1) * s.block(); ++i) CHECK((ref->output->code(r, i) & 7) == 0);
          }
        }
      }
}

TEST_CASE("rmsnorm_fp4: results depend neither on the thread count nor on the other rows", "[rmsnorm_fp4][cpu]") {
  std::mt19937_64 rng(21);
  Fp4Spec s;
  s.h = 4096;
  s.lead = {257};
  s.residual = true;
  s.swizzled = true;
  Fp4Tensors t(s);
  t.fill_random(rng);
  auto one = t.clone_inputs(), many = t.clone_inputs();
  tbb::task_arena single(1);
  fusednorm_status st1 = FUSEDNORM_INTERNAL_ERROR, st2 = st1;
  single.execute([&] { st1 = one->run_library(); });
  tbb::task_arena wide;
  wide.execute([&] { st2 = many->run_library(); });
  REQUIRE(st1 == FUSEDNORM_SUCCESS);
  REQUIRE(st2 == FUSEDNORM_SUCCESS);
  REQUIRE(compare_fp4(*one, *many) == "");
  // Row 100 alone equals row 100 of the batch.
  Fp4Spec s1 = s;
  s1.lead = {1};
  s1.swizzled = false;
  Fp4Tensors alone(s1);
  memcpy(alone.input->row(0), t.input->row(100), size_t(s.h) * 2);
  memcpy(alone.residual->row(0), t.residual->row(100), size_t(s.h) * 2);
  alone.weight->copy_from(*t.weight);
  REQUIRE(alone.run_library() == FUSEDNORM_SUCCESS);
  CHECK(memcmp(alone.output->row(0), many->output->row(100), size_t(s.h / 2)) == 0);
  for (int64_t k = 0; k < s.h / 16; ++k) CHECK(alone.scales->code(0, k) == fp4_scale_code(*many, 100, k));
}

TEST_CASE("dequantize_fp4: every target equals the reference and dec(q) * dec(sf) / gs", "[rmsnorm_fp4][cpu]") {
  std::mt19937_64 rng(9);
  for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4})
    for (bool swizzled : {false, true})
      for (DType out : {DType::kF32, DType::kF16, DType::kBF16}) {
        Fp4Spec s;
        s.format = format;
        s.swizzled = swizzled;
        s.global_scale = format == FUSEDNORM_FP4_NVFP4;
        s.gs = 37.5f;
        s.h = 224;
        s.lead = {5};
        Fp4Tensors t(s);
        t.fill_random(rng);
        REQUIRE(t.run_library() == FUSEDNORM_SUCCESS);
        std::vector<int64_t> shape = s.lead;
        shape.push_back(s.h);
        HostTensor want(out, shape), ref(out, shape);
        const auto o = s.dequant_options();
        DLTensor* gs = s.global_scale ? t.gs->dl() : nullptr;
        REQUIRE(reference::dequantize_fp4(t.output->dl(), t.scales->dl(), gs, ref.dl(), &o) == FUSEDNORM_SUCCESS);
        for (int64_t r = 0; r < s.rows(); ++r)
          for (int64_t i = 0; i < s.h; ++i) {
            const float sc = decode(s.scale_type(), fp4_scale_code(t, r, i / s.block()));
            const float v = float(e2m1_value(t.output->code(r, i))) * sc / (s.global_scale ? s.gs : 1.0f);
            want.set(r, i, v);
          }
        INFO(s.describe() << " out " << dtype_name(out));
        REQUIRE(first_difference("dequantized", want, ref) == "");
        for_each_target([&](int64_t) {
          HostTensor lib(out, shape);
          ByteView q8(t.output->dl());
          REQUIRE(fusednorm_dequantize_fp4(&q8.dl, t.scales->dl(), gs, lib.dl(), &o, nullptr) == FUSEDNORM_SUCCESS);
          REQUIRE(first_difference("dequantized", lib, ref) == "");
        });
      }
}

// Bad input: a status, a message naming the argument and its values, nothing written.
TEST_CASE("rmsnorm_fp4: bad input is rejected with a message, nothing written", "[rmsnorm_fp4][cpu]") {
  struct Bad {
    const char* what;
    Fp4Spec spec;
    std::function<fusednorm_status(Fp4Tensors&)> call;
    fusednorm_status status;
    const char* needle;
  };
  Fp4Spec nv;
  nv.h = 64;
  Fp4Spec mx = nv;
  mx.format = FUSEDNORM_FP4_MXFP4;
  Fp4Spec nv_sw = nv;
  nv_sw.swizzled = true;
  auto run = [](Fp4Tensors& t) { return t.run_library(); };
  std::vector<int64_t> short_shape = {3, 3}, wide_shape = {3, 40};
  std::vector<Bad> bad = {
      {"H not a multiple of the block", [] { Fp4Spec s; s.h = 40; return s; }(), run, FUSEDNORM_INVALID_ARGUMENT,
       "not a multiple of the NVFP4 block (16)"},
      {"MXFP4 with a global scale", [&] { Fp4Spec s = mx; s.global_scale = true; return s; }(), run,
       FUSEDNORM_INVALID_ARGUMENT, "global_scale must be NULL for MXFP4"},
      {"too few row-major scales", nv,
       [&](Fp4Tensors& t) { t.scales->dl()->shape = short_shape.data(); return t.run_library(); },
       FUSEDNORM_INVALID_ARGUMENT, "must end in 4"},
      {"swizzled scales too small", nv_sw,
       [&](Fp4Tensors& t) { t.scales->dl()->shape[0] -= 1; return t.run_library(); }, FUSEDNORM_INVALID_ARGUMENT,
       "take exactly 512"},
      {"wrong scale dtype", nv,
       [](Fp4Tensors& t) { t.scales->dl()->dtype = dl_from_dtype(DType::kE8M0); return t.run_library(); },
       FUSEDNORM_UNSUPPORTED, "NVFP4 scales are f8e4m3fn"},
      {"output not FP4", nv,
       [](Fp4Tensors& t) { t.output->dl()->dtype = dl_from_dtype(DType::k_f8e4m3fn); return t.run_library(); },
       FUSEDNORM_UNSUPPORTED, "output.dtype = f8e4m3fn"},
      {"uint8 output of the wrong width", [&] { Fp4Spec s = nv; s.uint8_views = true; return s; }(),
       [&](Fp4Tensors& t) {
         const auto o = t.spec.options();
         ByteView out(t.output->dl());
         out.shape.back() = 40;
         return fusednorm_rmsnorm_fp4(t.input->dl(), nullptr, t.weight->dl(), &out.dl, t.scales->dl(), nullptr, &o,
                                      nullptr);
       },
       FUSEDNORM_INVALID_ARGUMENT, "must end in 64 FP4 elements (32 bytes)"},
      {"scales overlap the output", nv,
       [](Fp4Tensors& t) {
         const auto o = t.spec.options();
         DLTensor sc = *t.scales->dl();
         sc.data = t.output->dl()->data;
         return fusednorm_rmsnorm_fp4(t.input->dl(), nullptr, t.weight->dl(), t.output->dl(), &sc, nullptr, &o,
                                      nullptr);
       },
       FUSEDNORM_INVALID_ARGUMENT, "overlap"},
      {"bad format", nv,
       [](Fp4Tensors& t) {
         auto o = t.spec.options();
         o.format = 7;
         return fusednorm_rmsnorm_fp4(t.input->dl(), nullptr, t.weight->dl(), t.output->dl(), t.scales->dl(),
                                      nullptr, &o, nullptr);
       },
       FUSEDNORM_INVALID_ARGUMENT, "options->format = 7"},
  };
  (void)wide_shape;
  for (Bad& b : bad) {
    INFO(b.what);
    Fp4Tensors t(b.spec);
    std::mt19937_64 rng(1);
    t.fill_random(rng);
    const std::vector<uint8_t> out0 = t.output->storage(), sc0 = t.scales->storage();
    const fusednorm_status st = b.call(t);
    INFO(fusednorm_last_error());
    CHECK(st == b.status);
    CHECK(std::string(fusednorm_last_error()).find(b.needle) != std::string::npos);
    CHECK(t.output->storage() == out0);
    CHECK(t.scales->storage() == sc0);
  }
  int64_t bytes = -1;
  CHECK(fusednorm_fp4_swizzled_size(130, 2048, FUSEDNORM_FP4_NVFP4, &bytes) == FUSEDNORM_SUCCESS);
  CHECK(bytes == 256 * 128);
  CHECK(fusednorm_fp4_swizzled_size(1, 32, FUSEDNORM_FP4_MXFP4, &bytes) == FUSEDNORM_SUCCESS);
  CHECK(bytes == 128 * 4);
  CHECK(fusednorm_fp4_swizzled_size(1, 24, FUSEDNORM_FP4_NVFP4, &bytes) == FUSEDNORM_INVALID_ARGUMENT);
  CHECK(fusednorm_fp4_swizzled_size(INT64_MAX, 32, FUSEDNORM_FP4_MXFP4, &bytes) == FUSEDNORM_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
