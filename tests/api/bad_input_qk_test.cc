// Bad input, qk_rmsnorm (stats, apply, fused). Each row breaks one thing of a valid call (Qk
// below: bf16 q [4, 256], k [4, 128], f32 stats [4, 2], bf16 weights and outputs) and is checked
// by the harness of tests/common/bad_call.h: status, message fragments, nothing written, the
// reference rejecting identically, in a forked child. Positive controls: valid calls, in place
// and per head, equal the reference.
#include <catch2/catch.hpp>

#include "api/bad_input_calls.h"
#include "core/call.h"

namespace fusednorm {
namespace test {
namespace {

using namespace mut;  // NOLINT: the tables read as field = value

enum { kQ, kK, kStats, kQw, kKw, kQo, kKo, kOsc };

class Qk : public Args {
 public:
  explicit Qk(QkKind kind = QkKind::kApply)
      : Args({"q", "k", "stats", "q_weight", "k_weight", "q_out", "k_out", "out_scales"}), kind(kind) {
    fusednorm_qk_rmsnorm_options_init(&opts);
    opts.q_global_width = 512;
    opts.k_global_width = 128;
    make(kQ, DType::kBF16, {4, 256});
    make(kK, DType::kBF16, {4, 128});
    make(kStats, DType::kF32, {4, 2});
    for (int64_t r = 0; r < 4; ++r) {
      tensor(kStats).set(r, 0, 900.0f + float(r));
      tensor(kStats).set(r, 1, 300.0f);
    }
    make(kQw, DType::kBF16, {256});
    make(kKw, DType::kF32, {128});
    make(kQo, DType::kBF16, {4, 256});
    make(kKo, DType::kBF16, {4, 128});
    make(kOsc, DType::kF32, {2});
    set_null(kOsc);
    if (kind == QkKind::kStats)
      for (int s : {kQw, kKw, kQo, kKo}) set_null(s);
    if (kind == QkKind::kFused) set_null(kStats);
  }
  // Per-head fused call: head_dim 64, weights [64].
  void use_heads(int64_t d = 64) {
    kind = QkKind::kFused;
    opts.head_dim = d;
    set_null(kStats);
    make(kQw, DType::kBF16, {d});
    make(kKw, DType::kBF16, {d});
  }
  const fusednorm_qk_rmsnorm_options* options() { return null_opts ? nullptr : &opts; }
  fusednorm_status call() override {
    switch (kind) {
      case QkKind::kStats: return fusednorm_qk_rmsnorm_stats(ptr(kQ), ptr(kK), ptr(kStats), options(), nullptr);
      case QkKind::kApply:
        return fusednorm_qk_rmsnorm_apply(ptr(kQ), ptr(kK), ptr(kStats), ptr(kQw), ptr(kKw), ptr(kQo), ptr(kKo),
                                          ptr(kOsc), options(), nullptr);
      default:
        return fusednorm_qk_rmsnorm(ptr(kQ), ptr(kK), ptr(kQw), ptr(kKw), ptr(kQo), ptr(kKo), ptr(kOsc), options(),
                                    nullptr);
    }
  }
  fusednorm_status call_reference() override {
    switch (kind) {
      case QkKind::kStats: return reference::qk_rmsnorm_stats(ptr(kQ), ptr(kK), ptr(kStats), options());
      case QkKind::kApply:
        return reference::qk_rmsnorm_apply(ptr(kQ), ptr(kK), ptr(kStats), ptr(kQw), ptr(kKw), ptr(kQo), ptr(kKo),
                                           ptr(kOsc), options());
      default:
        return reference::qk_rmsnorm(ptr(kQ), ptr(kK), ptr(kQw), ptr(kKw), ptr(kQo), ptr(kKo), ptr(kOsc), options());
    }
  }
  QkKind kind;
  fusednorm_qk_rmsnorm_options opts;
  bool null_opts = false;
};

std::function<void(Qk&)> opt(std::function<void(fusednorm_qk_rmsnorm_options&)> f) {
  return [=](Qk& c) { f(c.opts); };
}
std::function<void(Qk&)> kind(QkKind k, std::function<void(Qk&)> then = [](Qk&) {}) {
  return [=](Qk& c) {
    c.kind = k;
    if (k == QkKind::kStats)
      for (int s : {kQw, kKw, kQo, kKo}) c.set_null(s);
    if (k == QkKind::kFused) c.set_null(kStats);
    then(c);
  };
}
// FP8 outputs of this format for both sides, with their scales [2] f32 (0.02, 0.05).
std::function<void(Qk&)> fp8(DType t, std::function<void(Qk&)> then = [](Qk&) {}) {
  return [=](Qk& c) {
    c.make(kQo, t, c.tensor(kQ).shape());
    c.make(kKo, t, c.tensor(kK).shape());
    c.make(kOsc, DType::kF32, {2});
    c.tensor(kOsc).set(0, 0, 0.02f);
    c.tensor(kOsc).set(0, 1, 0.05f);
    then(c);
  };
}

// The output is the input's view one element later (overlapping, not the same view).
std::function<void(Qk&)> shifted_out(int out, int in) {
  return [=](Qk& c) {
    c.dl(out) = c.dl(in);
    c.dl(out).byte_offset += 2;
  };
}

}  // namespace

TEST_CASE("qk_rmsnorm: widths, weights and statistics that do not match", "[bad_input][qk_rmsnorm]") {
  const BadTable<Qk> table = {
      {"q_weight of k's width", remake(kQw, DType::kBF16, {128}), kInvalid,
       {"q_weight has shape [128]", "must be [256]"}},
      {"k_weight 2-D", remake(kKw, DType::kF32, {1, 128}), kInvalid, {"k_weight has shape [1, 128]"}},
      {"stats [4, 1]", remake(kStats, DType::kF32, {4, 1}), kInvalid, {"stats has shape [4, 1]", "must end in 2"}},
      {"stats [5, 2]", remake(kStats, DType::kF32, {5, 2}), kInvalid, {"stats has shape [5, 2]", "q has shape [4, 256]"}},
      {"stats [8]", remake(kStats, DType::kF32, {8}), kInvalid, {"stats has shape [8]", "ranks differ"}},
      {"stats bf16", remake(kStats, DType::kBF16, {4, 2}), kUnsupported, {"stats.dtype = bf16", "f32"}},
      {"stats NULL", null(kStats), kInvalid, {"stats is NULL"}},
      {"stats NULL (stats call)", kind(QkKind::kStats, null(kStats)), kInvalid, {"stats is NULL"}},
      {"stats [4, 3] (stats call)", kind(QkKind::kStats, remake(kStats, DType::kF32, {4, 3})), kInvalid,
       {"stats has shape [4, 3]"}},
      {"k rows differ", remake(kK, DType::kBF16, {3, 128}), kInvalid, {"k has shape [3, 128]", "q has shape [4, 256]"}},
      {"k dtype f32", remake(kK, DType::kF32, {4, 128}), kInvalid, {"k.dtype = f32", "q.dtype = bf16"}},
      {"q width 0", all<Qk>({remake(kQ, DType::kBF16, {4, 0}), remake(kQo, DType::kBF16, {4, 0})}), kInvalid,
       {"q.shape[1] = 0"}},
      {"q_out width", remake(kQo, DType::kBF16, {4, 255}), kInvalid, {"q_out has shape [4, 255]", "q has shape [4, 256]"}},
      {"k_out dtype f32", remake(kKo, DType::kF32, {4, 128}), kUnsupported, {"k_out.dtype = f32", "f8e4m3fn"}},
      {"q_out NULL", null(kQo), kInvalid, {"q_out is NULL"}},
      {"k_weight NULL", null(kKw), kInvalid, {"k_weight is NULL"}},
      {"q f64", dtype(kQ, DLDataType{kDLFloat, 64, 1}), kUnsupported, {"q.dtype", "bits 64"}},
      {"q int8", remake(kQ, DType::kI8, {4, 256}), kUnsupported, {"q.dtype = int8"}},
      {"k on cuda", device(kK, kDLCUDA, 0), kInvalid, {"k is on cuda:0", "q is on cpu:0"}},
      {"q last stride 2", strides(kQ, {256, 2}), kUnsupported, {"q.strides[1] = 2"}},
      {"huge rows", all<Qk>({shape(kQ, {kHuge, 256}), shape(kK, {kHuge, 128})}), kInvalid, {"q", "64 bits"}},
  };
  run_bad_cases(table);
}

TEST_CASE("qk_rmsnorm: global widths, head_dim and options", "[bad_input][qk_rmsnorm]") {
  const BadTable<Qk> table = {
      {"q_global_width 0", opt([](auto& o) { o.q_global_width = 0; }), kInvalid,
       {"options->q_global_width = 0", "over all ranks"}},
      {"k_global_width 0", opt([](auto& o) { o.k_global_width = 0; }), kInvalid, {"options->k_global_width = 0"}},
      {"k_global_width negative", opt([](auto& o) { o.k_global_width = -128; }), kInvalid,
       {"options->k_global_width = -128"}},
      {"q_global_width below local", opt([](auto& o) { o.q_global_width = 255; }), kInvalid,
       {"options->q_global_width = 255", "local width 256"}},
      {"options NULL (no global widths)", [](Qk& c) { c.null_opts = true; }, kInvalid, {"options->q_global_width = 0"}},
      {"stats_kind 2", opt([](auto& o) { o.stats_kind = 2; }), kInvalid, {"options->stats_kind = 2"}},
      {"eps negative", opt([](auto& o) { o.eps = -1e-6f; }), kInvalid, {"options->eps = -1e-06"}},
      {"eps NaN", opt([](auto& o) { o.eps = kNaN; }), kInvalid, {"options->eps = nan"}},
      {"weight_offset Inf", opt([](auto& o) { o.weight_offset = kInf; }), kInvalid, {"options->weight_offset = inf"}},
      {"reserved0", opt([](auto& o) { o.reserved0 = 1; }), kInvalid, {"options->reserved0 = 1"}},
      {"struct_size", opt([](auto& o) { o.struct_size = 8; }), kInvalid, {"options->struct_size = 8"}},
      {"head_dim not dividing q", [](Qk& c) { c.use_heads(96); }, kInvalid,
       {"options->head_dim = 96 does not divide q's width 256"}},
      {"head_dim not dividing k", [](Qk& c) { c.use_heads(256); }, kInvalid,
       {"options->head_dim = 256 does not divide k's width 128"}},
      {"head_dim negative", [](Qk& c) { c.use_heads(64); c.opts.head_dim = -64; }, kInvalid,
       {"options->head_dim = -64"}},
      {"head weights of the row", [](Qk& c) { c.use_heads(64); c.make(kQw, DType::kBF16, {256}); }, kInvalid,
       {"q_weight has shape [256]", "must be [64] (options->head_dim)"}},
      {"whole-row weights of a head", kind(QkKind::kFused, remake(kKw, DType::kBF16, {64})), kInvalid,
       {"k_weight has shape [64]", "must be [128] (k's width)"}},
  };
  run_bad_cases(table);
}

TEST_CASE("qk_rmsnorm: FP8 outputs and their scales", "[bad_input][qk_rmsnorm]") {
  const BadTable<Qk> table = {
      {"FP8 without scales", fp8(DType::k_f8e4m3fn, null(kOsc)), kInvalid,
       {"out_scales is NULL but the outputs are f8e4m3fn"}},
      {"scales with bf16 outputs", [](Qk& c) { c.make(kOsc, DType::kF32, {2}); }, kInvalid,
       {"out_scales must be NULL unless the outputs are FP8 (q_out.dtype = bf16)"}},
      {"scales [3]", fp8(DType::k_f8e4m3fn, remake(kOsc, DType::kF32, {3})), kInvalid, {"out_scales has shape [3]"}},
      {"scales [1, 2]", fp8(DType::k_f8e4m3fnuz, remake(kOsc, DType::kF32, {1, 2})), kInvalid,
       {"out_scales has shape [1, 2]"}},
      {"scales bf16", fp8(DType::k_f8e4m3fn, remake(kOsc, DType::kBF16, {2})), kUnsupported, {"out_scales.dtype = bf16"}},
      {"scales on cuda", fp8(DType::k_f8e4m3fn, device(kOsc, kDLCUDA, 0)), kInvalid, {"out_scales is on cuda:0"}},
      {"outputs of two dtypes", remake(kKo, DType::k_f8e4m3fn, {4, 128}), kInvalid,
       {"k_out.dtype = f8e4m3fn but q_out.dtype = bf16"}},
      {"f8e5m2 outputs", fp8(DType::k_f8e5m2), kUnsupported, {"q_out.dtype = f8e5m2"}},
      {"FP8 output over q", fp8(DType::k_f8e4m3fn, [](Qk& c) { c.dl(kQo).data = c.dl(kQ).data; }), kInvalid,
       {"q and q_out overlap"}},
      {"scales over k_out", fp8(DType::k_f8e4m3fn, [](Qk& c) { c.dl(kOsc).data = c.dl(kKo).data; }), kInvalid,
       {"k_out and out_scales overlap"}},
  };
  run_bad_cases(table);
}

TEST_CASE("qk_rmsnorm: overlapping tensors (only the very same view is in place)", "[bad_input][qk_rmsnorm]") {
  const BadTable<Qk> table = {
      {"q_out overlaps q by one element", shifted_out(kQo, kQ), kInvalid, {"q and q_out overlap"}},
      {"k_out is q", [](Qk& c) { c.dl(kKo) = c.dl(kQ); }, kInvalid,
       {"k_out has shape [4, 256]"}},
      {"k_out over q's memory", [](Qk& c) { c.dl(kKo).data = c.dl(kQ).data; }, kInvalid, {"q and k_out overlap"}},
      {"stats over k (stats call)", kind(QkKind::kStats, [](Qk& c) { c.dl(kStats).data = c.dl(kK).data; }), kInvalid,
       {"k and stats overlap"}},
      {"stats over q_out", [](Qk& c) { c.dl(kStats).data = c.dl(kQo).data; }, kInvalid, {"q_out and stats overlap"}},
      {"q_out rows overlap", strides(kQo, {128, 1}), kInvalid, {"q_out", "would overlap"}},
      {"stats rows stride 0 (stats call)", kind(QkKind::kStats, strides(kStats, {0, 1})), kInvalid,
       {"stats.strides[0] = 0"}},
  };
  run_bad_cases(table);
}

TEST_CASE("qk_rmsnorm: valid calls (in place, per head, stats) equal the reference", "[bad_input][qk_rmsnorm]") {
  const std::vector<Control<Qk>> controls = {
      {"apply", [](Qk&) {}},
      {"apply in place", [](Qk& c) {
         c.dl(kQo) = c.dl(kQ);
         c.dl(kKo) = c.dl(kK);
       }},
      {"apply mean squares", [](Qk& c) { c.opts.stats_kind = FUSEDNORM_QK_STATS_MEAN_SQUARES; }},
      {"stats", kind(QkKind::kStats)},
      {"fused", kind(QkKind::kFused)},
      {"fused per head", [](Qk& c) { c.use_heads(64); }},
      {"apply to f8e4m3fn", fp8(DType::k_f8e4m3fn)},
      {"fused per head to f8e4m3fnuz", fp8(DType::k_f8e4m3fnuz, [](Qk& c) { c.use_heads(64); })},
  };
  run_controls(controls);
}

}  // namespace test
}  // namespace fusednorm
