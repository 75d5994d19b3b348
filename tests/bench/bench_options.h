// fusednorm-bench: command-line options and the parsing of their values (scale modes, dtypes,
// lists of sizes). CLI11 reads the command line and writes --help from the texts below; each
// option's value goes through a parser of this file, so values mean what they always meant (base-10
// counts, comma lists, the dtype aliases). Included by fusednorm_bench.cc only.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "core/dtype.h"
#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace bench {

struct ModeSpec {
  std::string name;
  int32_t scale_mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
  int64_t group = 0;  // DYNAMIC_GROUP only
  bool residual = false;
};

// static | row | group<G> for G of kGroupSizes (core/dtype.h), optionally prefixed by residual_.
inline bool parse_mode(const std::string& s, ModeSpec* m) {
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
inline int64_t scales_per_row(const ModeSpec& m, int64_t h) {
  if (m.scale_mode == FUSEDNORM_SCALE_STATIC) return 0;
  if (m.scale_mode == FUSEDNORM_SCALE_DYNAMIC_ROW) return 1;
  return h / m.group;
}

inline bool parse_dtype(std::string s, bool quant, DType* t) {
  if (quant && s.rfind("f8", 0) != 0 && s.rfind("e", 0) == 0) s = "f8" + s;  // e4m3fn -> f8e4m3fn
  if (s == "fp32" || s == "float32") s = "f32";
  if (s == "fp16" || s == "float16") s = "f16";
  if (s == "bfloat16") s = "bf16";
  for (const auto& d : kDTypes)
    if (s == d.name && (quant ? is_quant_dtype(d.type) : is_input_dtype(d.type))) { *t = d.type; return true; }
  return false;
}

struct Options {
  std::vector<std::string> ops{"rmsnorm_quant", "rmsnorm_fp4", "qk_rmsnorm"};
  // qk_rmsnorm: (rows, Nq, Nk) shapes: 16 and 16384 tokens of q 4096 + k 512 (32 + 4 heads of
  // 128), and Modular's qk_rms_norm test shapes.
  std::vector<std::array<int64_t, 3>> qk_shapes{{16, 4096, 512},  {16384, 4096, 512}, {16, 1536, 256},
                                                {512, 1536, 256}, {2048, 4096, 512},  {16, 1536, 257},
                                                {4, 8192, 8192},  {16, 512, 512}};
  bool set_qk_shapes = false;
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
  bool json = false, quick = false, scalar_speedup = false;
  std::string plot;  // --plot FILE: the cases' JSON drawn by python/fusednorm/plot.py (bench_plot.h)
  // --ops mla (mla_rope_rmsnorm_quant, bench_mla.h): DeepSeek-V3 shapes.
  std::vector<int64_t> mla_heads{16, 64, 128}, mla_pages{64, 128};
  std::vector<DType> mla_cache{DType::kBF16, DType::k_f8e4m3fn};
  // q as the last R = 64 of each head's row of a q projection [T, Hq, nope + 64] (0: compact q).
  std::vector<int64_t> mla_q_nope{0};
  // --tokens where given, else the MLA token counts (--quick: fewer).
  std::vector<int64_t> mla_tokens() const {
    if (set_tokens) return tokens;
    return quick ? std::vector<int64_t>{1, 64, 4096} : std::vector<int64_t>{1, 8, 64, 4096, 16384};
  }
  bool set_modes = false, set_in = false, set_out = false, set_hidden = false, set_tokens = false,
       set_time = false, set_copy = false;
};


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

inline bool parse_pos_int(const std::string& s, int64_t* v) {
  char* end = nullptr;
  const long long x = strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || x <= 0) return false;
  *v = x;
  return true;
}

inline bool parse_nonneg_int(const std::string& s, int64_t* v) {
  if (s == "0") {
    *v = 0;
    return true;
  }
  return parse_pos_int(s, v);
}

inline bool parse_pos_double(const std::string& s, double* v) {
  char* end = nullptr;
  const double x = strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(x > 0)) return false;
  *v = x;
  return true;
}

// An option's text into its field(s): false, with *err saying why, for a bad value.
using ValueParser = std::function<bool(const std::string&, std::string*)>;

// A comma-separated list; `hint` (what a good entry looks like) ends the message of a bad one.
template <class T, class One>
ValueParser list_into(std::vector<T>* field, One one, const char* what, const char* hint = "") {
  return [=](const std::string& v, std::string* err) {
    if (parse_list<T>(v, field, one, err, what)) return true;
    *err += hint;
    return false;
  };
}

inline ValueParser positive_int_into(int* field) {
  return [field](const std::string& v, std::string* err) {
    int64_t n = 0;
    if (!parse_pos_int(v, &n) || n > INT32_MAX) {
      *err = "bad value '" + v + "' (a positive integer)";
      return false;
    }
    *field = int(n);
    return true;
  };
}

inline ValueParser positive_double_into(double* field) {
  return [field](const std::string& v, std::string* err) {
    if (parse_pos_double(v, field)) return true;
    *err = "bad value '" + v + "' (a positive number)";
    return false;
  };
}

// One option that takes a value (--name V or --name=V).
inline CLI::Option* value_option(CLI::App& app, const std::string& name, const std::string& type, ValueParser parse,
                                 const std::string& help) {
  return app
      .add_option_function<std::string>(
          name,
          [name, parse](const std::string& v) {
            std::string err;
            if (!parse(v, &err)) throw CLI::ValidationError(name, err);
          },
          help)
      ->type_name(type);
}

inline bool parse_op(const std::string& s, std::string* op) {
  *op = s;
  return s == "rmsnorm_quant" || s == "rmsnorm_fp4" || s == "qk_rmsnorm" || s == "mla";
}

// ROWSxNQxNK, each positive.
inline bool parse_qk_shape(const std::string& e, std::array<int64_t, 3>* sh) {
  const char* p = e.c_str();
  for (size_t k = 0; k < 3; ++k) {
    char* end = nullptr;
    (*sh)[k] = strtoll(p, &end, 10);
    if (end == p || (*sh)[k] <= 0 || (k < 2 ? *end != 'x' : *end != '\0')) return false;
    p = end + 1;
  }
  return true;
}

constexpr const char* kAbout =
    "Times fusednorm's operations (--ops) for every scale mode x input dtype x output dtype x shape,\n"
    "checks each case against the scalar reference (fusednorm::reference) on a sample of rows, and\n"
    "relates its bandwidth to the device's copy bandwidth measured in the same run. Table (or --json\n"
    "lines) on stdout, progress and notes on stderr; exit status 1 if any byte mismatched or a call\n"
    "failed, 2 for a bad option.\n";

constexpr const char* kTimingNotes =
    "Timing: warm-up, then the median of the samples; each call takes the next of several buffer\n"
    "sets whose total exceeds the last-level cache, so small shapes are not timed from cache.\n"
    "GPU: samples are timed with CUDA events on the bench's stream (>= 1 ms each); with graph\n"
    "timing one graph holds one call per buffer set (so a replay walks all of them) and a call's\n"
    "time is the replays' time / calls. Table column and JSON key `timing`: events or graph\n"
    "(CPU: clock).\n"
    "GB/s = (input read + residual read and write + weight + output + scales) / time;\n"
    "%copy = GB/s / copy GB/s x 100, the copy counting bytes read + bytes written.\n"
    "JSON: one object a case, keys op, mode, device, in_dtype, out_dtype, rows, cols, the op's own\n"
    "(group_size, nq, nk, heads, ...), status, us, gbps, copy_gbps, pct_of_copy, mismatches, then\n"
    "the run's details (reps, timing, threads, cpu_target, seed).";

// Parses the command line into *o. Returns -1 to go on, else the exit status: 0 after --help (the
// help on stdout), 2 after a bad option (the reason on stderr).
inline int parse_args(int argc, char** argv, Options* o) {
  CLI::App app{kAbout, "fusednorm-bench"};
  app.footer(kTimingNotes);
  app.get_formatter()->column_width(20);
  // A flag takes no value (--json=1 is an error); where an option is repeated the last one counts,
  // so a script's later options override its earlier ones.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->disable_flag_override();

  app.option_defaults()->group("What to run");
  value_option(app, "--ops", "LIST", list_into<std::string>(&o->ops, parse_op, "op", " (available: rmsnorm_quant, rmsnorm_fp4, qk_rmsnorm, mla)"),
               "operations: rmsnorm_quant (--modes x --out), rmsnorm_fp4 (NVFP4 and\n"
               "MXFP4, row-major and swizzled scales), qk_rmsnorm (--qk-shapes),\n"
               "mla (mla_rope_rmsnorm_quant: L 512, R 64, bf16 q and kv, q in place,\n"
               "tokens 1,8,64,4096,16384 unless --tokens; --quick: 1,64,4096)\n"
               "[rmsnorm_quant,rmsnorm_fp4,qk_rmsnorm]");
  value_option(app, "--qk-shapes", "LIST", list_into<std::array<int64_t, 3>>(&o->qk_shapes, parse_qk_shape, "entry", " (ROWSxNQxNK)"),
               "qk_rmsnorm shapes ROWSxNQxNK: stats, apply, fused, stats+apply,\n"
               "fused_head128, fused_e4m3fn and fused_e4m3fnuz (FP8 outputs with static\n"
               "scales) at each, for every --in dtype\n"
               "[16x4096x512,16384x4096x512 and Modular's: 16x1536x256,512x1536x256,\n"
               "2048x4096x512,16x1536x257,4x8192x8192,16x512x512]");
  value_option(app, "--mla-heads", "LIST", list_into<int64_t>(&o->mla_heads, parse_pos_int, "head count"),
               "mla: q heads Hq [16,64,128]");
  value_option(app, "--mla-pages", "LIST", list_into<int64_t>(&o->mla_pages, parse_pos_int, "page size"),
               "mla: cache page sizes [64,128]");
  value_option(app, "--mla-cache", "LIST",
               list_into<DType>(&o->mla_cache, [](const std::string& s, DType* t) {
                 return parse_dtype(s, true, t) ? *t != DType::kI8 : parse_dtype(s, false, t);
               }, "cache dtype"),
               "mla: cache dtypes (bf16, f16, f32, FP8) [bf16,f8e4m3fn]");
  value_option(app, "--mla-q-nope", "LIST", list_into<int64_t>(&o->mla_q_nope, parse_nonneg_int, "q nope width"),
               "mla: q is the rope part of a q projection [T, Hq, N + 64] (DeepSeek-V3: N\n"
               "128), a strided view; 0: q is [T, Hq, 64] alone [0]");
  value_option(app, "--modes", "LIST", list_into<ModeSpec>(&o->modes, parse_mode, "mode"),
               "static,row,group128,group64,group32,residual_row (any mode may take a\n"
               "residual_ prefix) [static,row,group128,residual_row]");
  value_option(app, "--in", "LIST",
               list_into<DType>(&o->in, [](const std::string& s, DType* t) { return parse_dtype(s, false, t); },
                                "input dtype"),
               "input (and residual, weight) dtypes: bf16,f32,f16 [bf16,f32]");
  value_option(app, "--out", "LIST",
               list_into<DType>(&o->out, [](const std::string& s, DType* t) { return parse_dtype(s, true, t); },
                                "output dtype"),
               "f8e4m3fn,f8e4m3fnuz,f8e4m3,f8e5m2,f8e5m2fnuz,int8\n[f8e4m3fn,f8e4m3fnuz,int8]");
  value_option(app, "--hidden", "LIST", list_into<int64_t>(&o->hidden, parse_pos_int, "hidden size"),
               "hidden sizes (columns) [2048,4096,5120,7168,8192,16384]");
  value_option(app, "--tokens", "LIST", list_into<int64_t>(&o->tokens, parse_pos_int, "token count"),
               "tokens (rows) [1,16,128,1024,4096,16384]");
  app.add_flag("--quick", o->quick,
               "a small subset (hidden 2048,7168; tokens 1,16,1024; out f8e4m3fn,int8;\n"
               "0.03 s per case; 256 MiB copy, GPU 1024) for smoke tests; explicit\n"
               "options win");
  app.add_flag("--scalar-speedup", o->scalar_speedup,
               "single thread: scalar reference vs library on bf16 -> f8e4m3fn dynamic\n"
               "per-row at --tokens x --hidden (first values; default 4096 x 8192);\n"
               "prints both times and the ratio (target: library >= 8x faster)");

  app.option_defaults()->group("Device and timing");
  app.add_option("--device", o->device, "cpu, or cuda:N where built with CUDA (rocm:N: not yet) [cpu]")
      ->type_name("DEV");
  value_option(app, "--timing", "T",
               [o](const std::string& v, std::string* err) {
                 o->timing = v;
                 if (v == "auto" || v == "events" || v == "graph") return true;
                 *err = "bad value '" + v + "' (auto, events or graph)";
                 return false;
               },
               "GPU: events (stream launches between CUDA events), graph (replays of\n"
               "a CUDA graph of one call per buffer set), auto (graph when the input\n"
               "is below 16 MiB, else events) [auto]");
  value_option(app, "--threads", "N", positive_int_into(&o->threads),
               "oneTBB threads (task_arena + global_control) [default concurrency]");
  value_option(app, "--reps", "N", positive_int_into(&o->reps),
               "timed samples per case (default: adaptive, >= 3, ~--time s per case)");
  value_option(app, "--time", "S", positive_double_into(&o->time_per_case),
               "seconds of timed calls per case for adaptive reps [0.2]");
  value_option(app, "--budget-gib", "G", positive_double_into(&o->budget_gib),
               "skip shapes whose buffers exceed G GiB [8]");
  value_option(app, "--copy-mib", "M", positive_double_into(&o->copy_mib),
               "copy-bandwidth buffer size (capped at budget/4) [1024]");
  value_option(app, "--rotate-mib", "M", positive_double_into(&o->rotate_mib),
               "buffer sets rotate over >= M MiB [max(96, 3 x last-level cache);\n"
               "GPU: max(256, 4 x L2)]");
  value_option(app, "--check-rows", "N", positive_int_into(&o->check_rows),
               "rows per case checked against the reference (first and last\n"
               "included; at least 2) [32]");
  value_option(app, "--seed", "N",
               [o](const std::string& v, std::string* err) {
                 char* end = nullptr;
                 o->seed = strtoull(v.c_str(), &end, 0);
                 if (end != v.c_str() && *end == '\0') return true;
                 *err = "bad value '" + v + "' (an integer; 0x for hex)";
                 return false;
               },
               "random seed for the inputs (printed) [20240611]");

  app.option_defaults()->group("Output");
  app.add_flag("--json", o->json, "one JSON object per case on stdout instead of the table (keys below)");
  app.add_option("--plot", o->plot,
                 "also draw % of copy by shape and mode, one panel per operation, into\n"
                 "FILE (.png, .svg or .pdf): the cases' JSON goes to a temporary file\n"
                 "that python3 python/fusednorm/plot.py (matplotlib) draws at the end")
      ->type_name("FILE");
  app.set_help_flag("-h,--help", "this text");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);  // the help on stdout, 0
  } catch (const CLI::ParseError& e) {
    fprintf(stderr, "fusednorm-bench: %s (try --help)\n", e.what());
    return 2;
  }
  if (!o->plot.empty() && o->scalar_speedup) {
    fprintf(stderr, "fusednorm-bench: --plot draws the cases of a run, --scalar-speedup has none (try --help)\n");
    return 2;
  }
  o->set_qk_shapes = app.count("--qk-shapes") > 0;
  o->set_modes = app.count("--modes") > 0;
  o->set_in = app.count("--in") > 0;
  o->set_out = app.count("--out") > 0;
  o->set_hidden = app.count("--hidden") > 0;
  o->set_tokens = app.count("--tokens") > 0;
  o->set_time = app.count("--time") > 0;
  o->set_copy = app.count("--copy-mib") > 0;
  o->check_rows = std::max(o->check_rows, 2);
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
    if (!o->set_qk_shapes) o->qk_shapes = {{16, 4096, 512}, {2048, 4096, 512}};
  }
  return -1;
}

}  // namespace bench
}  // namespace fusednorm
