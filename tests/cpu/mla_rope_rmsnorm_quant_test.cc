// mla_rope_rmsnorm_quant on the CPU backend: the Highway path equals the scalar reference byte
// for byte on every compiled target for the case mix of issue 20 (every allocation compared in
// full, guards included); the cache slots a call does not own stay untouched; the reference
// against an independent double-precision computation; NaN/Inf and FP8 saturation; thread count.
#include <math.h>

#include <catch2/catch.hpp>
#include <tbb/task_arena.h>

#include "common/mla_case.h"
#include "common/targets.h"
#include "core/elements.h"
#include "core/error.h"

namespace fusednorm {
namespace test {
namespace {

// Every cache byte outside the rows of the call's tokens is the poison 0xA5.
void check_untouched(const MlaCase& c) {
  const auto& st = c.cache_alloc->storage();
  std::vector<char> owned(st.size(), 0);
  const size_t row_bytes = size_t((c.spec.l + c.spec.r) * dtype_bits(c.spec.cache) / 8);
  for (int64_t t = 0; t < c.spec.tokens(); ++t) {
    const size_t b = c.cache_row_byte(t);
    for (size_t i = 0; i < row_bytes; ++i) owned[b + i] = 1;
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < st.size(); ++i)
    if (!owned[i] && st[i] != 0xA5 && bad++ == 0) first = i;
  INFO("cache bytes written outside the call's slots: " << bad << " (first at " << first << ")");
  CHECK(bad == 0);
}

// The reference once, the library on every target: every written allocation equal in full.
void check_case(const MlaSpec& s) {
  INFO(s.describe());
  MlaCase ref(s);
  const fusednorm_status rst = ref.run_reference();
  INFO(fusednorm::last_error());
  REQUIRE(rst == FUSEDNORM_SUCCESS);
  check_untouched(ref);
  for_each_target([&](int64_t) {
    MlaCase lib(s);
    const fusednorm_status st = lib.run_library();
    INFO(fusednorm_last_error());
    REQUIRE(st == FUSEDNORM_SUCCESS);
    REQUIRE(compare_mla(lib, ref) == "");
  });
}

TEST_CASE("mla: SIMD equals the reference for the case mix, every target", "[mla][cpu]") {
  const uint64_t seed = Catch::rngSeed() ? Catch::rngSeed() : 20261125;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 24; ++i) check_case(random_mla_spec(rng, 300000));
}

// The case list of issue 20 made explicit (the random mix above draws around it): all twelve
// pairs of Hq (16, 64, 128) and page size (1, 16, 64, 128), each of the four input distributions
// with each Hq, the bf16 cache and the three FP8 ones (e4m3fn, e4m3fnuz, e5m2) with a scale that
// saturates many codes and with one that saturates none; a batch of 16, a quarter of it single
// tokens, one sequence of 256 tokens (Hq 16), cache lengths from 0 to 4096 on and around page
// boundaries.
TEST_CASE("mla: the listed cases (batch 16, seq_len 256, every Hq and page size, FP8 saturating), every target",
          "[mla][cpu]") {
  const int64_t heads_list[] = {16, 64, 128}, pages[] = {1, 16, 64, 128};
  const DType caches[] = {DType::kBF16, DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::k_f8e5m2};
  std::mt19937_64 rng(2011);
  for (int i = 0; i < 12; ++i) {
    MlaSpec s;
    s.heads = heads_list[i % 3];
    s.page_size = pages[i % 4];
    s.dist = i / 3;
    s.cache = caches[(i + i / 4) % 4];
    const bool fp8 = dtype_bits(s.cache) == 8, saturate = fp8 && (i / 4) % 2 == 0;
    // |v| of the latent row is about 1: 1e-3 (e4m3) and 1e-5 (e5m2) put |v| / k_scale past the
    // format's largest value for most of it; 0.02 keeps every code below it.
    s.k_scale = !fp8 ? 0.0f : !saturate ? 0.02f : s.cache == DType::k_f8e5m2 ? 1e-5f : 1e-3f;
    s.in_place = i % 2 == 0;
    s.use_positions = i % 3 == 1;
    s.seed = rng();
    s.seq_lens.clear();
    s.cache_lens.clear();
    const int64_t long_len = s.heads == 16 ? 256 : 1 + int64_t(rng() % 32);
    for (int64_t b = 0; b < 16; ++b) {
      const int64_t len = b % 4 == 0 ? 1 : b == 5 ? long_len : 2 + int64_t(rng() % (s.heads == 16 ? 40 : 10));
      const int64_t near[] = {0, s.page_size - 1, s.page_size, s.page_size + 1, 4096 - len, 4096,
                              int64_t(rng() % 4097) / s.page_size * s.page_size};
      s.seq_lens.push_back(len);
      s.cache_lens.push_back(near[b % 7]);
    }
    check_case(s);
    if (saturate) {  // codes at the format's largest magnitude: at least 8 a token
      MlaCase ref(s);
      REQUIRE(ref.run_reference() == FUSEDNORM_SUCCESS);
      const float qmax = decode(s.cache, encode<false>(s.cache, INFINITY));
      int64_t at_max = 0;
      const char* base = reinterpret_cast<const char*>(ref.cache_alloc->storage().data());
      for (int64_t t = 0; t < s.tokens(); ++t)
        for (int64_t k = 0; k < s.l; ++k) at_max += fabsf(decode(s.cache, load_code(s.cache, base + ref.cache_row_byte(t), k))) == qmax;
      INFO(s.describe());
      CHECK(at_max >= 8 * s.tokens());
    }
  }
}

TEST_CASE("mla: every L, R and pairing (vector and scalar rotation paths), every target", "[mla][cpu]") {
  std::mt19937_64 rng(3);
  for (int64_t l : {8, 64, 520})
    for (int64_t r : {8, 16, 24, 64})
      for (bool neox : {false, true}) {
        MlaSpec s;
        s.l = l;
        s.r = r;
        s.neox = neox;
        s.heads = 3;
        s.page_size = 4;
        s.seq_lens = {3, 1, 5};
        s.cache_lens = {0, 7, 3};
        s.cache = neox ? DType::k_f8e4m3fn : DType::kBF16;
        s.in = r == 24 ? DType::kF32 : DType::kBF16;
        s.seed = rng();
        check_case(s);
      }
}

// ---------------------------------------------------------------- the reference, independently

// |got - want| within the rounding of the output type (relative `rel`, absolute `abs`) plus
// `slack` (the f32 products' own rounding where the sum cancels).
void check_close(float got, double want, double rel, double abs, double slack, const char* what, int64_t t,
                 int64_t i) {
  const double tol = rel * fabs(want) + abs + slack;
  if (!(fabs(double(got) - want) <= tol)) {
    INFO(what << " token " << t << " element " << i << ": got " << got << ", double gives " << want
              << " (tolerance " << tol << ")");
    CHECK(false);
  }
}

double rel_of(DType t) {
  switch (t) {
    case DType::kF32: return 0x1p-22;
    case DType::kF16: return 0x1p-10;
    case DType::kBF16: return 0x1p-7;
    case DType::k_f8e5m2: case DType::k_f8e5m2fnuz: return 0x1p-2;
    default: return 0x1p-3;  // e4m3 formats
  }
}
double abs_of(DType t) {
  switch (t) {
    case DType::kF32: case DType::kBF16: return 1e-30;
    case DType::kF16: return 0x1p-24;
    default: return 0x1p-9;  // the FP8 formats' subnormal steps are at most this
  }
}

// Decoded q_out and cache rows of `out` (run by the reference) against double arithmetic from the
// inputs of `in` (a fresh build of the same case): the pairs, the position's table row, the page
// and slot (the test's own page map), the norm, k_scale and saturation.
void check_against_double(MlaCase& in, MlaCase& out) {
  const MlaSpec& s = in.spec;
  const int64_t l = s.l, r = s.r;
  const double ks = s.k_scale != 0.0f ? double(s.k_scale) : 1.0;
  const double qmax = dtype_bits(s.cache) == 8 ? double(decode(s.cache, encode<false>(s.cache, INFINITY))) : INFINITY;
  HostTensor& cache = *out.cache_alloc;
  for (int64_t t = 0; t < s.tokens(); ++t) {
    const int64_t p = in.pos[size_t(t)];
    auto rot = [&](const char* row, int64_t j, double* re, double* im, double* slack) {
      const int64_t i0 = s.neox ? j : 2 * j, i1 = s.neox ? j + r / 2 : 2 * j + 1;
      const double x0 = decode(s.in, load_code(s.in, row, i0)), x1 = decode(s.in, load_code(s.in, row, i1));
      const double c = in.cos_sin->get(p, 2 * j), sn = in.cos_sin->get(p, 2 * j + 1);
      *re = x0 * c - x1 * sn;
      *im = x0 * sn + x1 * c;
      *slack = 0x1p-23 * (fabs(x0) + fabs(x1));
      return std::pair<int64_t, int64_t>(i0, i1);
    };
    for (int64_t h = 0; h < s.heads; ++h) {
      const char* qrow = static_cast<const char*>(in.q_view.data) +
                         (t * in.q_strides[0] + h * in.q_strides[1]) * dtype_bits(s.in) / 8;
      const char* orow = out.q_out ? out.q_out->row(t * s.heads + h)
                                   : static_cast<const char*>(out.q_view.data) +
                                         (t * out.q_strides[0] + h * out.q_strides[1]) * dtype_bits(s.in) / 8;
      for (int64_t j = 0; j < r / 2; ++j) {
        double re, im, slack;
        const auto idx = rot(qrow, j, &re, &im, &slack);
        check_close(decode(s.in, load_code(s.in, orow, idx.first)), re, rel_of(s.in), abs_of(s.in), slack, "q re", t,
                    idx.first);
        check_close(decode(s.in, load_code(s.in, orow, idx.second)), im, rel_of(s.in), abs_of(s.in), slack, "q im",
                    t, idx.second);
      }
    }
    const char* kv = in.kv->row(t);
    double ss = 0;
    for (int64_t i = 0; i < l; ++i) ss += double(decode(s.in, load_code(s.in, kv, i))) * decode(s.in, load_code(s.in, kv, i));
    const double inv = 1.0 / sqrt(ss / double(l) + double(s.eps));
    const char* dst = reinterpret_cast<const char*>(cache.storage().data()) + out.cache_row_byte(t);
    auto expect_code = [&](double v, int64_t i, double slack, const char* what) {
      const float got = decode(s.cache, load_code(s.cache, dst, i));
      const double want = v / ks;
      if (fabs(want) > qmax) check_close(fabs(got), qmax, 0, 0, 0, what, t, i);  // saturates
      else check_close(got, want, rel_of(s.cache), abs_of(s.cache), slack / ks, what, t, i);
    };
    for (int64_t i = 0; i < l; ++i) {
      const double g = double(in.weight->get(0, i)) + double(s.weight_offset);
      const double y = double(decode(s.in, load_code(s.in, kv, i))) * inv * g;
      expect_code(y, i, 0x1p-21 * fabs(y), "latent");
    }
    const char* kr = kv + l * dtype_bits(s.in) / 8;
    for (int64_t j = 0; j < r / 2; ++j) {
      double re, im, slack;
      const auto idx = rot(kr, j, &re, &im, &slack);
      expect_code(re, l + idx.first, slack, "k rope re");
      expect_code(im, l + idx.second, slack, "k rope im");
    }
  }
}

TEST_CASE("mla: the reference against double-precision arithmetic", "[mla][cpu]") {
  std::mt19937_64 rng(77);
  for (int i = 0; i < 16; ++i) {
    MlaSpec s = random_mla_spec(rng, 20000);
    if (i % 4 == 0) s.cache = DType::kF32;
    INFO(s.describe());
    MlaCase in(s), out(s);
    REQUIRE(out.run_reference() == FUSEDNORM_SUCCESS);
    check_against_double(in, out);
  }
}

// ---------------------------------------------------------------- edges

TEST_CASE("mla: NaN and Inf in q and the latent, FP8 saturation, on every target", "[mla][cpu]") {
  // q's specials (token, head, element): a NaN (its pair only), an Inf, an Inf pair (Inf - Inf is
  // NaN), a pair whose rotation overflows f32, a pair whose rotation rounds past bf16's largest.
  struct QSpecial {
    int64_t t, h, i;
    float v;
  };
  const QSpecial q_specials[] = {{0, 0, 2, NAN},        {1, 1, 5, INFINITY},   {2, 0, 6, INFINITY},
                                 {2, 0, 7, INFINITY},   {3, 1, 0, 3.0e38f},    {3, 1, 1, -3.0e38f},
                                 {3, 0, 8, 3.3961e38f}, {3, 0, 9, 3.3961e38f}};
  for (DType in : {DType::kF32, DType::kBF16})
    for (DType cache : {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::k_f8e5m2, DType::kBF16}) {
      MlaSpec s;
      s.cache = cache;
      s.in = in;
      s.heads = 2;
      s.seq_lens = {4};
      s.cache_lens = {9};
      s.k_scale = cache == DType::k_f8e5m2 ? 1e-6f : dtype_bits(cache) == 8 ? 1e-4f : 0.0f;  // FP8: most codes saturate
      s.seed = 5;
      auto poison = [&](MlaCase& m) {
        m.kv->set(1, 3, NAN);        // token 1: NaN in the latent -> the latent all NaN
        m.kv->set(2, 0, INFINITY);   // token 2: Inf in the latent -> all NaN (inv = NaN)
        m.kv->set(3, s.l + 1, NAN);  // token 3: NaN in the rope part: its pair only
        for (const QSpecial& q : q_specials) m.q_alloc->set(q.t * s.heads + q.h, s.q_nope + q.i, q.v);
      };
      INFO(s.describe());
      MlaCase ref(s);
      poison(ref);
      REQUIRE(ref.run_reference() == FUSEDNORM_SUCCESS);
      const char* base = reinterpret_cast<const char*>(ref.cache_alloc->storage().data());
      for (int64_t t : {1, 2})
        for (int64_t i = 0; i < s.l; ++i) CHECK(std::isnan(decode(cache, load_code(cache, base + ref.cache_row_byte(t), i))));
      const char* row3 = base + ref.cache_row_byte(3);
      CHECK(std::isnan(decode(cache, load_code(cache, row3, s.l + 0))));  // the pair (0, 1) of the rope part
      CHECK(std::isnan(decode(cache, load_code(cache, row3, s.l + 1))));
      CHECK(!std::isnan(decode(cache, load_code(cache, row3, s.l + 2))));
      // q: the NaN's pair is NaN, its neighbours are not.
      HostTensor& qo = *ref.q_out;
      CHECK(std::isnan(qo.get(0, 2)));
      CHECK(std::isnan(qo.get(0, 3)));
      CHECK(!std::isnan(qo.get(0, 4)));
      if (dtype_bits(cache) == 8) {
        const float qmax = decode(cache, encode<false>(cache, INFINITY));
        int64_t saturated = 0;
        for (int64_t i = 0; i < s.l; ++i) saturated += fabsf(decode(cache, load_code(cache, base + ref.cache_row_byte(0), i))) == qmax;
        CHECK(saturated > s.l / 2);
      }
      for_each_target([&](int64_t) {
        MlaCase lib(s);
        poison(lib);
        REQUIRE(lib.run_library() == FUSEDNORM_SUCCESS);
        REQUIRE(compare_mla(lib, ref) == "");
      });
    }
}

TEST_CASE("mla: no q heads (the latent rows only), every target", "[mla][cpu]") {
  for (DType in : {DType::kBF16, DType::kF32}) {
    MlaSpec s;
    s.heads = 0;
    s.in = in;
    s.seq_lens = {3, 1};
    s.cache_lens = {5, 0};
    s.seed = 4;
    check_case(s);
  }
}

TEST_CASE("mla: results do not depend on the thread count", "[mla][cpu]") {
  MlaSpec s;
  s.heads = 16;
  s.seq_lens = {200, 1, 57};
  s.cache_lens = {0, 4095, 64};
  s.page_size = 64;
  s.cache = DType::k_f8e4m3fn;
  s.seed = 11;
  MlaCase many(s), one(s);
  REQUIRE(many.run_library() == FUSEDNORM_SUCCESS);
  tbb::task_arena arena(1);
  arena.execute([&] { REQUIRE(one.run_library() == FUSEDNORM_SUCCESS); });
  REQUIRE(compare_mla(many, one) == "");
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
