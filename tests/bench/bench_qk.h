// fusednorm-bench: the qk_rmsnorm cases (--ops qk_rmsnorm): stats, apply, fused, stats then apply
// launched separately, and the per-head fused form, at (rows, Nq, Nk) shapes; each checked against
// the scalar reference on sampled rows, timed like rmsnorm_quant's cases, and related to the copy
// bandwidth. Included by fusednorm_bench.cc after bench_run.h.
#pragma once

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "bench_run.h"
#include "core/call.h"
#include "reference/reference.h"

namespace fusednorm {
namespace bench {

// The tensors of one qk_rmsnorm call (compact rows; weights of the input dtype; outputs of the
// input dtype or FP8 `out`, whose static scales are the tensor `scales` [2]).
struct QkTensors {
  int64_t qs[2], ks[2], ss[2], qws[1], kws[1], scs[1] = {2};
  DLTensor q, k, stats, qw, kw, qo, ko, scales;
  QkTensors(DLDevice d, DType t, int64_t rows, int64_t nq, int64_t nk, int64_t wq, int64_t wk,
            DType out = DType::kInvalid)
      : qs{rows, nq}, ks{rows, nk}, ss{rows, 2}, qws{wq}, kws{wk} {
    q = tensor(nullptr, d, t, 2, qs);
    k = tensor(nullptr, d, t, 2, ks);
    qo = tensor(nullptr, d, out == DType::kInvalid ? t : out, 2, qs);
    ko = tensor(nullptr, d, out == DType::kInvalid ? t : out, 2, ks);
    scales = tensor(nullptr, d, DType::kF32, 1, scs);
    stats = tensor(nullptr, d, DType::kF32, 2, ss);
    qw = tensor(nullptr, d, t, 1, qws);
    kw = tensor(nullptr, d, t, 1, kws);
  }
  QkTensors(const QkTensors&) = delete;
  QkTensors& operator=(const QkTensors&) = delete;
};

struct QkMode {
  const char* name;
  QkKind kind;      // kStats, kApply, kFused; `split`: stats then apply
  bool split;
  int64_t head_dim;
  DType out = DType::kInvalid;  // an FP8 output with static scales, else the input dtype
  const DLTensor* out_scales(const QkTensors& x) const { return out == DType::kInvalid ? nullptr : &x.scales; }
};
inline constexpr QkMode kQkModes[] = {{"stats", QkKind::kStats, false, 0},
                                      {"apply", QkKind::kApply, false, 0},
                                      {"fused", QkKind::kFused, false, 0},
                                      {"stats+apply", QkKind::kApply, true, 0},
                                      {"fused_head128", QkKind::kFused, false, 128},
                                      {"fused_e4m3fn", QkKind::kFused, false, 0, DType::k_f8e4m3fn},
                                      {"fused_e4m3fnuz", QkKind::kFused, false, 0, DType::k_f8e4m3fnuz}};
// The FP8 modes' static scales (q, k): typical |y| of the bench's inputs well inside the formats.
inline constexpr float kQkOutScales[2] = {0.0625f, 0.03125f};

struct QkBench {
  Run& run;
  // One buffer set's byte offsets: q, k, outputs, stats, weights.
  struct Layout {
    size_t q = 0, k = 0, qo = 0, ko = 0, st = 0, qw = 0, kw = 0, sc = 0, set = 0;
  };

  // Enqueues the mode's call(s) on the tensors (whose data point at one buffer set).
  static fusednorm_status call(const QkMode& m, QkTensors& x, const fusednorm_qk_rmsnorm_options& o, void* stream) {
    if (m.kind == QkKind::kStats || m.split) {
      const fusednorm_status st = fusednorm_qk_rmsnorm_stats(&x.q, &x.k, &x.stats, &o, stream);
      if (st != FUSEDNORM_SUCCESS || !m.split) return st;
    }
    if (m.kind == QkKind::kApply)
      return fusednorm_qk_rmsnorm_apply(&x.q, &x.k, &x.stats, &x.qw, &x.kw, &x.qo, &x.ko, m.out_scales(x), &o,
                                        stream);
    return fusednorm_qk_rmsnorm(&x.q, &x.k, &x.qw, &x.kw, &x.qo, &x.ko, m.out_scales(x), &o, stream);
  }
  static void point(QkTensors& x, char* base, const Layout& l, size_t s) {
    char* b = base + s * l.set;
    x.q.data = b + l.q;
    x.k.data = b + l.k;
    x.qo.data = b + l.qo;
    x.ko.data = b + l.ko;
    x.stats.data = b + l.st;
    x.qw.data = b + l.qw;
    x.kw.data = b + l.kw;
    x.scales.data = b + l.sc;
  }

  // Sampled rows of set 0 against the reference on those rows alone (outputs, or the sums).
  Run::Result check(const QkMode& m, char* base, const Layout& l, int64_t rows, int64_t nq, int64_t nk, DType t,
                    const fusednorm_qk_rmsnorm_options& o) {
    Run::Result res;
    const int64_t wq = m.head_dim ? m.head_dim : nq, wk = m.head_dim ? m.head_dim : nk;
    const size_t eb = size_t(elem_bytes(t)), ob = m.out == DType::kInvalid ? eb : 1;
    QkTensors x(run.dev.dl_device(), t, rows, nq, nk, wq, wk, m.out);
    point(x, base, l, 0);
    std::vector<char> stats_before(size_t(rows) * 8);
    run.dev.download(stats_before.data(), base + l.st, stats_before.size());
    run.dev.synchronize();
    const double t0 = now_s();
    const fusednorm_status st = call(m, x, o, run.dev.stream());
    run.dev.synchronize();
    res.check_call_s = now_s() - t0;
    if (st != FUSEDNORM_SUCCESS) {
      res.ok = false;
      res.error = std::string(fusednorm_status_string(st)) + ": " + fusednorm_last_error();
      return res;
    }
    const std::vector<int64_t> sample = Run::sample_rows(rows, run.o.check_rows);
    res.checked = int(sample.size());
    std::vector<char> hq(size_t(nq) * eb), hk(size_t(nk) * eb), hqw(size_t(wq) * eb), hkw(size_t(wk) * eb),
        rq(size_t(nq) * ob), rk(size_t(nk) * ob), lq(rq.size()), lk(rk.size());
    run.dev.download(hqw.data(), base + l.qw, hqw.size());
    run.dev.download(hkw.data(), base + l.kw, hkw.size());
    for (int64_t r : sample) {
      float hs[2], ls[2];
      run.dev.download(hq.data(), base + l.q + size_t(r) * hq.size(), hq.size());
      run.dev.download(hk.data(), base + l.k + size_t(r) * hk.size(), hk.size());
      memcpy(hs, stats_before.data() + r * 8, 8);  // apply's input (split: the reference recomputes it)
      QkTensors h(DLDevice{kDLCPU, 0}, t, 1, nq, nk, wq, wk, m.out);
      h.scales.data = const_cast<float*>(kQkOutScales);
      h.q.data = hq.data();
      h.k.data = hk.data();
      h.qw.data = hqw.data();
      h.kw.data = hkw.data();
      h.qo.data = rq.data();
      h.ko.data = rk.data();
      h.stats.data = hs;
      const QkMode ref_mode = m.split ? kQkModes[2] : m;  // stats then apply == fused (R = 1)
      fusednorm_status rs;
      if (ref_mode.kind == QkKind::kStats) rs = reference::qk_rmsnorm_stats(&h.q, &h.k, &h.stats, &o);
      else if (ref_mode.kind == QkKind::kApply)
        rs = reference::qk_rmsnorm_apply(&h.q, &h.k, &h.stats, &h.qw, &h.kw, &h.qo, &h.ko, m.out_scales(h), &o);
      else rs = reference::qk_rmsnorm(&h.q, &h.k, &h.qw, &h.kw, &h.qo, &h.ko, m.out_scales(h), &o);
      if (rs != FUSEDNORM_SUCCESS) {
        res.ok = false;
        res.error = std::string("reference: ") + fusednorm_last_error();
        return res;
      }
      if (m.kind == QkKind::kStats) {
        run.dev.download(ls, base + l.st + size_t(r) * 8, 8);
        res.mismatches += memcmp(ls, hs, 8) != 0;
        continue;
      }
      run.dev.download(lq.data(), base + l.qo + size_t(r) * lq.size(), lq.size());
      run.dev.download(lk.data(), base + l.ko + size_t(r) * lk.size(), lk.size());
      for (size_t i = 0; i < lq.size(); ++i) res.mismatches += lq[i] != rq[i];
      for (size_t i = 0; i < lk.size(); ++i) res.mismatches += lk[i] != rk[i];
    }
    return res;
  }

  void run_shape(int64_t rows, int64_t nq, int64_t nk, DType t) {
    const size_t eb = size_t(elem_bytes(t));
    Layout l;
    l.q = 0;
    l.k = round64(size_t(rows * nq) * eb);
    l.qo = l.k + round64(size_t(rows * nk) * eb);
    l.ko = l.qo + round64(size_t(rows * nq) * eb);
    l.st = l.ko + round64(size_t(rows * nk) * eb);
    l.qw = l.st + round64(size_t(rows) * 8);
    l.kw = l.qw + round64(size_t(nq) * eb);
    l.sc = l.kw + round64(size_t(nk) * eb);
    l.set = l.sc + round64(sizeof kQkOutScales);
    const size_t sets = std::min<size_t>(
        {65536, std::max<size_t>(1, (run.rotate_bytes + l.set - 1) / l.set), size_t(run.o.budget_gib * kGiB / double(l.set))});
    const int n_modes = int(sizeof kQkModes / sizeof kQkModes[0]);
    if (sets == 0) {
      fprintf(stderr, "note: skipping qk %" PRId64 " x (%" PRId64 " + %" PRId64 "): over --budget-gib\n", rows, nq, nk);
      run.skipped += n_modes;
      run.cases_done += n_modes;
      return;
    }
    Buffer buf;
    try {
      buf = Buffer(run.dev, sets * l.set);
    } catch (const std::bad_alloc&) {
      fprintf(stderr, "note: skipping qk %" PRId64 " x (%" PRId64 " + %" PRId64 "): allocation failed\n", rows, nq, nk);
      run.skipped += n_modes;
      run.cases_done += n_modes;
      return;
    }
    char* base = buf.data();
    run.dev.fill_bytes(base, 0, buf.bytes());
    fill_random(run.dev, base + l.q, sets, l.set, rows, nq, t, run.x_pool, 11);
    fill_random(run.dev, base + l.k, sets, l.set, rows, nk, t, run.x_pool, 12);
    fill_random(run.dev, base + l.qw, sets, l.set, 1, nq, t, run.w_pool, 13);
    fill_random(run.dev, base + l.kw, sets, l.set, 1, nk, t, run.w_pool, 14);
    for (size_t s = 0; s < sets; ++s) run.dev.upload(base + s * l.set + l.sc, kQkOutScales, sizeof kQkOutScales);
    fusednorm_qk_rmsnorm_options o;
    fusednorm_qk_rmsnorm_options_init(&o);
    o.q_global_width = nq;
    o.k_global_width = nk;
    {  // every set's statistics (apply's input): the sums of its own rows
      QkTensors x(run.dev.dl_device(), t, rows, nq, nk, nq, nk);
      for (size_t s = 0; s < sets; ++s) {
        point(x, base, l, s);
        if (fusednorm_qk_rmsnorm_stats(&x.q, &x.k, &x.stats, &o, run.dev.stream()) != FUSEDNORM_SUCCESS)
          throw std::runtime_error(std::string("qk stats: ") + fusednorm_last_error());
      }
      run.dev.synchronize();
    }
    fprintf(stderr, "[%4d/%d %6.0fs] qk %" PRId64 " x (%" PRId64 " + %" PRId64 ") %s: %zu buffer sets\n",
            run.cases_done + 1, run.cases_total, now_s() - run.t_start, rows, nq, nk, dtype_name(t), sets);
    for (const QkMode& m : kQkModes) {
      Run::Result r;
      if (m.head_dim && (nq % m.head_dim || nk % m.head_dim)) {
        ++run.skipped;
        ++run.cases_done;
        continue;
      }
      fusednorm_qk_rmsnorm_options mo = o;
      mo.head_dim = m.head_dim;
      try {
        r = check(m, base, l, rows, nq, nk, t, mo);
        if (r.ok) time_case(m, base, l, sets, rows, nq, nk, t, mo, &r);
      } catch (const std::exception& e) {
        r.ok = false;
        r.error = e.what();
      }
      run.tally(r);
      print(m, rows, nq, nk, t, sets, r);
    }
  }

  void time_case(const QkMode& m, char* base, const Layout& l, size_t sets, int64_t rows, int64_t nq, int64_t nk,
                 DType t, const fusednorm_qk_rmsnorm_options& o, Run::Result* res) {
    const int64_t wq = m.head_dim ? m.head_dim : nq, wk = m.head_dim ? m.head_dim : nk;
    QkTensors x(run.dev.dl_device(), t, rows, nq, nk, wq, wk, m.out);
    size_t next = 0;
    fusednorm_status bad = FUSEDNORM_SUCCESS;
    auto one = [&] {
      point(x, base, l, next);
      next = next + 1 == sets ? 0 : next + 1;
      const fusednorm_status st = call(m, x, o, run.dev.stream());
      if (st != FUSEDNORM_SUCCESS && bad == FUSEDNORM_SUCCESS) bad = st;
    };
    const double eb = elem_bytes(t), elems = double(rows) * double(nq + nk);
    std::string why;
    if (!run.dev.is_host() && (run.o.timing == "graph" || (run.o.timing == "auto" && elems * eb < kGraphBelowBytes)) &&
        time_graph(run.dev, one, sets, run.o.time_per_case, run.o.reps, run.o.min_reps, &res->timing, &why)) {
      res->method = "graph";
    } else {
      res->timing = time_calls(run.dev, one, run.o.time_per_case, run.o.reps, run.o.min_reps,
                               run.dev.is_host() ? res->check_call_s : 0);
      res->method = run.dev.is_host() ? "clock" : "events";
    }
    if (bad != FUSEDNORM_SUCCESS) {
      res->ok = false;
      res->error = std::string(fusednorm_status_string(bad)) + " in the timed calls: " + fusednorm_last_error();
    }
    // The operation's bytes: q and k read (stats: and 8 bytes a row written), weights and the
    // statistics read (apply), outputs written (FP8: a byte each). stats+apply counts the fused
    // form's bytes.
    const double weights = double(wq + wk) * eb, ob = m.out == DType::kInvalid ? eb : 1;
    if (m.kind == QkKind::kStats) res->bytes = elems * eb + double(rows) * 8;
    else if (m.kind == QkKind::kApply && !m.split) res->bytes = elems * (eb + ob) + weights + double(rows) * 8;
    else res->bytes = elems * (eb + ob) + weights;
  }

  void print(const QkMode& m, int64_t rows, int64_t nq, int64_t nk, DType t, size_t sets, const Run::Result& r) {
    run.print_row("qk_rmsnorm", m.name, t, m.out == DType::kInvalid ? t : m.out, rows, nq + nk,
                  std::to_string(nq) + "+" + std::to_string(nk), sets, r, [&](Json& j) {
                    j["nq"] = nq;
                    j["nk"] = nk;
                    j["head_dim"] = m.head_dim;
                  });
  }
};

inline int qk_case_count(const Options& o) {
  return int(o.qk_shapes.size() * o.in.size() * (sizeof kQkModes / sizeof kQkModes[0]));
}

inline void run_qk_cases(Run& run) {
  QkBench b{run};
  for (const auto& s : run.o.qk_shapes)
    for (DType t : run.o.in) b.run_shape(s[0], s[1], s[2], t);
}

}  // namespace bench
}  // namespace fusednorm
