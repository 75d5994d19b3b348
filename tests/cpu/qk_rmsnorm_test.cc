// qk_rmsnorm on the CPU backend: stats, apply and the fused form equal the scalar reference byte
// for byte on every compiled Highway target (Modular's shapes, per-head shapes, widths that are
// not a multiple of any vector, strided and misaligned views, in place, special values); the fused
// form equals stats + apply; thread and batch invariance; and the reference itself against
// double-precision arithmetic.
#include <math.h>

#include <catch2/catch.hpp>
#include <tbb/task_arena.h>

#include <array>
#include <thread>

#include "common/qk_case.h"
#include "common/targets.h"

namespace fusednorm {
namespace test {
namespace {

constexpr QkKind kKinds[] = {QkKind::kStats, QkKind::kApply, QkKind::kFused};
const char* kind_name(QkKind k) { return k == QkKind::kStats ? "stats" : k == QkKind::kApply ? "apply" : "fused"; }

// Runs `kind` on every target and compares every allocation with the reference's.
void check_kind(QkTensors& base, QkKind kind) {
  auto ref = base.clone();
  INFO(base.spec.describe() << " kind=" << kind_name(kind));
  REQUIRE(ref->run(kind, true) == FUSEDNORM_SUCCESS);
  for_each_target([&](int64_t) {
    auto lib = base.clone();
    const fusednorm_status st = lib->run(kind);
    INFO(fusednorm_last_error());
    REQUIRE(st == FUSEDNORM_SUCCESS);
    REQUIRE(lib->compare(*ref) == "");
  });
}

void check_all_kinds(const QkSpec& s, std::mt19937_64& rng) {
  QkTensors t(s);
  t.fill_random(rng);
  t.fill_stats();
  for (QkKind kind : kKinds) {
    if (kind == QkKind::kFused || s.head_dim == 0) check_kind(t, kind);
  }
}

TEST_CASE("qk_rmsnorm: Modular's shapes, stats/apply/fused, f32 and bf16, every target", "[qk_rmsnorm][cpu]") {
  std::mt19937_64 rng(19);
  for (const auto& sh : kModularQkShapes)
    for (DType in : {DType::kF32, DType::kBF16}) check_all_kinds(QkSpec::of({sh[0]}, sh[1], sh[2], 0, in), rng);
}

TEST_CASE("qk_rmsnorm: per-head mode (q 32 heads, k 8 heads, head_dim 64, 128, 256), every target",
          "[qk_rmsnorm][cpu]") {
  std::mt19937_64 rng(20);
  for (int64_t d : {64, 128, 256})
    for (DType in : {DType::kF32, DType::kBF16, DType::kF16}) {
      // Weights f32 or the input dtype.
      QkSpec s = QkSpec::of({2, 9}, 32 * d, 8 * d, d, in, in == DType::kF16 ? DType::kF32 : in);
      s.weight_offset = in == DType::kBF16 ? 1.0f : 0.0f;  // Gemma's (1 + w)
      check_all_kinds(s, rng);
    }
}

TEST_CASE("qk_rmsnorm: odd widths, strided and misaligned views, rank 3, in place, every target",
          "[qk_rmsnorm][cpu]") {
  std::mt19937_64 rng(21);
  for (const auto& w : kOddQkWidths)
    for (int variant = 0; variant < 4; ++variant) {
      QkSpec s = layout_qk_spec(w[0], w[1], variant);
      check_all_kinds(s, rng);
      if (w[2] != 0) {  // a per-head mode
        s.head_dim = w[2];
        check_all_kinds(s, rng);
      }
    }
}

// FP8 attention: the outputs encoded to f8e4m3fn / f8e4m3fnuz with static scales (some values
// saturate: y reaches ~6 and the k scale maps 448 to ~4.5), whole rows and heads, odd widths.
TEST_CASE("qk_rmsnorm: FP8 outputs with static scales, every target", "[qk_rmsnorm][cpu]") {
  std::mt19937_64 rng(28);
  for (DType out : {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz})
    for (DType in : {DType::kF32, DType::kBF16, DType::kF16})
      for (const auto& w : {std::array<int64_t, 3>{1536, 256, 128}, std::array<int64_t, 3>{17, 34, 0}}) {
        QkSpec s = QkSpec::of({3, 5}, w[0], w[1], 0, in);
        s.out = out;
        s.q_scale = 0.02f;
        s.k_scale = 0.01f;
        s.row_pad = 1;
        s.misalign = in == DType::kF16 ? 1 : 0;  // odd addresses: q, k, weights and the scales
        check_all_kinds(s, rng);
        if (w[2]) {
          s.head_dim = w[2];
          check_all_kinds(s, rng);
        }
      }
  // The codes against double precision: dec(code) * s approximates y within the format's
  // precision (3 mantissa bits: half an ulp is <= 2^-4 relative), or is the saturated maximum.
  QkSpec s = QkSpec::of({4}, 512, 128, 0, DType::kF32);
  s.out = DType::k_f8e4m3fn;
  QkTensors t(s);
  t.fill_random(rng);
  REQUIRE(t.run(QkKind::kFused, true) == FUSEDNORM_SUCCESS);
  for (int64_t r = 0; r < 4; ++r)
    for (int j = 0; j < 2; ++j) {
      HostTensor& x = j ? *t.k : *t.q;
      HostTensor& wt = j ? *t.kw : *t.qw;
      const int64_t n = j ? s.nk : s.nq;
      const double scale = j ? s.k_scale : s.q_scale;
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(x.get(r, i)) * x.get(r, i);
      const double inv = 1.0 / sqrt(ss / double(n) + double(s.eps));
      for (int64_t i = 0; i < n; ++i) {
        const double v = x.get(r, i) * inv * wt.get(0, i) / scale;
        const double got = (j ? t.ko : t.qo)->get(r, i);
        INFO("row " << r << " side " << j << " element " << i << ": y / s = " << v << ", code value " << got);
        if (fabs(v) >= 448.0) CHECK(got == (v > 0 ? 448.0 : -448.0));
        else CHECK(fabs(got - v) <= fabs(v) / 16 + ldexp(1.0, -10));  // subnormal quantum 2^-9: half is 2^-10
      }
    }
}

// Calls whose outputs outgrow the threads' private caches write them with streaming stores
// (backends/cpu/parallel.h stream_outputs: at least 2 MiB a thread; one thread here). The same
// bytes as the reference on every target: the four layouts (plain; f16 with misaligned, padded
// rows, where plain stores serve; f32 in place; bf16 in place), heads of 128, FP8 outputs.
TEST_CASE("qk_rmsnorm: outputs large enough for streaming stores, every target", "[qk_rmsnorm][cpu]") {
  std::mt19937_64 rng(29);
  tbb::task_arena single(1);
  single.execute([&] {
    for (int variant = 0; variant < 4; ++variant) {
      QkSpec s = layout_qk_spec(4096, 1024, variant);
      s.lead = variant == 2 ? std::vector<int64_t>{4, 130} : std::vector<int64_t>{520};  // >= 5.3 MB of outputs
      check_all_kinds(s, rng);
      if (variant == 0) {
        s.head_dim = 128;
        check_all_kinds(s, rng);
        s.head_dim = 0;
        s.out = DType::k_f8e4m3fn;  // 2.7 MB of codes
        check_all_kinds(s, rng);
      }
    }
  });
}

// Zero rows, subnormals, huge values whose squares overflow, NaN and Inf, and NaN/Inf/negative
// statistics: the same bytes on every target, and never silent zeros.
TEST_CASE("qk_rmsnorm: special values on every target", "[qk_rmsnorm][cpu]") {
  for (DType in : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t head : {int64_t(0), int64_t(16)}) {
      QkTensors t(special_qk_spec(in, head));
      fill_special_qk(t);
      for (QkKind kind : kKinds)
        if (kind == QkKind::kFused || head == 0) check_kind(t, kind);
      auto ref = t.clone();
      REQUIRE(ref->run(QkKind::kFused, true) == FUSEDNORM_SUCCESS);
      for (int64_t i = 0; i < 64; ++i) {
        CHECK(ref->qo->get(0, i) == 0.0f);
        CHECK(std::isnan(ref->qo->get(4, i)) == (head == 0 || i / 16 == 0));
        if (in != DType::kF16) CHECK(std::isnan(ref->qo->get(2, i)));
        // The NaN written is the positive canonical NaN.
        if (std::isnan(ref->qo->get(4, i)))
          CHECK(ref->qo->code(4, i) == (in == DType::kF32 ? 0x7FC00000u : in == DType::kBF16 ? 0x7FC0u : 0x7E00u));
      }
      if (head != 0) continue;  // apply: whole rows
      auto app = t.clone();
      REQUIRE(app->run(QkKind::kApply, true) == FUSEDNORM_SUCCESS);
      for (int64_t i = 0; i < 48; ++i) {
        CHECK(std::isnan(app->qo->get(6, i)));
        CHECK(std::isnan(app->ko->get(6, i)));  // 1 / sqrt(Inf) is NaN, not 0
        CHECK(std::isnan(app->qo->get(7, i)));
      }
    }
}

// With head_dim = 0 the fused form is stats + apply (SUMS, global widths = local) byte for byte.
TEST_CASE("qk_rmsnorm: fused equals stats then apply", "[qk_rmsnorm][cpu]") {
  std::mt19937_64 rng(23);
  for (DType in : {DType::kF32, DType::kBF16, DType::kF16}) {
    QkTensors t(QkSpec::of({33}, 1536, 257, 0, in));
    t.fill_random(rng);
    auto fused = t.clone(), split = t.clone();
    REQUIRE(fused->run(QkKind::kFused) == FUSEDNORM_SUCCESS);
    REQUIRE(split->run(QkKind::kStats) == FUSEDNORM_SUCCESS);
    REQUIRE(split->run(QkKind::kApply) == FUSEDNORM_SUCCESS);
    REQUIRE(memcmp(fused->qo->data_begin(), split->qo->data_begin(), fused->qo->data_bytes()) == 0);
    REQUIRE(memcmp(fused->ko->data_begin(), split->ko->data_begin(), fused->ko->data_bytes()) == 0);
  }
}

TEST_CASE("qk_rmsnorm: results depend neither on the thread count nor on the other rows", "[qk_rmsnorm][cpu]") {
  std::mt19937_64 rng(24);
  for (int64_t head : {int64_t(0), int64_t(128)}) {
    const QkSpec s = QkSpec::of({300}, 4096, 1024, head);
    QkTensors t(s);
    t.fill_random(rng);
    auto one = t.clone(), many = t.clone();
    tbb::task_arena single(1);
    fusednorm_status st1 = FUSEDNORM_INTERNAL_ERROR, st2 = st1;
    single.execute([&] { st1 = one->run(QkKind::kFused); });
    tbb::task_arena wide;
    wide.execute([&] { st2 = many->run(QkKind::kFused); });
    REQUIRE(st1 == FUSEDNORM_SUCCESS);
    REQUIRE(st2 == FUSEDNORM_SUCCESS);
    REQUIRE(one->compare(*many) == "");
    QkSpec alone = s;
    alone.lead = {1};
    for (int64_t r : {0, 151, 299}) {
      QkTensors a(alone);
      memcpy(a.q->row(0), t.q->row(r), size_t(s.nq * 2));
      memcpy(a.k->row(0), t.k->row(r), size_t(s.nk * 2));
      a.qw->copy_from(*t.qw);
      a.kw->copy_from(*t.kw);
      REQUIRE(a.run(QkKind::kFused) == FUSEDNORM_SUCCESS);
      REQUIRE(memcmp(a.qo->row(0), one->qo->row(r), size_t(s.nq * 2)) == 0);
      REQUIRE(memcmp(a.ko->row(0), one->ko->row(r), size_t(s.nk * 2)) == 0);
    }
  }
}

// Threads calling at once (oneTBB's workers run blocks of different calls in turn): each call
// gets its own weights' gamma' (the per-thread cache is keyed by the call), so every result
// equals the reference's. Failures are collected per thread (Catch2 is not thread-safe).
TEST_CASE("qk_rmsnorm: concurrent calls with different weights and modes", "[qk_rmsnorm][cpu]") {
  constexpr int kThreads = 6;
  std::vector<std::unique_ptr<QkTensors>> cases, refs;
  std::mt19937_64 rng(27);
  for (int i = 0; i < kThreads; ++i) {
    cases.push_back(std::make_unique<QkTensors>(QkSpec::of({64}, 1024, 256, i % 2 ? 128 : 0)));
    cases.back()->fill_random(rng);
    refs.push_back(cases.back()->clone());
    REQUIRE(refs.back()->run(QkKind::kFused, true) == FUSEDNORM_SUCCESS);
  }
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      for (int it = 0; it < 8 && failures[size_t(i)].empty(); ++it) {
        auto t = cases[size_t(i)]->clone();
        if (t->run(QkKind::kFused) != FUSEDNORM_SUCCESS) failures[size_t(i)] = fusednorm_last_error();
        else failures[size_t(i)] = t->compare(*refs[size_t(i)]);
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    CHECK(failures[size_t(i)] == "");
  }
}

// The reference against plain double-precision arithmetic: sums within their f32 error bound,
// outputs within one rounding of the output dtype (plus the f32 steps' error).
TEST_CASE("qk_rmsnorm: the reference computes RMSNorm over the row or the head", "[qk_rmsnorm][reference]") {
  std::mt19937_64 rng(25);
  for (DType in : {DType::kF32, DType::kBF16})
    for (int64_t head : {int64_t(0), int64_t(64)}) {
      QkSpec s = QkSpec::of({6}, 2048, 320, head, in);
      s.eps = 1e-3f;
      s.weight_offset = 0.5f;
      QkTensors t(s);
      t.fill_random(rng);
      REQUIRE(t.run(QkKind::kStats, true) == FUSEDNORM_SUCCESS);
      REQUIRE(t.run(QkKind::kFused, true) == FUSEDNORM_SUCCESS);
      const double out_rel = in == DType::kF32 ? 4e-6 : 1.0 / 256;  // bf16: half an ulp is <= 2^-9
      for (int64_t r = 0; r < 6; ++r)
        for (int j = 0; j < 2; ++j) {
          HostTensor& x = j ? *t.k : *t.q;
          HostTensor& w = j ? *t.kw : *t.qw;
          HostTensor& y = j ? *t.ko : *t.qo;
          const int64_t n = j ? s.nk : s.nq, g = head ? head : n;
          double total = 0;
          for (int64_t i = 0; i < n; ++i) total += double(x.get(r, i)) * x.get(r, i);
          CHECK(fabs(t.stats->get(r, j) - total) <= total * 2e-6);
          for (int64_t b = 0; b < n; b += g) {
            double ss = 0;
            for (int64_t i = b; i < b + g; ++i) ss += double(x.get(r, i)) * x.get(r, i);
            const double inv = 1.0 / sqrt(ss / double(g) + double(s.eps));
            for (int64_t i = b; i < b + g; ++i) {
              const double want = x.get(r, i) * inv * (w.get(0, i - b) + 0.5);
              INFO("row " << r << " side " << j << " element " << i);
              CHECK(fabs(y.get(r, i) - want) <= fabs(want) * out_rel + 1e-30);
            }
          }
        }
    }
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
