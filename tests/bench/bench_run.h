// fusednorm-bench: the rmsnorm_quant cases: buffer sets per shape, the check of each case against
// the scalar reference, its timing, and the table / JSON lines on stdout. Included by
// fusednorm_bench.cc only.
#pragma once

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <exception>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "bench_device.h"
#include "bench_options.h"
#include "bench_timing.h"
#include "bench_util.h"
#include "core/dtype.h"
#include "fusednorm/fusednorm.h"
#include "reference/reference.h"

namespace fusednorm {
namespace bench {

struct Run;
// The mla_rope_rmsnorm_quant cases (bench_mla.h).
void run_mla_cases(Run& run);
int mla_case_count(const Options& o);

// ---------------------------------------------------------------- rmsnorm_quant cases

inline void run_qk_cases(Run& run);           // bench_qk.h
inline int qk_case_count(const Options& o);  // bench_qk.h

struct Run {
  const Options& o;
  Device& dev;
  int threads;
  std::string target;
  double copy = 0;
  size_t rotate_bytes = 0;
  RandomPool x_pool, w_pool;
  std::vector<FILE*> json_out;  // where the cases' JSON lines go: stdout (--json), --plot's file
  long long total_mismatches = 0;
  int failures = 0, cases_done = 0, cases_total = 0, skipped = 0;
  std::set<std::string> noted;  // notes already printed
  double t_start = 0;

  Run(const Options& o_, Device& d, int th)
      : o(o_), dev(d), threads(th), target(fusednorm_cpu_target()),
        x_pool(o_.seed, 0.0f, 1.0f, size_t(1) << 20), w_pool(o_.seed + 1, 1.0f, 0.1f, size_t(1) << 18) {}

  // The buffers of one (tokens, hidden, input dtype), shared by its modes and output dtypes:
  // `sets` copies of every tensor; calls rotate over them.
  struct Group {
    int64_t rows = 0, cols = 0;
    DType in = DType::kBF16;
    size_t sets = 0, in_stride = 0, w_stride = 0, out_stride = 0, sc_stride = 0;
    int64_t max_scales = 0;  // per row
    Buffer in_buf, res_buf, w_buf, out_buf, sc_buf, static_buf;
  };

  struct Result {
    bool ok = true;
    std::string error;
    long long mismatches = 0;
    int checked = 0;
    double check_call_s = 0;  // the library call of the check
    Timing timing;
    const char* method = "clock";  // how timing was taken: clock (CPU), events or graph (GPU)
    double bytes = 0;
  };

  static std::vector<int64_t> sample_rows(int64_t rows, int n) {
    std::vector<int64_t> r;
    if (rows <= n) {
      for (int64_t i = 0; i < rows; ++i) r.push_back(i);
      return r;
    }
    for (int i = 0; i < n; ++i) {
      const int64_t v = (int64_t(i) * (rows - 1) + (n - 1) / 2) / (n - 1);
      if (r.empty() || r.back() != v) r.push_back(v);
    }
    return r;
  }

  // The check's library call, timed (res->check_call_s); false, with the error in res, if it failed.
  template <class F>
  bool timed_check_call(F&& call, Result* res) {
    dev.synchronize();
    const double t0 = now_s();
    const fusednorm_status st = call();
    dev.synchronize();
    res->check_call_s = now_s() - t0;
    if (st == FUSEDNORM_SUCCESS) return true;
    res->ok = false;
    res->error = std::string(fusednorm_status_string(st)) + ": " + fusednorm_last_error();
    return false;
  }

  // Runs the library once on set 0 and compares the sampled rows (output bytes, scale bytes and,
  // with a residual, the updated residual bytes) with the reference computed on those rows alone.
  Result check(Group& g, const ModeSpec& m, DType out, const fusednorm_rmsnorm_quant_options& opt) {
    Result res;
    const int64_t h = g.cols, ns = scales_per_row(m, h);
    const size_t in_row = size_t(h) * size_t(elem_bytes(g.in));
    const std::vector<int64_t> rows = sample_rows(g.rows, o.check_rows);
    res.checked = int(rows.size());
    // The residual is updated in place: keep the original of the sampled rows.
    std::vector<std::vector<uint8_t>> res_orig(rows.size());
    if (m.residual)
      for (size_t k = 0; k < rows.size(); ++k) {
        res_orig[k].resize(in_row);
        dev.download(res_orig[k].data(), g.res_buf.data() + size_t(rows[k]) * in_row, in_row);
      }
    {
      const bool st_mode = m.scale_mode == FUSEDNORM_SCALE_STATIC;
      CallTensors x(dev.dl_device(), g.in, out, g.rows, h, ns, st_mode, g.in_buf.data(), g.res_buf.data(),
                    g.w_buf.data(), g.out_buf.data(), st_mode ? g.static_buf.data() : g.sc_buf.data());
      if (!timed_check_call(
              [&] { return fusednorm_rmsnorm_quant(&x.in, m.residual ? &x.res : nullptr, &x.w, &x.out, &x.sc, &opt, dev.stream()); },
              &res))
        return res;
    }
    std::vector<uint8_t> w_host(in_row), x_host(in_row), r_ref(in_row), r_lib(in_row), q_ref(static_cast<size_t>(h)),
        q_lib(static_cast<size_t>(h));
    std::vector<float> s_ref(size_t(std::max<int64_t>(ns, 1))), s_lib(s_ref.size());
    float static_scale = 0;
    dev.download(w_host.data(), g.w_buf.data(), in_row);
    if (m.scale_mode == FUSEDNORM_SCALE_STATIC) dev.download(&static_scale, g.static_buf.data(), 4);
    int reported = 0;
    auto report = [&](const char* what, int64_t row, int64_t idx, unsigned lib, unsigned ref) {
      if (reported++ >= 3) return;
      fprintf(stderr, "  MISMATCH %s %s %s->%s %" PRId64 "x%" PRId64 ": %s row %" PRId64 " byte %" PRId64
                      ": library 0x%02x, reference 0x%02x\n",
              "rmsnorm_quant", m.name.c_str(), dtype_name(g.in), dtype_name(out), g.rows, h, what, row, idx, lib, ref);
    };
    for (size_t k = 0; k < rows.size(); ++k) {
      const int64_t r = rows[k];
      dev.download(x_host.data(), g.in_buf.data() + size_t(r) * in_row, in_row);
      dev.download(q_lib.data(), g.out_buf.data() + size_t(r) * size_t(h), size_t(h));
      if (ns > 0) dev.download(s_lib.data(), g.sc_buf.data() + size_t(r) * size_t(ns) * 4, size_t(ns) * 4);
      if (m.residual) {
        dev.download(r_lib.data(), g.res_buf.data() + size_t(r) * in_row, in_row);
        r_ref = res_orig[k];
      }
      const bool st_mode = m.scale_mode == FUSEDNORM_SCALE_STATIC;
      CallTensors x(DLDevice{kDLCPU, 0}, g.in, out, 1, h, ns, st_mode, x_host.data(), r_ref.data(), w_host.data(),
                    q_ref.data(), st_mode ? static_cast<void*>(&static_scale) : s_ref.data());
      const fusednorm_status st =
          reference::rmsnorm_quant(&x.in, m.residual ? &x.res : nullptr, &x.w, &x.out, &x.sc, &opt);
      if (st != FUSEDNORM_SUCCESS) {
        res.ok = false;
        res.error = std::string("reference: ") + fusednorm_status_string(st) + ": " + fusednorm_last_error();
        return res;
      }
      for (int64_t i = 0; i < h; ++i)
        if (q_lib[size_t(i)] != q_ref[size_t(i)]) { ++res.mismatches; report("output", r, i, q_lib[size_t(i)], q_ref[size_t(i)]); }
      const uint8_t* sl = reinterpret_cast<const uint8_t*>(s_lib.data());
      const uint8_t* sr = reinterpret_cast<const uint8_t*>(s_ref.data());
      for (int64_t i = 0; i < ns * 4; ++i)
        if (sl[i] != sr[i]) { ++res.mismatches; report("scales", r, i, sl[i], sr[i]); }
      if (m.residual)
        for (size_t i = 0; i < in_row; ++i)
          if (r_lib[i] != r_ref[i]) { ++res.mismatches; report("residual", r, int64_t(i), r_lib[i], r_ref[i]); }
    }
    return res;
  }

  // Times call() (each call on the next of `sets` buffer sets) into res->timing and res->method.
  // input_bytes: what a call reads of its main input (GPU: graph replay below kGraphBelowBytes).
  template <class Call>
  void time_case(Call& call, double input_bytes, size_t sets, Result* res) {
    if (dev.is_host()) {
      res->timing = time_calls(dev, call, o.time_per_case, o.reps, o.min_reps, res->check_call_s);
      return;
    }
    // GPU: graph replay for small inputs (or as asked), else stream launches; both between
    // events. The check's call is no timing hint here (it may have loaded the kernel).
    std::string why;
    if (o.timing == "graph" || (o.timing == "auto" && input_bytes < kGraphBelowBytes)) {
      if (time_graph(dev, call, sets, o.time_per_case, o.reps, o.min_reps, &res->timing, &why)) res->method = "graph";
      else if (noted.insert("graph").second)
        fprintf(stderr, "note: graph timing failed (%s); timing stream launches with events instead\n", why.c_str());
    }
    if (strcmp(res->method, "graph") != 0) {
      res->timing = time_calls(dev, call, o.time_per_case, o.reps, o.min_reps);
      res->method = "events";
    }
  }

  Result run_case(Group& g, const ModeSpec& m, DType out) {
    const int64_t h = g.cols, ns = scales_per_row(m, h);
    fusednorm_rmsnorm_quant_options opt;
    fusednorm_rmsnorm_quant_options_init(&opt);
    opt.scale_mode = m.scale_mode;
    if (m.group) opt.group_size = m.group;
    if (m.scale_mode == FUSEDNORM_SCALE_STATIC) {
      // |y| reaches ~4.5 for N(0,1) rows and weights ~1: 6 / qmax keeps most values in range.
      const float s = 6.0f / format_max(out);
      dev.upload(g.static_buf.data(), &s, 4);
    }
    Result res = check(g, m, out, opt);
    if (!res.ok) return res;

    const bool st_mode = m.scale_mode == FUSEDNORM_SCALE_STATIC;
    CallTensors x(dev.dl_device(), g.in, out, g.rows, h, ns, st_mode, g.in_buf.data(), g.res_buf.data(),
                  g.w_buf.data(), g.out_buf.data(), st_mode ? g.static_buf.data() : g.sc_buf.data());
    DLTensor* pres = m.residual ? &x.res : nullptr;
    DLTensor* psc = &x.sc;
    const bool rotate_sc = m.scale_mode != FUSEDNORM_SCALE_STATIC;
    size_t next = 0;
    fusednorm_status bad = FUSEDNORM_SUCCESS;
    void* stream = dev.stream();
    auto call = [&] {
      const size_t s = next;
      next = next + 1 == g.sets ? 0 : next + 1;
      x.in.data = g.in_buf.data() + s * g.in_stride;
      x.res.data = g.res_buf.data() + s * g.in_stride;
      x.w.data = g.w_buf.data() + s * g.w_stride;
      x.out.data = g.out_buf.data() + s * g.out_stride;
      if (rotate_sc) x.sc.data = g.sc_buf.data() + s * g.sc_stride;
      const fusednorm_status st = fusednorm_rmsnorm_quant(&x.in, pres, &x.w, &x.out, psc, &opt, stream);
      if (st != FUSEDNORM_SUCCESS && bad == FUSEDNORM_SUCCESS) bad = st;
    };
    time_case(call, double(g.rows) * double(h) * elem_bytes(g.in), g.sets, &res);
    if (bad != FUSEDNORM_SUCCESS) {
      res.ok = false;
      res.error = std::string(fusednorm_status_string(bad)) + " in the timed calls: " + fusednorm_last_error();
    }
    const double elems = double(g.rows) * double(h), ib = elem_bytes(g.in);
    res.bytes = elems * ib * (m.residual ? 3.0 : 1.0) + double(h) * ib + elems * (dtype_bits(out) / 8.0) +
                (ns > 0 ? double(g.rows) * double(ns) * 4.0 : 4.0);
    return res;
  }

  // The CPU table as ever; on a GPU a `timing` column (events / graph) after `reps`.
  void print_header() {
    if (o.json) return;
    printf("%-13s %-14s %-5s %-11s %6s %6s %5s %6s", "op", "mode", "in", "out", "rows", "cols", "sets", "reps");
    if (!dev.is_host()) printf(" %-6s", "timing");
    printf(" %11s %8s %6s %10s\n", "us", "GB/s", "%copy", "mismatches");
    fflush(stdout);
  }

  // One case: its JSON line (the common keys, extra(j)'s, then the result) where JSON goes (stdout
  // with --json, --plot's file), and its row of the table unless --json. cols_text: the table's
  // cols column (qk_rmsnorm: "4096+512"; JSON has the sum and the op's own keys).
  template <class Extra>
  void print_row(const char* op, const std::string& mode, DType in, DType out, int64_t rows, int64_t cols,
                 const std::string& cols_text, size_t sets, const Result& r, Extra&& extra) {
    const double us = r.timing.sec * 1e6, gbps = r.timing.sec > 0 ? r.bytes / r.timing.sec / 1e9 : 0,
                 pct = copy > 0 ? gbps / copy * 100.0 : 0;
    if (!json_out.empty()) {
      Json j;
      j["op"] = op;
      j["mode"] = mode;
      j["device"] = dev.label();
      j["in_dtype"] = dtype_name(in);
      j["out_dtype"] = dtype_name(out);
      j["rows"] = rows;
      j["cols"] = cols;
      extra(j);
      j["status"] = r.ok ? "ok" : "error";
      if (!r.ok) j["error"] = r.error;
      j["us"] = sig6(us);
      j["us_min"] = sig6(r.timing.min_sec * 1e6);
      j["gbps"] = sig6(gbps);
      j["copy_gbps"] = sig6(copy);
      j["pct_of_copy"] = sig6(pct);
      j["mismatches"] = r.mismatches;
      j["checked_rows"] = r.checked;
      j["bytes"] = sig6(r.bytes);
      j["sets"] = sets;
      j["reps"] = r.timing.samples;
      j["timing"] = r.method;
      j["calls_per_rep"] = r.timing.inner;
      j["threads"] = threads;
      j["cpu_target"] = target;
      j["seed"] = o.seed;
      for (FILE* f : json_out) write_json_line(f, j);
    }
    if (o.json) return;
    if (!r.ok) {
      printf("%-13s %-14s %-5s %-11s %6" PRId64 " %6s %5zu  ERROR: %s\n", op, mode.c_str(), dtype_name(in),
             dtype_name(out), rows, cols_text.c_str(), sets, r.error.c_str());
    } else {
      printf("%-13s %-14s %-5s %-11s %6" PRId64 " %6s %5zu %6d", op, mode.c_str(), dtype_name(in), dtype_name(out), rows,
             cols_text.c_str(), sets, r.timing.samples);
      if (!dev.is_host()) printf(" %-6s", r.method);
      printf(" %11.2f %8.2f %6.1f %10lld\n", us, gbps, pct, r.mismatches);
    }
    fflush(stdout);
  }
  template <class Extra>
  void print_row(const char* op, const std::string& mode, DType in, DType out, int64_t rows, int64_t cols, size_t sets,
                 const Result& r, Extra&& extra) {
    print_row(op, mode, in, out, rows, cols, std::to_string(cols), sets, r, extra);
  }
  // Counts a finished case.
  void tally(const Result& r) {
    if (!r.ok) ++failures;
    total_mismatches += r.mismatches;
    ++cases_done;
  }

  void print_result(const Group& g, const ModeSpec& m, DType out, const Result& r) {
    print_row("rmsnorm_quant", m.name, g.in, out, g.rows, g.cols, g.sets, r, [&](Json& j) {
      j["group_size"] = m.scale_mode == FUSEDNORM_SCALE_DYNAMIC_GROUP ? m.group
                        : m.scale_mode == FUSEDNORM_SCALE_DYNAMIC_ROW ? g.cols
                                                                      : 0;
      j["residual"] = m.residual;
    });
  }

  // Sets up the buffers of one shape and input dtype and runs its cases.
  void run_group(int64_t rows, int64_t cols, DType in) {
    std::vector<const ModeSpec*> modes;
    bool need_res = false;
    int64_t max_scales = 0;
    for (const auto& m : o.modes) {
      if (m.group && cols % m.group != 0) {
        if (noted.insert(m.name + "@" + std::to_string(cols)).second)
          fprintf(stderr, "note: skipping %s at hidden %" PRId64 " (not a multiple of %" PRId64 ")\n", m.name.c_str(),
                cols, m.group);
        skipped += int(o.out.size());
        cases_done += int(o.out.size());
        continue;
      }
      modes.push_back(&m);
      need_res |= m.residual;
      max_scales = std::max(max_scales, scales_per_row(m, cols));
    }
    if (modes.empty()) return;
    const int n_cases = int(modes.size() * o.out.size());
    Group g;
    g.rows = rows;
    g.cols = cols;
    g.in = in;
    g.max_scales = max_scales;
    const size_t ib = size_t(elem_bytes(in)), elems = size_t(rows) * size_t(cols);
    g.in_stride = round64(elems * ib);
    g.w_stride = round64(size_t(cols) * ib);
    g.out_stride = round64(elems);
    g.sc_stride = round64(size_t(rows) * size_t(max_scales) * 4);
    // Sets: enough that the bytes a call without residual touches, summed over the sets, exceed
    // rotate_bytes; the residual (when asked for) comes on top.
    const size_t touched = g.in_stride + g.w_stride + g.out_stride + g.sc_stride;
    const size_t per_set = touched + (need_res ? g.in_stride : 0);
    const double budget = o.budget_gib * kGiB;
    g.sets = std::min<size_t>(65536, std::max<size_t>(1, (rotate_bytes + touched - 1) / touched));
    if (double(per_set) > budget) {
      fprintf(stderr,
              "note: skipping %" PRId64 " x %" PRId64 " %s: its buffers need %.2f GiB, over the %.2f GiB budget "
              "(--budget-gib)\n",
              rows, cols, dtype_name(in), double(per_set) / kGiB, o.budget_gib);
      skipped += n_cases;
      cases_done += n_cases;
      return;
    }
    g.sets = std::min(g.sets, size_t(budget / double(per_set)));
    const double t0 = now_s();
    try {
      g.in_buf = Buffer(dev, g.sets * g.in_stride);
      g.w_buf = Buffer(dev, g.sets * g.w_stride);
      g.out_buf = Buffer(dev, g.sets * g.out_stride);
      if (max_scales) g.sc_buf = Buffer(dev, g.sets * g.sc_stride);
      if (need_res) g.res_buf = Buffer(dev, g.sets * g.in_stride);
      g.static_buf = Buffer(dev, 64);
    } catch (const std::bad_alloc&) {
      fprintf(stderr, "note: skipping %" PRId64 " x %" PRId64 " %s: allocating %.2f GiB failed\n", rows, cols,
              dtype_name(in), double(g.sets * per_set) / kGiB);
      skipped += n_cases;
      cases_done += n_cases;
      return;
    }
    fill_random(dev, g.in_buf.data(), g.sets, g.in_stride, rows, cols, in, x_pool, 1);
    if (need_res) fill_random(dev, g.res_buf.data(), g.sets, g.in_stride, rows, cols, in, x_pool, 2);
    fill_random(dev, g.w_buf.data(), g.sets, g.w_stride, 1, cols, in, w_pool, 3);
    dev.fill_bytes(g.out_buf.data(), 0, g.out_buf.bytes());
    if (max_scales) dev.fill_bytes(g.sc_buf.data(), 0, g.sc_buf.bytes());
    dev.synchronize();
    fprintf(stderr, "[%4d/%d %6.0fs] %" PRId64 " x %" PRId64 " %s: %zu buffer set%s, %.1f MiB (setup %.2f s)\n",
            cases_done + 1, cases_total, now_s() - t_start, rows, cols, dtype_name(in), g.sets, g.sets == 1 ? "" : "s",
            double(g.sets * per_set) / kMiB, now_s() - t0);
    for (const ModeSpec* m : modes)
      for (DType out : o.out) {
        Result r;
        try {
          r = run_case(g, *m, out);
        } catch (const std::exception& e) {
          r.ok = false;
          r.error = e.what();
        }
        tally(r);
        print_result(g, *m, out, r);
      }
  }

  int run_all();
};

// Every rmsnorm_fp4 mode: NVFP4 and MXFP4, row-major and swizzled scales.
constexpr int kFp4Modes = 4;
inline void run_fp4_group(Run& run, int64_t rows, int64_t cols, DType in);  // bench_fp4.h

inline int Run::run_all() {
    t_start = now_s();
    cases_total = 0;
    const int shapes = int(o.hidden.size() * o.tokens.size() * o.in.size());
    for (const auto& op : o.ops)
      cases_total += op == "qk_rmsnorm"    ? qk_case_count(o)
                     : op == "mla"         ? mla_case_count(o)
                     : op == "rmsnorm_fp4" ? shapes * kFp4Modes
                                           : shapes * int(o.modes.size() * o.out.size());
    print_header();
    for (const auto& op : o.ops) {
      if (op == "qk_rmsnorm") {
        run_qk_cases(*this);
        continue;
      }
      if (op == "mla") {
        run_mla_cases(*this);
        continue;
      }
      for (int64_t h : o.hidden)
        for (int64_t t : o.tokens)
          for (DType in : o.in) {
            if (op == "rmsnorm_fp4") run_fp4_group(*this, t, h, in);
            else run_group(t, h, in);
          }
    }
    const double el = now_s() - t_start;
    FILE* f = o.json ? stderr : stdout;
    fprintf(f, "# %d cases (%d skipped) in %.1f s; %d failed; %lld mismatching bytes in the checked rows: %s\n",
            cases_total, skipped, el, failures, total_mismatches, total_mismatches || failures ? "FAIL" : "OK");
    fflush(f);
    return total_mismatches || failures ? 1 : 0;
}

}  // namespace bench
}  // namespace fusednorm
