// Tensor-parallel QK-norm, simulated on the CPU: R ranks (threads), each holding an uneven slice of
// the heads of q and k as strided views of one fused QKV projection, run stats -> all-reduce (sum,
// in rank order, the same sum on every rank) -> apply; the assembled outputs are compared with the
// single-device fused result (docs/numerics.md §5, "Tensor parallelism"):
// - where a row's all-reduced sum equals the single-device sum bit for bit, its outputs are
//   byte-identical (inputs on a coarse grid make every sum exact, so every row is);
// - elsewhere bf16 outputs are within one ulp (codes at most one apart) and f32 outputs within
//   |y| * (delta / 2 + 16 u), delta the sums' relative difference, u = 2^-24.
// A mean of per-rank means, the common deployment, fails that check on an uneven split.
#include <math.h>

#include <catch2/catch.hpp>
#include <thread>

#include "common/qk_case.h"

namespace fusednorm {
namespace test {
namespace {

constexpr int64_t kRows = 64, kHeadDim = 128, kQHeads = 32, kKHeads = 8;
constexpr int64_t kNq = kQHeads * kHeadDim, kNk = kKHeads * kHeadDim;

// A view of columns [col, col + width) of a tensor's rows (same row stride).
struct View {
  DLTensor dl{};
  std::vector<int64_t> shape, strides;
  View(HostTensor& t, int64_t col, int64_t width) {
    dl = *t.dl();
    shape = t.shape();
    shape.back() = width;
    strides.assign(t.dl()->strides, t.dl()->strides + t.dl()->ndim);
    dl.shape = shape.data();
    dl.strides = strides.data();
    dl.data = static_cast<char*>(t.dl()->data) + col * dtype_bits(t.type()) / 8;
  }
};

struct Model {
  DType dt;
  HostTensor qkv, qw, kw;  // [rows, Nq + 2 Nk] (q, k, v), weights
  Model(DType t, std::mt19937_64& rng, bool exact)
      : dt(t), qkv(t, {kRows, kNq + 2 * kNk}), qw(t, {kNq}), kw(t, {kNk}) {
    std::uniform_real_distribution<float> x(-3.0f, 3.0f), w(0.5f, 1.5f);
    std::uniform_int_distribution<int> e(-3, 3), grid(-16, 16);
    for (int64_t r = 0; r < kRows; ++r) {
      float scale = 1.0f;
      for (int64_t i = 0; i < kNq + 2 * kNk; ++i) {
        if (i % kHeadDim == 0) scale = ldexpf(1.0f, e(rng));  // heads differ in magnitude
        // Exact: multiples of 1/16 in [-1, 1]: every square and every sum of up to 2^14 of them
        // is exact in f32, in any order.
        qkv.set(r, i, exact ? float(grid(rng)) / 16.0f : x(rng) * scale);
      }
    }
    for (int64_t i = 0; i < kNq; ++i) qw.set(0, i, w(rng));
    for (int64_t i = 0; i < kNk; ++i) kw.set(0, i, w(rng));
  }
};

struct Outputs {
  HostTensor q, k, stats;
  explicit Outputs(DType t) : q(t, {kRows, kNq}), k(t, {kRows, kNk}), stats(DType::kF32, {kRows, 2}) {}
};

// The single-device result: fused outputs and the sums of squares over the whole rows.
void single_device(Model& m, Outputs& o) {
  View q(m.qkv, 0, kNq), k(m.qkv, kNq, kNk);
  REQUIRE(fusednorm_qk_rmsnorm(&q.dl, &k.dl, m.qw.dl(), m.kw.dl(), o.q.dl(), o.k.dl(), nullptr, nullptr, nullptr) ==
          FUSEDNORM_SUCCESS);
  REQUIRE(fusednorm_qk_rmsnorm_stats(&q.dl, &k.dl, o.stats.dl(), nullptr, nullptr) == FUSEDNORM_SUCCESS);
}

enum class Reduce { kSums, kMeanOfMeans };

// R ranks with q_heads[r] and k_heads[r] heads each: stats, all-reduce, apply, one thread a rank.
// o.stats gets the all-reduced statistics (sums; or, for kMeanOfMeans, the mean squares used).
void tensor_parallel(Model& m, const std::vector<int64_t>& q_heads, const std::vector<int64_t>& k_heads,
                     Reduce reduce, Outputs& o) {
  const size_t R = q_heads.size();
  std::vector<std::unique_ptr<HostTensor>> stats(R);
  std::vector<fusednorm_status> st(R, FUSEDNORM_INTERNAL_ERROR);
  std::vector<int64_t> q0(R), k0(R), nq(R), nk(R);
  for (size_t r = 0; r < R; ++r) {
    q0[r] = r ? q0[r - 1] + nq[r - 1] : 0;
    k0[r] = r ? k0[r - 1] + nk[r - 1] : 0;
    nq[r] = q_heads[r] * kHeadDim;
    nk[r] = k_heads[r] * kHeadDim;
    stats[r] = std::make_unique<HostTensor>(DType::kF32, std::vector<int64_t>{kRows, 2});
  }
  REQUIRE(q0[R - 1] + nq[R - 1] == kNq);
  REQUIRE(k0[R - 1] + nk[R - 1] == kNk);
  auto on_ranks = [&](auto body) {
    std::vector<std::thread> threads;
    for (size_t r = 0; r < R; ++r) threads.emplace_back([&, r] { st[r] = body(r); });
    for (auto& t : threads) t.join();
    for (size_t r = 0; r < R; ++r) REQUIRE(st[r] == FUSEDNORM_SUCCESS);
  };
  on_ranks([&](size_t r) {
    View q(m.qkv, q0[r], nq[r]), k(m.qkv, kNq + k0[r], nk[r]);
    return fusednorm_qk_rmsnorm_stats(&q.dl, &k.dl, stats[r]->dl(), nullptr, nullptr);
  });
  // The all-reduce: one sum in rank order, the same on every rank.
  for (int64_t row = 0; row < kRows; ++row)
    for (int j = 0; j < 2; ++j) {
      float acc = 0.0f;
      for (size_t r = 0; r < R; ++r) {
        const float s = stats[r]->get(row, j);
        acc = r == 0 ? (reduce == Reduce::kSums ? s : s / float(j ? nk[r] : nq[r]))
                     : acc + (reduce == Reduce::kSums ? s : s / float(j ? nk[r] : nq[r]));
      }
      if (reduce == Reduce::kMeanOfMeans) acc = acc / float(R);
      for (size_t r = 0; r < R; ++r) stats[r]->set(row, j, acc);
      o.stats.set(row, j, acc);
    }
  on_ranks([&](size_t r) {
    View q(m.qkv, q0[r], nq[r]), k(m.qkv, kNq + k0[r], nk[r]);
    View qw(m.qw, q0[r], nq[r]), kw(m.kw, k0[r], nk[r]);
    View qo(o.q, q0[r], nq[r]), ko(o.k, k0[r], nk[r]);
    fusednorm_qk_rmsnorm_options opt;
    fusednorm_qk_rmsnorm_options_init(&opt);
    opt.stats_kind = reduce == Reduce::kSums ? FUSEDNORM_QK_STATS_SUMS : FUSEDNORM_QK_STATS_MEAN_SQUARES;
    opt.q_global_width = kNq;
    opt.k_global_width = kNk;
    return fusednorm_qk_rmsnorm_apply(&q.dl, &k.dl, stats[r]->dl(), &qw.dl, &kw.dl, &qo.dl, &ko.dl, nullptr, &opt,
                                      nullptr);
  });
}

// Ordinal of a float's bits (monotonic in value, -0 == +0).
int64_t ordinal(uint32_t bits32) {
  const int64_t mag = int64_t(bits32 & 0x7FFFFFFFu);
  return bits32 & 0x80000000u ? -mag : mag;
}

struct Verdict {
  int64_t same_sums = 0, other_sums = 0;  // (row, side) pairs
  int64_t identical_rows_broken = 0;      // same sums, different bytes (must be 0)
  int64_t violations = 0;                 // elements beyond the stated tolerance
  double max_rel = 0;                     // largest |y - y_fused| / |y_fused|
};

// Compares the TP outputs with the single-device ones as the header comment states.
Verdict judge(DType dt, Outputs& single, Outputs& tp, Reduce reduce) {
  Verdict v;
  for (int64_t row = 0; row < kRows; ++row)
    for (int j = 0; j < 2; ++j) {
      HostTensor& a = j ? single.k : single.q;
      HostTensor& b = j ? tp.k : tp.q;
      const int64_t n = j ? kNk : kNq;
      const float s1 = single.stats.get(row, j);
      // The sum the TP result used (mean of means: the equivalent sum, mean * N).
      const double s2 = reduce == Reduce::kSums ? double(tp.stats.get(row, j)) : double(tp.stats.get(row, j)) * n;
      const bool same = reduce == Reduce::kSums && single.stats.code(row, j) == tp.stats.code(row, j);
      (same ? v.same_sums : v.other_sums)++;
      if (same && memcmp(a.row(row), b.row(row), size_t(n * dtype_bits(dt) / 8)) != 0) v.identical_rows_broken++;
      const double delta = fabs(s2 - double(s1)) / double(s1);
      for (int64_t i = 0; i < n; ++i) {
        const double y1 = a.get(row, i), y2 = b.get(row, i);
        if (y1 != 0) v.max_rel = std::max(v.max_rel, fabs(y2 - y1) / fabs(y1));
        bool ok;
        if (dt == DType::kF32) {
          ok = fabs(y2 - y1) <= fabs(y1) * (delta / 2 + 16 * ldexp(1.0, -24)) + ldexp(1.0, -148);
        } else {
          const uint32_t c1 = a.code(row, i) << 16, c2 = b.code(row, i) << 16;  // bf16 as f32 bits
          ok = std::llabs(ordinal(c1) - ordinal(c2)) <= 1;
        }
        v.violations += !ok;
      }
    }
  return v;
}

struct Split {
  std::vector<int64_t> q, k;
};
// Uneven splits of 32 q heads and 8 k heads over R = 2, 3, 4 ranks.
const Split kUneven[] = {{{20, 12}, {5, 3}}, {{5, 16, 11}, {1, 4, 3}}, {{3, 13, 9, 7}, {2, 1, 4, 1}}};

TEST_CASE("qk_rmsnorm TP: exact sums give byte-identical outputs for R = 2, 3, 4 uneven ranks", "[qk_rmsnorm][tp]") {
  std::mt19937_64 rng(31);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Model m(dt, rng, /*exact=*/true);
    Outputs single(dt);
    single_device(m, single);
    for (const Split& sp : kUneven) {
      INFO(dtype_name(dt) << " R = " << sp.q.size());
      Outputs tp(dt);
      tensor_parallel(m, sp.q, sp.k, Reduce::kSums, tp);
      REQUIRE(memcmp(tp.stats.data_begin(), single.stats.data_begin(), tp.stats.data_bytes()) == 0);
      CHECK(memcmp(tp.q.data_begin(), single.q.data_begin(), tp.q.data_bytes()) == 0);
      CHECK(memcmp(tp.k.data_begin(), single.k.data_begin(), tp.k.data_bytes()) == 0);
    }
  }
}

TEST_CASE("qk_rmsnorm TP: R = 2, 3, 4 uneven ranks equal the single-device result where the sums do, "
          "else within the stated tolerance", "[qk_rmsnorm][tp]") {
  std::mt19937_64 rng(32);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Model m(dt, rng, /*exact=*/false);
    Outputs single(dt);
    single_device(m, single);
    for (const Split& sp : kUneven) {
      Outputs tp(dt);
      tensor_parallel(m, sp.q, sp.k, Reduce::kSums, tp);
      const Verdict v = judge(dt, single, tp, Reduce::kSums);
      INFO(dtype_name(dt) << " R = " << sp.q.size() << ": " << v.same_sums << " (row, side) sums bit-identical, "
                          << v.other_sums << " not; largest relative difference " << v.max_rel);
      CHECK(v.identical_rows_broken == 0);
      CHECK(v.violations == 0);
      // Both cases occur, so both statements are exercised (fixed seed).
      CHECK(v.same_sums > 0);
      CHECK(v.other_sums > 0);
    }
  }
}

TEST_CASE("qk_rmsnorm TP: a mean of per-rank means is wrong on an uneven split (and right on an even one)",
          "[qk_rmsnorm][tp]") {
  std::mt19937_64 rng(33);
  const DType dt = DType::kBF16;
  Model m(dt, rng, /*exact=*/false);
  Outputs single(dt);
  single_device(m, single);
  for (const Split& sp : kUneven) {
    Outputs tp(dt);
    tensor_parallel(m, sp.q, sp.k, Reduce::kMeanOfMeans, tp);
    const Verdict v = judge(dt, single, tp, Reduce::kMeanOfMeans);
    INFO("R = " << sp.q.size() << ": " << v.violations << " elements beyond one ulp; largest relative error "
                << v.max_rel);
    CHECK(v.violations > int64_t(kRows) * (kNq + kNk) / 2);  // most elements are wrong
    CHECK(v.max_rel > 0.1);
  }
  Outputs even(dt);
  tensor_parallel(m, {8, 8, 8, 8}, {2, 2, 2, 2}, Reduce::kMeanOfMeans, even);
  const Verdict v = judge(dt, single, even, Reduce::kMeanOfMeans);
  INFO("even split: largest relative error " << v.max_rel);
  CHECK(v.violations == 0);
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
