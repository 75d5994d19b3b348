// A complete qk_rmsnorm call (q, k, weights, outputs, statistics and options) that runs as stats,
// apply or the fused form through the public API or the scalar reference, with byte-exact
// comparison of every buffer the call may write (poison and padding included). Shared by the CPU
// tests, the tensor-parallel composition test and the GPU test.
#pragma once

#include <math.h>
#include <string.h>

#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/bad_call.h"
#include "common/test_tensor.h"
#include "core/call.h"
#include "fusednorm/fusednorm.h"
#include "reference/reference.h"

namespace fusednorm {
namespace test {

struct QkSpec {
  DType in = DType::kBF16, w = DType::kBF16;
  std::vector<int64_t> lead = {4};
  int64_t nq = 256, nk = 128;
  int64_t head_dim = 0;      // fused: 0 = whole rows
  int64_t row_pad = 0;       // extra elements between rows of q, k and the outputs
  int misalign = 0;          // bytes
  bool in_place = false;     // outputs are q and k themselves
  int stats_kind = FUSEDNORM_QK_STATS_SUMS;
  int64_t q_global = 0, k_global = 0;  // apply with sums; 0 = the local width
  float eps = 1e-6f, weight_offset = 0.0f;
  DType out = DType::kInvalid;  // the outputs' dtype: kInvalid = the input's; or FP8
  float q_scale = 0.02f, k_scale = 0.05f;  // FP8 outputs' static dequantization scales

  std::string describe() const {
    std::ostringstream s;
    s << "in=" << dtype_name(in) << " w=" << dtype_name(w) << " lead=[";
    for (auto d : lead) s << d << ",";
    s << "] nq=" << nq << " nk=" << nk << " head_dim=" << head_dim << " pad=" << row_pad << " misalign=" << misalign
      << " in_place=" << in_place << " stats_kind=" << stats_kind << " global=" << q_global << "/" << k_global
      << " eps=" << eps << " offset=" << weight_offset << " out=" << dtype_name(out_type());
    return s.str();
  }
  fusednorm_qk_rmsnorm_options options() const {
    fusednorm_qk_rmsnorm_options o;
    fusednorm_qk_rmsnorm_options_init(&o);
    o.stats_kind = stats_kind;
    o.q_global_width = q_global ? q_global : nq;
    o.k_global_width = k_global ? k_global : nk;
    o.head_dim = head_dim;
    o.eps = eps;
    o.weight_offset = weight_offset;
    return o;
  }
  // A spec of these shapes and dtypes (weights of the input dtype unless w is given), defaults else.
  static QkSpec of(std::vector<int64_t> lead, int64_t nq, int64_t nk, int64_t head_dim = 0,
                   DType in = DType::kBF16, DType w = DType::kInvalid) {
    QkSpec s;
    s.lead = std::move(lead);
    s.nq = nq;
    s.nk = nk;
    s.head_dim = head_dim;
    s.in = in;
    s.w = w == DType::kInvalid ? in : w;
    return s;
  }
  DType out_type() const { return out == DType::kInvalid ? in : out; }
  bool fp8() const { return out_type() != in; }
  int64_t q_group() const { return head_dim ? head_dim : nq; }
  int64_t k_group() const { return head_dim ? head_dim : nk; }
  std::vector<int64_t> shape(int64_t last) const {
    std::vector<int64_t> s = lead;
    s.push_back(last);
    return s;
  }
};

// Modular's qk_rms_norm test shapes: (rows, Nq, Nk).
inline constexpr int64_t kModularQkShapes[][3] = {{16, 1536, 256}, {512, 1536, 256}, {2048, 4096, 512},
                                                  {16, 1536, 257}, {4, 8192, 8192},  {16, 512, 512}};

struct QkTensors {
  QkSpec spec;
  std::unique_ptr<HostTensor> q, k, qw, kw, qo, ko, stats, scales;

  explicit QkTensors(const QkSpec& s) : spec(s) {
    q = std::make_unique<HostTensor>(s.in, s.shape(s.nq), s.row_pad, s.misalign);
    k = std::make_unique<HostTensor>(s.in, s.shape(s.nk), s.row_pad + 1, s.misalign);
    qw = std::make_unique<HostTensor>(s.w, std::vector<int64_t>{s.q_group()}, 0, s.misalign);
    kw = std::make_unique<HostTensor>(s.w, std::vector<int64_t>{s.k_group()}, 0, s.misalign ? 2 : 0);
    if (!s.in_place) {
      qo = std::make_unique<HostTensor>(s.out_type(), s.shape(s.nq), s.row_pad, s.misalign ? 2 : 0);
      ko = std::make_unique<HostTensor>(s.out_type(), s.shape(s.nk), s.row_pad, 0);
    }
    stats = std::make_unique<HostTensor>(DType::kF32, s.shape(2));
    if (s.fp8()) {
      scales = std::make_unique<HostTensor>(DType::kF32, std::vector<int64_t>{2}, 0, s.misalign ? 1 : 0);
      scales->set(0, 0, s.q_scale);
      scales->set(0, 1, s.k_scale);
    }
  }

  // Same spec and the same data bytes (inputs and statistics; outputs fresh, poisoned).
  std::unique_ptr<QkTensors> clone() const {
    auto c = std::make_unique<QkTensors>(spec);
    c->q->copy_from(*q);
    c->k->copy_from(*k);
    c->qw->copy_from(*qw);
    c->kw->copy_from(*kw);
    c->stats->copy_from(*stats);
    if (scales) c->scales->copy_from(*scales);
    return c;
  }

  // q and k uniform in [-3, 3), each head (of head_dim, or 128) scaled by a random power of two
  // in [2^-3, 2^3] so that heads differ in magnitude; weights in [0.5, 1.5).
  void fill_random(std::mt19937_64& rng) {
    std::uniform_real_distribution<float> x(-3.0f, 3.0f), w(0.5f, 1.5f);
    std::uniform_int_distribution<int> e(-3, 3);
    const int64_t head = spec.head_dim ? spec.head_dim : 128;
    for (HostTensor* t : {q.get(), k.get()})
      for (int64_t r = 0; r < t->rows(); ++r) {
        float scale = 1.0f;
        for (int64_t i = 0; i < t->cols(); ++i) {
          if (i % head == 0) scale = ldexpf(1.0f, e(rng));
          t->set(r, i, x(rng) * scale);
        }
      }
    for (HostTensor* t : {qw.get(), kw.get()})
      for (int64_t i = 0; i < t->cols(); ++i) t->set(0, i, w(rng));
  }

  // The statistics an apply call reads: the reference's sums of this call's q and k (scaled by
  // global / local width, as if the other ranks held rows alike), or their means.
  void fill_stats() {
    auto c = clone();
    fusednorm_qk_rmsnorm_options o = spec.options();
    REQUIRE(reference::qk_rmsnorm_stats(c->q->dl(), c->k->dl(), c->stats->dl(), &o) == FUSEDNORM_SUCCESS);
    for (int64_t r = 0; r < stats->rows(); ++r)
      for (int j = 0; j < 2; ++j) {
        const double local = double(j ? spec.nk : spec.nq), global = double(j ? o.k_global_width : o.q_global_width);
        double v = c->stats->get(r, j) * global / local;
        if (spec.stats_kind == FUSEDNORM_QK_STATS_MEAN_SQUARES) v /= global;
        stats->set(r, j, float(v));
      }
  }

  DLTensor* q_out() { return spec.in_place ? q->dl() : qo->dl(); }
  DLTensor* k_out() { return spec.in_place ? k->dl() : ko->dl(); }
  HostTensor& q_result() { return spec.in_place ? *q : *qo; }
  HostTensor& k_result() { return spec.in_place ? *k : *ko; }
  DLTensor* out_scales() { return scales ? scales->dl() : nullptr; }

  fusednorm_status run(QkKind kind, bool reference = false) {
    const fusednorm_qk_rmsnorm_options o = spec.options();
    switch (kind) {
      case QkKind::kStats:
        return reference ? reference::qk_rmsnorm_stats(q->dl(), k->dl(), stats->dl(), &o)
                         : fusednorm_qk_rmsnorm_stats(q->dl(), k->dl(), stats->dl(), &o, nullptr);
      case QkKind::kApply:
        return reference ? reference::qk_rmsnorm_apply(q->dl(), k->dl(), stats->dl(), qw->dl(), kw->dl(), q_out(),
                                                       k_out(), out_scales(), &o)
                         : fusednorm_qk_rmsnorm_apply(q->dl(), k->dl(), stats->dl(), qw->dl(), kw->dl(), q_out(),
                                                      k_out(), out_scales(), &o, nullptr);
      default:
        return reference ? reference::qk_rmsnorm(q->dl(), k->dl(), qw->dl(), kw->dl(), q_out(), k_out(), out_scales(), &o)
                         : fusednorm_qk_rmsnorm(q->dl(), k->dl(), qw->dl(), kw->dl(), q_out(), k_out(), out_scales(), &o,
                                                nullptr);
    }
  }

  // "" when every tensor holds the same data bytes as o's (row padding included) and no byte
  // outside any tensor's data was written (the guards keep their poison).
  std::string compare(const QkTensors& o) const {
    const HostTensor* mine[] = {q.get(), k.get(), qo.get(), ko.get(), stats.get()};
    const HostTensor* theirs[] = {o.q.get(), o.k.get(), o.qo.get(), o.ko.get(), o.stats.get()};
    const char* names[] = {"q", "k", "q_out", "k_out", "stats"};
    for (size_t i = 0; i < 5; ++i) {
      if (mine[i] == nullptr) continue;
      std::string d = first_difference(names[i], theirs[i]->data_begin(), mine[i]->data_begin(), mine[i]->data_bytes());
      if (!d.empty()) return d + " (data)";
      const auto& st = mine[i]->storage();
      const size_t begin = size_t(mine[i]->data_begin() - st.data()), end = begin + mine[i]->data_bytes();
      for (size_t b = 0; b < st.size(); ++b)
        if ((b < begin || b >= end) && st[b] != 0xA5) return std::string(names[i]) + ": a guard byte was written";
    }
    return "";
  }
};

// Special values (CPU and GPU tests): 8 rows of q [64] and k [48] (heads of 16 with head = 16):
// row 0 of q zeros, row 1 subnormal in f32, row 2 huge (squares overflow, except f16), a NaN in
// q row 3, +Inf in q row 4, -Inf in k row 5; statistics NaN/Inf in row 6, negative in row 7.
inline QkSpec special_qk_spec(DType in, int64_t head) { return QkSpec::of({8}, 64, 48, head, in); }
inline void fill_special_qk(QkTensors& t) {
  std::mt19937_64 rng(22);
  t.fill_random(rng);
  const float big = t.spec.in == DType::kF16 ? 60000.0f : 1e30f;
  for (int64_t i = 0; i < 64; ++i) {
    t.q->set(0, i, 0.0f);
    t.q->set(1, i, ldexpf(1.0f, -140) * float(i % 5));
    t.q->set(2, i, big);
  }
  t.q->set(3, 5, NAN);
  t.q->set(4, 7, INFINITY);
  t.k->set(5, 0, -INFINITY);
  t.fill_stats();
  t.stats->set(6, 0, NAN);
  t.stats->set(6, 1, INFINITY);
  t.stats->set(7, 0, -1.0f);  // sqrt of a negative: NaN outputs
}

// Widths (Nq, Nk, a head_dim dividing both or 0) that no vector divides, for layout_qk_spec.
inline constexpr int64_t kOddQkWidths[][3] = {{1, 1, 0},      {3, 6, 3},       {17, 33, 0},   {257, 129, 0},
                                              {1000, 24, 0},  {4100, 7, 0},    {60, 36, 12},  {640, 160, 40},
                                              {5120, 1024, 0}, {7168, 512, 0}};
// Four layouts of a call of widths nq, nk: 0 plain bf16; 1 f16 with padded, misaligned rows and
// global widths of more ranks; 2 f32, rank 3, in place, eps 0; 3 bf16 with f32 weights, padded
// rows, in place, mean squares.
inline QkSpec layout_qk_spec(int64_t nq, int64_t nk, int variant) {
  const DType in = variant == 1 ? DType::kF16 : variant == 2 ? DType::kF32 : DType::kBF16;
  QkSpec s = QkSpec::of(variant == 2 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{5}, nq, nk, 0, in,
                        variant == 3 ? DType::kF32 : in);
  s.row_pad = variant % 2 ? 3 : 0;
  s.misalign = variant == 1 ? 2 : 0;
  s.in_place = variant >= 2;
  s.stats_kind = variant == 3 ? FUSEDNORM_QK_STATS_MEAN_SQUARES : FUSEDNORM_QK_STATS_SUMS;
  s.q_global = variant == 1 ? 3 * nq + 1 : 0;  // other ranks' shares
  s.k_global = variant == 1 ? 2 * nk : 0;
  s.eps = variant == 2 ? 0.0f : 1e-5f;
  return s;
}

}  // namespace test
}  // namespace fusednorm
