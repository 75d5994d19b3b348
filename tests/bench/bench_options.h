// fusednorm-bench: command-line options and their parsing (scale modes, dtypes, lists of sizes),
// and the --help text. Included by fusednorm_bench.cc only.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <stdexcept>
#include <array>
#include <string>
#include <vector>

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
  bool json = false, quick = false, scalar_speedup = false, help = false;
  // --ops mla (mla_rope_rmsnorm_quant, bench_mla.h): DeepSeek-V3 shapes.
  std::vector<int64_t> mla_heads{16, 64, 128}, mla_pages{64, 128};
  std::vector<DType> mla_cache{DType::kBF16, DType::k_f8e4m3fn};
  // --tokens where given, else the MLA token counts (--quick: fewer).
  std::vector<int64_t> mla_tokens() const {
    if (set_tokens) return tokens;
    return quick ? std::vector<int64_t>{1, 64, 4096} : std::vector<int64_t>{1, 8, 64, 4096, 16384};
  }
  bool set_modes = false, set_in = false, set_out = false, set_hidden = false, set_tokens = false,
       set_time = false, set_copy = false;
};

inline void usage(FILE* f) {
  fprintf(f,
          "usage: fusednorm-bench [options]\n"
          "\n"
          "Times fusednorm_rmsnorm_quant for every scale mode x input dtype x output dtype x shape, checks\n"
          "each case against the scalar reference (fusednorm::reference) on a sample of rows, and relates\n"
          "its bandwidth to the device's copy bandwidth measured in the same run. Table on stdout,\n"
          "progress and notes on stderr; exit status 1 if any byte mismatched or a call failed.\n"
          "\n"
          "  --ops LIST        operations: rmsnorm_quant (--modes x --out), rmsnorm_fp4 (NVFP4 and\n"
          "                    MXFP4, row-major and swizzled scales), qk_rmsnorm (--qk-shapes),\n"
          "                    mla (mla_rope_rmsnorm_quant: L 512, R 64, bf16 q and kv, q in place,\n"
          "                    tokens 1,8,64,4096,16384 unless --tokens; --quick: 1,64,4096)\n"
          "                                                [rmsnorm_quant,rmsnorm_fp4,qk_rmsnorm]\n"
          "  --qk-shapes LIST  qk_rmsnorm shapes ROWSxNQxNK: stats, apply, fused, stats+apply and\n"
          "                    fused_head128 at each, for every --in dtype\n"
          "                    [16x4096x512,16384x4096x512 and Modular's: 16x1536x256,512x1536x256,\n"
          "                    2048x4096x512,16x1536x257,4x8192x8192,16x512x512]\n"
          "  --mla-heads LIST  mla: q heads Hq                                      [16,64,128]\n"
          "  --mla-pages LIST  mla: cache page sizes                                   [64,128]\n"
          "  --mla-cache LIST  mla: cache dtypes (bf16, f16, f32, FP8)          [bf16,f8e4m3fn]\n"
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

inline bool parse_pos_int(const std::string& s, int64_t* v) {
  char* end = nullptr;
  const long long x = strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || x <= 0) return false;
  *v = x;
  return true;
}

inline bool parse_pos_double(const std::string& s, double* v) {
  char* end = nullptr;
  const double x = strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(x > 0)) return false;
  *v = x;
  return true;
}

inline bool parse_args(int argc, char** argv, Options* o, std::string* err) {
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
        if (op != "rmsnorm_quant" && op != "rmsnorm_fp4" && op != "qk_rmsnorm" && op != "mla") {
          *err = "unknown op '" + op + "' (available: rmsnorm_quant, rmsnorm_fp4, qk_rmsnorm, mla)";
          return false;
        }
      if (o->ops.empty()) { *err = "empty --ops"; return false; }
    } else if (value("--qk-shapes")) {
      o->qk_shapes.clear();
      for (const auto& e : split_list(v)) {
        std::array<int64_t, 3> sh{};
        char* end = nullptr;
        const char* p = e.c_str();
        for (int k = 0; k < 3; ++k) {
          sh[size_t(k)] = strtoll(p, &end, 10);
          if (end == p || sh[size_t(k)] <= 0 || (k < 2 ? *end != 'x' : *end != '\0')) {
            *err = "bad --qk-shapes entry '" + e + "' (ROWSxNQxNK)";
            return false;
          }
          p = end + 1;
        }
        o->qk_shapes.push_back(sh);
      }
      if (o->qk_shapes.empty()) { *err = "empty --qk-shapes"; return false; }
      o->set_qk_shapes = true;
    } else if (value("--mla-heads")) {
      if (!parse_list<int64_t>(v, &o->mla_heads, parse_pos_int, err, "head count")) return false;
    } else if (value("--mla-pages")) {
      if (!parse_list<int64_t>(v, &o->mla_pages, parse_pos_int, err, "page size")) return false;
    } else if (value("--mla-cache")) {
      if (!parse_list<DType>(v, &o->mla_cache, [](const std::string& s, DType* t) {
            return parse_dtype(s, true, t) ? *t != DType::kI8 : parse_dtype(s, false, t);
          }, err, "cache dtype"))
        return false;
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
    if (!o->set_qk_shapes) o->qk_shapes = {{16, 4096, 512}, {2048, 4096, 512}};
  }
  return true;
}

}  // namespace bench
}  // namespace fusednorm
