// fusednorm-bench: times fusednorm_rmsnorm_quant over scale modes, dtypes and LLM shapes, checks
// every case against the scalar reference on a sample of rows, and relates the achieved bandwidth
// to the device's copy bandwidth measured in the same run. `fusednorm-bench --help` for usage.
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/task_arena.h>

#include "bench_device.h"
#include "bench_util.h"
#include "core/dtype.h"
#include "fusednorm/fusednorm.h"
#include "fusednorm/fusednorm.hpp"
#include "reference/reference.h"

namespace fusednorm {
namespace bench {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
// GPU, --timing auto: inputs below this are timed by graph replay (every shape of <= 128 tokens).
constexpr double kGraphBelowBytes = 16.0 * kMiB;

// ---------------------------------------------------------------- options

struct ModeSpec {
  std::string name;
  int32_t scale_mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
  int64_t group = 0;  // DYNAMIC_GROUP only
  bool residual = false;
};

// static | row | group<G> for G of kGroupSizes (core/dtype.h), optionally prefixed by residual_.
bool parse_mode(const std::string& s, ModeSpec* m) {
  m->name = s;
  std::string base = s;
  m->residual = base.rfind("residual_", 0) == 0;
  if (m->residual) base = base.substr(9);
  if (base == "static") { m->scale_mode = FUSEDNORM_SCALE_STATIC; return true; }
  if (base == "row") { m->scale_mode = FUSEDNORM_SCALE_DYNAMIC_ROW; return true; }
  if (base.rfind("group", 0) == 0 && base.size() > 5 && is_group_size(atoll(base.c_str() + 5))) {
    m->scale_mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
    m->group = atoll(base.c_str() + 5);
    return std::to_string(m->group) == base.substr(5);
  }
  return false;
}

// Scales per row written by the mode (static: none, the scale is an input).
int64_t scales_per_row(const ModeSpec& m, int64_t h) {
  if (m.scale_mode == FUSEDNORM_SCALE_STATIC) return 0;
  if (m.scale_mode == FUSEDNORM_SCALE_DYNAMIC_ROW) return 1;
  return h / m.group;
}

bool parse_dtype(std::string s, bool quant, DType* t) {
  if (quant && s.rfind("f8", 0) != 0 && s.rfind("e", 0) == 0) s = "f8" + s;  // e4m3fn -> f8e4m3fn
  if (s == "fp32" || s == "float32") s = "f32";
  if (s == "fp16" || s == "float16") s = "f16";
  if (s == "bfloat16") s = "bf16";
  for (const auto& d : kDTypes)
    if (s == d.name && (quant ? is_quant_dtype(d.type) : is_input_dtype(d.type))) { *t = d.type; return true; }
  return false;
}

struct Options {
  std::vector<std::string> ops{"rmsnorm_quant"};
  std::vector<ModeSpec> modes;
  std::vector<DType> in{DType::kBF16, DType::kF32};
  std::vector<DType> out{DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::kI8};
  std::vector<int64_t> hidden{2048, 4096, 5120, 7168, 8192, 16384};
  std::vector<int64_t> tokens{1, 16, 128, 1024, 4096, 16384};
  std::string device = "cpu";
  std::string timing = "auto";  // GPU: auto | events | graph
  int threads = 0;     // 0: oneTBB's default concurrency
  int reps = 0;        // 0: adaptive
  int min_reps = 3;
  double time_per_case = 0.2;  // seconds of timed calls per case (adaptive reps)
  double budget_gib = 8.0;
  double copy_mib = 1024.0;
  double rotate_mib = 0.0;     // 0: max(96 MiB, 3 x LLC)
  int check_rows = 32;
  uint64_t seed = 20240611;
  bool json = false, quick = false, scalar_speedup = false, help = false;
  bool set_modes = false, set_in = false, set_out = false, set_hidden = false, set_tokens = false,
       set_time = false, set_copy = false;
};

void usage(FILE* f) {
  fprintf(f,
          "usage: fusednorm-bench [options]\n"
          "\n"
          "Times fusednorm_rmsnorm_quant for every scale mode x input dtype x output dtype x shape, checks\n"
          "each case against the scalar reference (fusednorm::reference) on a sample of rows, and relates\n"
          "its bandwidth to the device's copy bandwidth measured in the same run. Table on stdout,\n"
          "progress and notes on stderr; exit status 1 if any byte mismatched or a call failed.\n"
          "\n"
          "  --ops LIST        operations (rmsnorm_quant)                       [rmsnorm_quant]\n"
          "  --modes LIST      static,row,group128,group64,group32,residual_row (any mode may take a\n"
          "                    residual_ prefix)                  [static,row,group128,residual_row]\n"
          "  --in LIST         input (and residual, weight) dtypes: bf16,f32,f16        [bf16,f32]\n"
          "  --out LIST        f8e4m3fn,f8e4m3fnuz,f8e4m3,f8e5m2,f8e5m2fnuz,int8\n"
          "                                                         [f8e4m3fn,f8e4m3fnuz,int8]\n"
          "  --hidden LIST     hidden sizes (columns)         [2048,4096,5120,7168,8192,16384]\n"
          "  --tokens LIST     tokens (rows)                     [1,16,128,1024,4096,16384]\n"
          "  --device DEV      cpu, or cuda:N where built with CUDA (rocm:N: not yet)         [cpu]\n"
          "  --timing T        GPU: events (stream launches between CUDA events), graph (replays of\n"
          "                    a CUDA graph of one call per buffer set), auto (graph when the input\n"
          "                    is below 16 MiB, else events)                                 [auto]\n"
          "  --threads N       oneTBB threads (task_arena + global_control)  [default concurrency]\n"
          "  --reps N          timed samples per case (default: adaptive, >= 3, ~--time s per case)\n"
          "  --time S          seconds of timed calls per case for adaptive reps              [0.2]\n"
          "  --budget-gib G    skip shapes whose buffers exceed G GiB                           [8]\n"
          "  --copy-mib M      copy-bandwidth buffer size (capped at budget/4)               [1024]\n"
          "  --rotate-mib M    buffer sets rotate over >= M MiB  [max(96, 3 x last-level cache);\n"
          "                                                             GPU: max(256, 4 x L2)]\n"
          "  --check-rows N    rows per case checked against the reference (first and last\n"
          "                    included)                                                      [32]\n"
          "  --seed N          random seed for the inputs (printed)\n"
          "  --json            one JSON object per case on stdout instead of the table\n"
          "  --quick           a small subset (hidden 2048,7168; tokens 1,16,1024; out f8e4m3fn,int8;\n"
          "                    0.03 s per case; 256 MiB copy, GPU 1024) for smoke tests; explicit\n"
          "                    options win\n"
          "  --scalar-speedup  single thread: scalar reference vs library on bf16 -> f8e4m3fn dynamic\n"
          "                    per-row at --tokens x --hidden (first values; default 4096 x 8192);\n"
          "                    prints both times and the ratio (target: library >= 8x faster)\n"
          "  --help            this text\n"
          "\n"
          "Timing: warm-up, then the median of the samples; each call takes the next of several buffer\n"
          "sets whose total exceeds the last-level cache, so small shapes are not timed from cache.\n"
          "GPU: samples are timed with CUDA events on the bench's stream (>= 1 ms each); with graph\n"
          "timing one graph holds one call per buffer set (so a replay walks all of them) and a call's\n"
          "time is the replays' time / calls. Table column and JSON key `timing`: events or graph\n"
          "(CPU: clock).\n"
          "GB/s = (input read + residual read and write + weight + output + scales) / time;\n"
          "%%copy = GB/s / copy GB/s x 100, the copy counting bytes read + bytes written.\n");
}

template <class T, class F>
bool parse_list(const std::string& v, std::vector<T>* out, F&& one, std::string* err, const char* what) {
  out->clear();
  for (const auto& s : split_list(v)) {
    T x{};
    if (!one(s, &x)) { *err = std::string("bad ") + what + " '" + s + "'"; return false; }
    out->push_back(x);
  }
  if (out->empty()) { *err = std::string("empty ") + what + " list"; return false; }
  return true;
}

bool parse_pos_int(const std::string& s, int64_t* v) {
  char* end = nullptr;
  const long long x = strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || x <= 0) return false;
  *v = x;
  return true;
}

bool parse_pos_double(const std::string& s, double* v) {
  char* end = nullptr;
  const double x = strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(x > 0)) return false;
  *v = x;
  return true;
}

bool parse_args(int argc, char** argv, Options* o, std::string* err) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], v;
    const size_t eq = a.find('=');
    const bool has_eq = a.rfind("--", 0) == 0 && eq != std::string::npos;
    if (has_eq) { v = a.substr(eq + 1); a = a.substr(0, eq); }
    auto flag = [&](const char* name) {
      if (a != name) return false;
      if (has_eq) throw std::invalid_argument(a + " takes no value");
      return true;
    };
    auto value = [&](const char* name) {
      if (a != name) return false;
      if (!has_eq) {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        v = argv[++i];
      }
      return true;
    };
    int64_t n = 0;
    if (flag("--help") || flag("-h")) o->help = true;
    else if (flag("--json")) o->json = true;
    else if (flag("--quick")) o->quick = true;
    else if (flag("--scalar-speedup")) o->scalar_speedup = true;
    else if (value("--ops")) {
      o->ops = split_list(v);
      for (const auto& op : o->ops)
        if (op != "rmsnorm_quant") { *err = "unknown op '" + op + "' (available: rmsnorm_quant)"; return false; }
      if (o->ops.empty()) { *err = "empty --ops"; return false; }
    } else if (value("--modes")) {
      if (!parse_list<ModeSpec>(v, &o->modes, parse_mode, err, "mode")) return false;
      o->set_modes = true;
    } else if (value("--in")) {
      if (!parse_list<DType>(v, &o->in, [](const std::string& s, DType* t) { return parse_dtype(s, false, t); }, err,
                             "input dtype"))
        return false;
      o->set_in = true;
    } else if (value("--out")) {
      if (!parse_list<DType>(v, &o->out, [](const std::string& s, DType* t) { return parse_dtype(s, true, t); }, err,
                             "output dtype"))
        return false;
      o->set_out = true;
    } else if (value("--hidden")) {
      if (!parse_list<int64_t>(v, &o->hidden, parse_pos_int, err, "hidden size")) return false;
      o->set_hidden = true;
    } else if (value("--tokens")) {
      if (!parse_list<int64_t>(v, &o->tokens, parse_pos_int, err, "token count")) return false;
      o->set_tokens = true;
    } else if (value("--device")) o->device = v;
    else if (value("--timing")) {
      if (v != "auto" && v != "events" && v != "graph") { *err = "bad --timing '" + v + "' (auto, events or graph)"; return false; }
      o->timing = v;
    }
    else if (value("--threads")) {
      if (!parse_pos_int(v, &n)) { *err = "bad --threads '" + v + "'"; return false; }
      o->threads = int(n);
    } else if (value("--reps")) {
      if (!parse_pos_int(v, &n)) { *err = "bad --reps '" + v + "'"; return false; }
      o->reps = int(n);
    } else if (value("--time")) {
      if (!parse_pos_double(v, &o->time_per_case)) { *err = "bad --time '" + v + "'"; return false; }
      o->set_time = true;
    } else if (value("--budget-gib")) {
      if (!parse_pos_double(v, &o->budget_gib)) { *err = "bad --budget-gib '" + v + "'"; return false; }
    } else if (value("--copy-mib")) {
      if (!parse_pos_double(v, &o->copy_mib)) { *err = "bad --copy-mib '" + v + "'"; return false; }
      o->set_copy = true;
    } else if (value("--rotate-mib")) {
      if (!parse_pos_double(v, &o->rotate_mib)) { *err = "bad --rotate-mib '" + v + "'"; return false; }
    } else if (value("--check-rows")) {
      if (!parse_pos_int(v, &n)) { *err = "bad --check-rows '" + v + "'"; return false; }
      o->check_rows = int(std::max<int64_t>(n, 2));
    } else if (value("--seed")) {
      char* end = nullptr;
      o->seed = strtoull(v.c_str(), &end, 0);
      if (end == v.c_str() || *end) { *err = "bad --seed '" + v + "'"; return false; }
    } else {
      *err = "unknown option '" + std::string(argv[i]) + "'";
      return false;
    }
  }
  if (!o->set_modes)
    for (const char* m : {"static", "row", "group128", "residual_row"}) {
      ModeSpec s;
      parse_mode(m, &s);
      o->modes.push_back(s);
    }
  if (o->quick) {
    if (!o->set_hidden) o->hidden = {2048, 7168};
    if (!o->set_tokens) o->tokens = {1, 16, 1024};
    if (!o->set_out) o->out = {DType::k_f8e4m3fn, DType::kI8};
    if (!o->set_time) o->time_per_case = 0.03;
    if (!o->set_copy) o->copy_mib = 256;
  }
  return true;
}

// ---------------------------------------------------------------- tensors

DLTensor tensor(void* data, DLDevice dev, DType t, int ndim, int64_t* shape) {
  DLTensor x{};
  x.data = data;
  x.device = dev;
  x.ndim = ndim;
  x.dtype = dl_from_dtype(t);
  x.shape = shape;
  x.strides = nullptr;
  x.byte_offset = 0;
  return x;
}

// The five tensors of one rmsnorm_quant call over `rows` rows of H, with the shapes they point to
// (hence not copyable). `sc` is the static scale [1] or the scales [rows, ns].
struct CallTensors {
  int64_t shp[2], wshp[1], sshp[2], one[1] = {1};
  DLTensor in, res, w, out, sc;
  CallTensors(DLDevice d, DType in_t, DType out_t, int64_t rows, int64_t h, int64_t ns, bool static_scale, void* x,
              void* r, void* wt, void* q, void* scales)
      : shp{rows, h}, wshp{h}, sshp{rows, ns} {
    in = tensor(x, d, in_t, 2, shp);
    res = tensor(r, d, in_t, 2, shp);
    w = tensor(wt, d, in_t, 1, wshp);
    out = tensor(q, d, out_t, 2, shp);
    sc = static_scale ? tensor(scales, d, DType::kF32, 1, one) : tensor(scales, d, DType::kF32, 2, sshp);
  }
  CallTensors(const CallTensors&) = delete;
  CallTensors& operator=(const CallTensors&) = delete;
};

size_t round64(size_t b) { return (b + 63) / 64 * 64; }
int elem_bytes(DType t) { return dtype_bits(t) / 8; }

// The largest finite value of an output format (for a sensible static scale).
float format_max(DType t) {
  switch (t) {
#define FN_MINIFLOAT(name, dl, e, m, bias, max_code, ...) \
  case DType::k_##name: return decode(t, max_code);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    default: return 127.0f;  // int8
  }
}

// ---------------------------------------------------------------- timing

struct Timing {
  double sec = 0;     // median seconds per call
  double min_sec = 0; // fastest sample, seconds per call
  int samples = 0;    // timed samples
  long inner = 0;     // calls per sample
};

// call() runs one call (on the next buffer set). Warm-up, then samples of `inner` calls each
// (inner >= 1, so that a sample lasts >= dev.min_sample_s() and the timer is negligible); median
// per call. Samples are timed by the device (host clock on the CPU, events on a GPU).
// prior_s: seconds of a call just made on the same buffers (0: none); a long one (>= 50 ms) is
// warm-up enough.
template <class Call>
Timing time_calls(Device& dev, Call&& call, double target_s, int fixed_reps, int min_reps, double prior_s = 0) {
  Timing t;
  double est = prior_s;
  if (prior_s < 0.05) {
    const double warm_s = std::max(0.005, 0.1 * target_s);
    const double t0 = now_s();
    double el = 0, timed = 0;
    long n = 0;
    do {
      dev.start_timer();
      call();
      timed += dev.stop_timer();
      ++n;
      el = now_s() - t0;
    } while (el < warm_s || (n < 2 && el < 0.05));
    est = std::max(1e-8, timed / double(n));
  }
  t.inner = std::max(1L, long(std::ceil(dev.min_sample_s() / est)));
  if (fixed_reps > 0) t.samples = fixed_reps;
  else t.samples = int(std::min(5000.0, std::max(double(min_reps), std::round(target_s / (double(t.inner) * est)))));
  // GPU, several calls a sample: one untimed call first, so the stream is busy when the start
  // event is recorded and the first timed call already waits behind it (else the sample would
  // time the host's launch latency of that call too).
  const bool lead_in = !dev.is_host() && t.inner > 1;
  std::vector<double> s(size_t(t.samples));
  for (int i = 0; i < t.samples; ++i) {
    if (lead_in) call();
    dev.start_timer();
    for (long k = 0; k < t.inner; ++k) call();
    s[size_t(i)] = dev.stop_timer() / double(t.inner);
  }
  t.sec = median(s);
  t.min_sec = *std::min_element(s.begin(), s.end());
  return t;
}

// GPU, small shapes: a stream launch costs as much as the kernel, so time replays of a graph
// holding `k` consecutive calls (each call takes the next buffer set: with k = the number of sets
// one replay walks all of them, so the cache holds none from the replay before) and divide by k.
// false and *error when the device cannot capture the calls.
template <class Call>
bool time_graph(Device& dev, Call&& call, size_t k, double target_s, int fixed_reps, int min_reps, Timing* t,
                std::string* error) {
  std::unique_ptr<Replay> graph = dev.capture(
      [&] {
        for (size_t i = 0; i < k; ++i) call();
      },
      error);
  if (!graph) return false;
  *t = time_calls(dev, [&] { graph->launch(); }, target_s, fixed_reps, min_reps);
  t->sec /= double(k);
  t->min_sec /= double(k);
  t->inner *= long(k);  // calls per sample
  return true;
}

// Copy bandwidth: warm-up, then the median of reps; bytes read + bytes written per second.
double copy_gbps(Device& dev, size_t bytes, int reps, double* ms) {
  Buffer src(dev, bytes), dst(dev, bytes);
  dev.fill_bytes(src.data(), 0x5A, bytes);
  dev.fill_bytes(dst.data(), 0, bytes);
  dev.copy(dst.data(), src.data(), bytes);
  dev.synchronize();
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    if (!dev.is_host()) dev.copy(dst.data(), src.data(), bytes);  // lead-in, as in time_calls
    dev.start_timer();
    dev.copy(dst.data(), src.data(), bytes);
    s.push_back(dev.stop_timer());
  }
  const double m = median(s);
  *ms = m * 1e3;
  return 2.0 * double(bytes) / m / 1e9;
}

// ---------------------------------------------------------------- rmsnorm_quant cases

struct Run {
  const Options& o;
  Device& dev;
  int threads;
  std::string target;
  double copy = 0;
  size_t rotate_bytes = 0;
  RandomPool x_pool, w_pool;
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
      dev.synchronize();
      const double t0 = now_s();
      const fusednorm_status st =
          fusednorm_rmsnorm_quant(&x.in, m.residual ? &x.res : nullptr, &x.w, &x.out, &x.sc, &opt, dev.stream());
      dev.synchronize();
      res.check_call_s = now_s() - t0;
      if (st != FUSEDNORM_SUCCESS) {
        res.ok = false;
        res.error = std::string(fusednorm_status_string(st)) + ": " + fusednorm_last_error();
        return res;
      }
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
    if (dev.is_host()) {
      res.timing = time_calls(dev, call, o.time_per_case, o.reps, o.min_reps, res.check_call_s);
    } else {
      // GPU: graph replay for small inputs (or as asked), else stream launches; both between
      // events. The check's call is no timing hint here (it may have loaded the kernel).
      const bool small = double(g.rows) * double(h) * elem_bytes(g.in) < kGraphBelowBytes;
      std::string why;
      if (o.timing == "graph" || (o.timing == "auto" && small)) {
        if (time_graph(dev, call, g.sets, o.time_per_case, o.reps, o.min_reps, &res.timing, &why)) res.method = "graph";
        else if (noted.insert("graph").second)
          fprintf(stderr, "note: graph timing failed (%s); timing stream launches with events instead\n", why.c_str());
      }
      if (strcmp(res.method, "graph") != 0) {
        res.timing = time_calls(dev, call, o.time_per_case, o.reps, o.min_reps);
        res.method = "events";
      }
    }
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

  void print_result(const Group& g, const ModeSpec& m, DType out, const Result& r) {
    const double us = r.timing.sec * 1e6, gbps = r.timing.sec > 0 ? r.bytes / r.timing.sec / 1e9 : 0,
                 pct = copy > 0 ? gbps / copy * 100.0 : 0;
    if (o.json) {
      JsonLine j;
      j.str("op", "rmsnorm_quant").str("mode", m.name).str("device", dev.label()).str("in_dtype", dtype_name(g.in))
          .str("out_dtype", dtype_name(out)).integer("rows", g.rows).integer("cols", g.cols)
          .integer("group_size", m.scale_mode == FUSEDNORM_SCALE_DYNAMIC_GROUP ? m.group
                                 : m.scale_mode == FUSEDNORM_SCALE_DYNAMIC_ROW ? g.cols : 0)
          .boolean("residual", m.residual).str("status", r.ok ? "ok" : "error");
      if (!r.ok) j.str("error", r.error);
      j.num("us", us).num("us_min", r.timing.min_sec * 1e6).num("gbps", gbps).num("copy_gbps", copy).num("pct_of_copy", pct)
          .integer("mismatches", r.mismatches).integer("checked_rows", r.checked).num("bytes", r.bytes)
          .integer("sets", (long long)g.sets).integer("reps", r.timing.samples).str("timing", r.method)
          .integer("calls_per_rep", r.timing.inner).integer("threads", threads).str("cpu_target", target)
          .integer("seed", (long long)o.seed);
      printf("%s\n", j.done().c_str());
    } else if (!r.ok) {
      printf("%-13s %-14s %-5s %-11s %6" PRId64 " %6" PRId64 " %5zu  ERROR: %s\n", "rmsnorm_quant", m.name.c_str(),
             dtype_name(g.in), dtype_name(out), g.rows, g.cols, g.sets, r.error.c_str());
    } else {
      printf("%-13s %-14s %-5s %-11s %6" PRId64 " %6" PRId64 " %5zu %6d", "rmsnorm_quant", m.name.c_str(),
             dtype_name(g.in), dtype_name(out), g.rows, g.cols, g.sets, r.timing.samples);
      if (!dev.is_host()) printf(" %-6s", r.method);
      printf(" %11.2f %8.2f %6.1f %10lld\n", us, gbps, pct, r.mismatches);
    }
    fflush(stdout);
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
        if (!r.ok) ++failures;
        total_mismatches += r.mismatches;
        ++cases_done;
        print_result(g, *m, out, r);
      }
  }

  int run_all() {
    t_start = now_s();
    cases_total = int(o.hidden.size() * o.tokens.size() * o.in.size() * o.modes.size() * o.out.size());
    print_header();
    for (const auto& op : o.ops) {
      (void)op;  // rmsnorm_quant is the only op so far
      for (int64_t h : o.hidden)
        for (int64_t t : o.tokens)
          for (DType in : o.in) run_group(t, h, in);
    }
    const double el = now_s() - t_start;
    FILE* f = o.json ? stderr : stdout;
    fprintf(f, "# %d cases (%d skipped) in %.1f s; %d failed; %lld mismatching bytes in the checked rows: %s\n",
            cases_total, skipped, el, failures, total_mismatches, total_mismatches || failures ? "FAIL" : "OK");
    fflush(f);
    return total_mismatches || failures ? 1 : 0;
  }
};

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
    JsonLine j;
    j.str("op", "rmsnorm_quant").str("mode", "row").str("device", dev.name()).str("in_dtype", "bf16")
        .str("out_dtype", "f8e4m3fn").integer("rows", rows).integer("cols", cols).integer("threads", 1)
        .str("cpu_target", fusednorm_cpu_target()).num("reference_us", tr.sec * 1e6).num("library_us", tl.sec * 1e6)
        .num("speedup", ratio).boolean("target_8x_met", met).integer("reference_reps", tr.samples)
        .integer("library_reps", tl.samples * tl.inner).integer("mismatches", mism).str("status", bad ? "error" : "ok");
    printf("%s\n", j.done().c_str());
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
  std::string err;
  try {
    if (!parse_args(argc, argv, &o, &err)) {
      fprintf(stderr, "fusednorm-bench: %s (try --help)\n", err.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "fusednorm-bench: %s (try --help)\n", e.what());
    return 2;
  }
  if (o.help) {
    usage(stdout);
    return 0;
  }
  const int threads = o.scalar_speedup ? 1 : o.threads > 0 ? o.threads : tbb::info::default_concurrency();
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, size_t(threads));
  tbb::task_arena arena(threads);
  std::unique_ptr<Device> dev = make_device(o.device, threads, &err);
  if (!dev) {
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
  return rc;
}
