// fusednorm-bench: times fusednorm_rmsnorm_quant over scale modes, dtypes and LLM shapes (and
// qk_rmsnorm's forms at its shapes: bench_qk.h), checks
// every case against the scalar reference on a sample of rows, and relates the achieved bandwidth
// to the device's copy bandwidth measured in the same run. `fusednorm-bench --help` for usage.
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <string>

#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/task_arena.h>

#include "bench_device.h"
#include "bench_fp4.h"
#include "bench_options.h"
#include "bench_plot.h"
#include "bench_qk.h"
#include "bench_run.h"
#include "bench_mla.h"  // --ops mla
#include "bench_timing.h"
#include "bench_util.h"
#include "core/dtype.h"
#include "fusednorm/fusednorm.h"
#include "fusednorm/fusednorm.hpp"
#include "reference/reference.h"

namespace fusednorm {
namespace bench {
namespace {

// ---------------------------------------------------------------- --scalar-speedup

int scalar_speedup(const Options& o, Device& dev) {
  if (dev.dl_device().device_type != kDLCPU) {
    fprintf(stderr, "fusednorm-bench: --scalar-speedup compares CPU code: use --device cpu\n");
    return 2;
  }
  const int64_t rows = o.set_tokens ? o.tokens[0] : 4096, cols = o.set_hidden ? o.hidden[0] : 8192;
  const DType in = DType::kBF16, out = DType::k_f8e4m3fn;
  RandomPool xp(o.seed, 0.0f, 1.0f, size_t(1) << 20), wp(o.seed + 1, 1.0f, 0.1f, size_t(1) << 18);
  const size_t elems = size_t(rows) * size_t(cols);
  Buffer x(dev, elems * 2), w(dev, size_t(cols) * 2), q_lib(dev, elems), q_ref(dev, elems), s_lib(dev, size_t(rows) * 4),
      s_ref(dev, size_t(rows) * 4);
  fill_random(dev, x.data(), 1, 0, rows, cols, in, xp, 1);
  fill_random(dev, w.data(), 1, 0, 1, cols, in, wp, 3);
  dev.fill_bytes(q_lib.data(), 0, elems);
  dev.fill_bytes(q_ref.data(), 0xFF, elems);
  dev.fill_bytes(s_lib.data(), 0, size_t(rows) * 4);
  dev.fill_bytes(s_ref.data(), 0xFF, size_t(rows) * 4);
  int64_t shp[2] = {rows, cols}, wshp[1] = {cols}, sshp[2] = {rows, 1};
  const DLDevice d = dev.dl_device();
  DLTensor xin = tensor(x.data(), d, in, 2, shp), xw = tensor(w.data(), d, in, 1, wshp),
           ql = tensor(q_lib.data(), d, out, 2, shp), qr = tensor(q_ref.data(), d, out, 2, shp),
           sl = tensor(s_lib.data(), d, DType::kF32, 2, sshp), sr = tensor(s_ref.data(), d, DType::kF32, 2, sshp);
  fusednorm_rmsnorm_quant_options opt;
  fusednorm_rmsnorm_quant_options_init(&opt);
  opt.scale_mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
  fusednorm_status bad = FUSEDNORM_SUCCESS;
  const double target = o.set_time ? o.time_per_case : 1.0;
  fprintf(stderr, "scalar-speedup: %" PRId64 " x %" PRId64 " bf16 -> f8e4m3fn dynamic per-row, 1 thread, %s\n", rows,
          cols, dev.detail().c_str());
  const Timing tl = time_calls(
      dev, [&] { if (fusednorm_rmsnorm_quant(&xin, nullptr, &xw, &ql, &sl, &opt, nullptr)) bad = FUSEDNORM_INTERNAL_ERROR; },
      target, o.reps, o.min_reps);
  const Timing tr = time_calls(
      dev, [&] { if (reference::rmsnorm_quant(&xin, nullptr, &xw, &qr, &sr, &opt)) bad = FUSEDNORM_INTERNAL_ERROR; },
      target, o.reps, o.min_reps);
  long long mism = 0;
  for (size_t i = 0; i < elems; ++i) mism += q_lib.data()[i] != q_ref.data()[i];
  for (size_t i = 0; i < size_t(rows) * 4; ++i) mism += s_lib.data()[i] != s_ref.data()[i];
  const double ratio = tl.sec > 0 ? tr.sec / tl.sec : 0;
  const bool met = ratio >= 8.0;
  if (o.json) {
    Json j;
    j["op"] = "rmsnorm_quant";
    j["mode"] = "row";
    j["device"] = dev.name();
    j["in_dtype"] = "bf16";
    j["out_dtype"] = "f8e4m3fn";
    j["rows"] = rows;
    j["cols"] = cols;
    j["threads"] = 1;
    j["cpu_target"] = fusednorm_cpu_target();
    j["reference_us"] = sig6(tr.sec * 1e6);
    j["library_us"] = sig6(tl.sec * 1e6);
    j["speedup"] = sig6(ratio);
    j["target_8x_met"] = met;
    j["reference_reps"] = tr.samples;
    j["library_reps"] = tl.samples * tl.inner;
    j["mismatches"] = mism;
    j["status"] = bad ? "error" : "ok";
    write_json_line(stdout, j);
  } else {
    printf("scalar speedup, rmsnorm_quant bf16 -> f8e4m3fn dynamic per-row, %" PRId64 " x %" PRId64 ", 1 thread:\n",
           rows, cols);
    printf("  scalar reference      %12.1f us/call  (%.2f ns/element, %d reps)\n", tr.sec * 1e6,
           tr.sec * 1e9 / double(elems), tr.samples);
    printf("  library (SIMD %-6s) %12.1f us/call  (%.2f ns/element, %ld calls)\n", fusednorm_cpu_target(), tl.sec * 1e6,
           tl.sec * 1e9 / double(elems), long(tl.samples) * tl.inner);
    printf("  speedup               %12.2f x       (target >= 8x: %s)\n", ratio, met ? "met" : "NOT met");
    printf("  mismatching bytes (full tensor, library vs reference): %lld\n", mism);
  }
  if (bad) fprintf(stderr, "fusednorm-bench: a call failed: %s\n", fusednorm_last_error());
  return mism || bad ? 1 : 0;
}

}  // namespace
}  // namespace bench
}  // namespace fusednorm

int main(int argc, char** argv) {
  using namespace fusednorm::bench;
  Options o;
  const int parsed = parse_args(argc, argv, &o);
  if (parsed >= 0) return parsed;
  std::string err;
  const int threads = o.scalar_speedup ? 1 : o.threads > 0 ? o.threads : tbb::info::default_concurrency();
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, size_t(threads));
  tbb::task_arena arena(threads);
  std::unique_ptr<Device> dev = make_device(o.device, threads, &err);
  if (!dev) {
    fprintf(stderr, "fusednorm-bench: %s\n", err.c_str());
    return 2;
  }
  Plot plot;
  if (!o.plot.empty() && !plot.open(o.plot, &err)) {
    fprintf(stderr, "fusednorm-bench: %s\n", err.c_str());
    return 2;
  }
  if (dev->is_host() && o.timing != "auto")
    fprintf(stderr, "fusednorm-bench: note: --timing %s applies to GPU devices; the CPU is timed with the host clock\n",
            o.timing.c_str());
  int rc = 0;
  arena.execute([&] {
    try {
      if (o.scalar_speedup) {
        rc = scalar_speedup(o, *dev);
        return;
      }
      Run run(o, *dev, threads);
      if (o.json) run.json_out.push_back(stdout);
      if (plot.json()) run.json_out.push_back(plot.json());
      const bool host = dev->is_host();
      const size_t cache = dev->cache_bytes();  // CPU: last level; GPU: L2
      run.rotate_bytes = o.rotate_mib > 0 ? size_t(o.rotate_mib * kMiB)
                         : host           ? std::max<size_t>(size_t(96 * kMiB), 3 * cache)
                                          : std::max<size_t>(size_t(256 * kMiB), 4 * cache);
      // GPU: >= 1 GiB (the quick 256 MiB would be timed partly from L2) and more reps (~1 ms each).
      const double copy_mib = host || o.set_copy ? o.copy_mib : std::max(o.copy_mib, 1024.0);
      const size_t copy_bytes =
          size_t(std::min(copy_mib * kMiB, o.budget_gib * kGiB / 4.0)) / 4096 * 4096;
      const int copy_reps = host ? 7 : 25;
      double copy_ms = 0;
      run.copy = copy_gbps(*dev, copy_bytes, copy_reps, &copy_ms);
      FILE* f = o.json ? stderr : stdout;
      fprintf(f, "# fusednorm-bench %s: device %s (%s); seed %" PRIu64 "\n", fusednorm_version(nullptr, nullptr, nullptr),
              dev->label().c_str(), dev->detail().c_str(), o.seed);
      fprintf(f, "# copy bandwidth: %.0f MiB copied in %.2f ms (median of %d): %.2f GB/s (bytes read + written)\n",
              double(copy_bytes) / kMiB, copy_ms, copy_reps, run.copy);
      const std::string reps =
          o.reps ? std::to_string(o.reps) + " reps"
                 : "adaptive reps (>= " + std::to_string(o.min_reps) + ", ~" + std::to_string(o.time_per_case).substr(0, 4) +
                       " s per case)";
      if (host)
        fprintf(f, "# timing: median of reps after warm-up, %s; calls rotate over buffer sets of >= %.0f MiB (LLC %.0f MiB);"
                   " %d rows per case checked against the reference\n",
                reps.c_str(), double(run.rotate_bytes) / kMiB, double(cache) / kMiB, o.check_rows);
      else
        fprintf(f, "# timing: CUDA events, median of reps (>= %.0f ms each) after warm-up, %s; %s; calls rotate over "
                   "buffer sets of >= %.0f MiB (L2 %.0f MiB); %d rows per case checked against the reference\n",
                dev->min_sample_s() * 1e3, reps.c_str(),
                o.timing == "auto"   ? "graph replay (one call per buffer set in a graph) for inputs below 16 MiB, "
                                       "stream launches above"
                : o.timing == "graph" ? "graph replay (one call per buffer set in a graph)"
                                      : "stream launches",
                double(run.rotate_bytes) / kMiB, double(cache) / kMiB, o.check_rows);
      fflush(f);
      rc = run.run_all();
    } catch (const std::exception& e) {
      fprintf(stderr, "fusednorm-bench: %s\n", e.what());
      rc = 1;
    }
  });
  if (!o.plot.empty() && !plot.draw(&err)) {  // drawn also after a failed case: its row says so
    fprintf(stderr, "fusednorm-bench: %s\n", err.c_str());
    rc = rc ? rc : 1;
  }
  return rc;
}
