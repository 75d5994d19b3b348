// fusednorm-bench: the rmsnorm_fp4 cases (NVFP4 and MXFP4, row-major and swizzled scales) of one
// shape and input dtype: buffers, the check of sampled rows against the scalar reference, timing
// and the table rows. Included by fusednorm_bench.cc after bench_run.h.
#pragma once

#include <inttypes.h>
#include <stdio.h>

#include <exception>
#include <new>
#include <string>
#include <vector>

#include "bench_run.h"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace bench {

// A DLTensor over a buffer: shape {rows, cols} (or 1-D), compact.
struct Flat {
  int64_t shape[2];
  DLTensor dl{};
  Flat(DLDevice d, DLDataType t, void* p, int64_t rows, int64_t cols, int ndim = 2) {
    shape[0] = ndim == 2 ? rows : rows * cols;
    shape[1] = cols;
    dl.data = p;
    dl.device = d;
    dl.ndim = ndim;
    dl.dtype = t;
    dl.shape = shape;
  }
};

inline void run_fp4_group(Run& run, int64_t rows, int64_t cols, DType in) {
  const Options& o = run.o;
  Device& dev = run.dev;
  struct Mode {
    const char* name;
    int format;
    bool swizzled;
  };
  const Mode modes[kFp4Modes] = {{"nvfp4", FUSEDNORM_FP4_NVFP4, false},
                                 {"nvfp4_swizzled", FUSEDNORM_FP4_NVFP4, true},
                                 {"mxfp4", FUSEDNORM_FP4_MXFP4, false},
                                 {"mxfp4_swizzled", FUSEDNORM_FP4_MXFP4, true}};
  if (cols % 32 != 0) {
    if (run.noted.insert("fp4@" + std::to_string(cols)).second)
      fprintf(stderr, "note: skipping rmsnorm_fp4 at hidden %" PRId64 " (not a multiple of 32)\n", cols);
    run.skipped += kFp4Modes;
    run.cases_done += kFp4Modes;
    return;
  }
  const size_t ib = size_t(elem_bytes(in)), elems = size_t(rows) * size_t(cols);
  int64_t sw_bytes = 0;
  fusednorm_fp4_swizzled_size(rows, cols, FUSEDNORM_FP4_NVFP4, &sw_bytes);  // the larger of the two formats
  const size_t in_stride = round64(elems * ib), w_stride = round64(size_t(cols) * ib), out_stride = round64(elems / 2),
               sc_stride = round64(std::max(size_t(sw_bytes), size_t(rows) * size_t(cols / 16)));
  const size_t per_set = in_stride + w_stride + out_stride + sc_stride;
  size_t sets = std::min<size_t>(65536, std::max<size_t>(1, (run.rotate_bytes + per_set - 1) / per_set));
  const double budget = o.budget_gib * kGiB;
  if (double(per_set) > budget) {
    fprintf(stderr, "note: skipping rmsnorm_fp4 %" PRId64 " x %" PRId64 " %s: over the %.2f GiB budget\n", rows, cols,
            dtype_name(in), o.budget_gib);
    run.skipped += kFp4Modes;
    run.cases_done += kFp4Modes;
    return;
  }
  sets = std::min(sets, size_t(budget / double(per_set)));
  Buffer in_buf, w_buf, out_buf, sc_buf, gs_buf;
  try {
    in_buf = Buffer(dev, sets * in_stride);
    w_buf = Buffer(dev, sets * w_stride);
    out_buf = Buffer(dev, sets * out_stride);
    sc_buf = Buffer(dev, sets * sc_stride);
    gs_buf = Buffer(dev, 64);
  } catch (const std::bad_alloc&) {
    fprintf(stderr, "note: skipping rmsnorm_fp4 %" PRId64 " x %" PRId64 " %s: allocating failed\n", rows, cols,
            dtype_name(in));
    run.skipped += kFp4Modes;
    run.cases_done += kFp4Modes;
    return;
  }
  fill_random(dev, in_buf.data(), sets, in_stride, rows, cols, in, run.x_pool, 1);
  fill_random(dev, w_buf.data(), sets, w_stride, 1, cols, in, run.w_pool, 3);
  dev.fill_bytes(out_buf.data(), 0, out_buf.bytes());
  dev.fill_bytes(sc_buf.data(), 0, sc_buf.bytes());
  const float gs = 448.0f * 6.0f / 8.0f;  // a calibrated NVFP4 global scale for |y| up to ~8
  dev.upload(gs_buf.data(), &gs, 4);
  dev.synchronize();
  fprintf(stderr, "[%4d/%d %6.0fs] rmsnorm_fp4 %" PRId64 " x %" PRId64 " %s: %zu buffer set%s\n", run.cases_done + 1,
          run.cases_total, now_s() - run.t_start, rows, cols, dtype_name(in), sets, sets == 1 ? "" : "s");

  for (const Mode& m : modes) {
    Run::Result res;
    try {
      fusednorm_rmsnorm_fp4_options opt;
      fusednorm_rmsnorm_fp4_options_init(&opt);
      opt.format = m.format;
      opt.scale_layout = m.swizzled ? FUSEDNORM_FP4_SCALES_SWIZZLED : FUSEDNORM_FP4_SCALES_ROW_MAJOR;
      const bool nv = m.format == FUSEDNORM_FP4_NVFP4;
      const int64_t block = nv ? 16 : 32, nb = cols / block;
      int64_t sc_bytes = 0;
      fusednorm_fp4_swizzled_size(rows, cols, m.format, &sc_bytes);
      if (!m.swizzled) sc_bytes = rows * nb;
      const DLDataType sc_type = dl_from_dtype(nv ? DType::k_f8e4m3fn : DType::kE8M0);
      const DLDataType q_type = DLDataType{kDLUInt, 8, 1};
      Flat x(dev.dl_device(), dl_from_dtype(in), in_buf.data(), rows, cols), w(dev.dl_device(), dl_from_dtype(in),
                                                                                w_buf.data(), 1, cols, 1),
          q(dev.dl_device(), q_type, out_buf.data(), rows, cols / 2),
          sc(dev.dl_device(), sc_type, sc_buf.data(), m.swizzled ? 1 : rows, m.swizzled ? sc_bytes : nb,
             m.swizzled ? 1 : 2),
          g(dev.dl_device(), dl_from_dtype(DType::kF32), gs_buf.data(), 1, 1, 1);
      DLTensor* pgs = nv ? &g.dl : nullptr;
      // Check: one call on set 0, sampled rows against the reference of those rows alone.
      dev.synchronize();
      const double t0 = now_s();
      fusednorm_status st = fusednorm_rmsnorm_fp4(&x.dl, nullptr, &w.dl, &q.dl, &sc.dl, pgs, &opt, dev.stream());
      dev.synchronize();
      res.check_call_s = now_s() - t0;
      if (st != FUSEDNORM_SUCCESS) throw std::runtime_error(std::string(fusednorm_status_string(st)) + ": " +
                                                            fusednorm_last_error());
      std::vector<uint8_t> w_host(size_t(cols) * ib), x_host(w_host.size()), q_ref(size_t(cols / 2)),
          q_lib(q_ref.size()), s_ref(static_cast<size_t>(nb)), s_all(static_cast<size_t>(sc_bytes));
      dev.download(w_host.data(), w_buf.data(), w_host.size());
      dev.download(s_all.data(), sc_buf.data(), s_all.size());
      fusednorm_rmsnorm_fp4_options ref_opt = opt;
      ref_opt.scale_layout = FUSEDNORM_FP4_SCALES_ROW_MAJOR;
      const std::vector<int64_t> sample = Run::sample_rows(rows, o.check_rows);
      res.checked = int(sample.size());
      const DLDevice cpu{kDLCPU, 0};
      for (int64_t r : sample) {
        dev.download(x_host.data(), in_buf.data() + size_t(r) * x_host.size(), x_host.size());
        dev.download(q_lib.data(), out_buf.data() + size_t(r) * q_lib.size(), q_lib.size());
        Flat rx(cpu, dl_from_dtype(in), x_host.data(), 1, cols), rw(cpu, dl_from_dtype(in), w_host.data(), 1, cols, 1),
            rq(cpu, q_type, q_ref.data(), 1, cols / 2), rs(cpu, sc_type, s_ref.data(), 1, nb), rg(cpu, g.dl.dtype,
                                                                                                  const_cast<float*>(&gs), 1, 1, 1);
        st = reference::rmsnorm_fp4(&rx.dl, nullptr, &rw.dl, &rq.dl, &rs.dl, nv ? &rg.dl : nullptr, &ref_opt);
        if (st != FUSEDNORM_SUCCESS) throw std::runtime_error(std::string("reference: ") + fusednorm_last_error());
        for (size_t i = 0; i < q_ref.size(); ++i) res.mismatches += q_lib[i] != q_ref[i];
        for (int64_t k = 0; k < nb; ++k) {
          const int64_t at = m.swizzled ? math::fp4_swizzled_offset(r, k, math::fp4_swizzled_tiles(nb)) : r * nb + k;
          res.mismatches += s_all[size_t(at)] != s_ref[size_t(k)];
        }
      }
      if (res.mismatches)
        fprintf(stderr, "  MISMATCH rmsnorm_fp4 %s %s %" PRId64 "x%" PRId64 ": %lld bytes\n", m.name, dtype_name(in),
                rows, cols, res.mismatches);
      size_t next = 0;
      fusednorm_status bad = FUSEDNORM_SUCCESS;
      void* stream = dev.stream();
      auto call = [&] {
        const size_t s = next;
        next = next + 1 == sets ? 0 : next + 1;
        x.dl.data = in_buf.data() + s * in_stride;
        w.dl.data = w_buf.data() + s * w_stride;
        q.dl.data = out_buf.data() + s * out_stride;
        sc.dl.data = sc_buf.data() + s * sc_stride;
        const fusednorm_status cs = fusednorm_rmsnorm_fp4(&x.dl, nullptr, &w.dl, &q.dl, &sc.dl, pgs, &opt, stream);
        if (cs != FUSEDNORM_SUCCESS && bad == FUSEDNORM_SUCCESS) bad = cs;
      };
      run.time_case(call, double(elems) * double(ib), sets, &res);
      if (bad != FUSEDNORM_SUCCESS)
        throw std::runtime_error(std::string(fusednorm_status_string(bad)) + " in the timed calls: " +
                                 fusednorm_last_error());
      res.bytes = double(elems) * double(ib) + double(cols) * double(ib) + double(elems) / 2 + double(sc_bytes) +
                  (nv ? 4.0 : 0.0);
    } catch (const std::exception& e) {
      res.ok = false;
      res.error = e.what();
    }
    run.tally(res);
    run.print_row("rmsnorm_fp4", m.name, in, DType::k_f4e2m1, rows, cols, sets, res, [&](Json& j) {
      j["group_size"] = m.format == FUSEDNORM_FP4_NVFP4 ? 16 : 32;
      j["residual"] = false;
    });
  }
}

}  // namespace bench
}  // namespace fusednorm
