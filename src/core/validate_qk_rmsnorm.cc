// qk_rmsnorm's validation, one function for its three entry points (stats, apply, fused):
// options, every tensor on its own, shapes against each other, then overlaps (the outputs may be
// their inputs, the very same view: the in-place form); fills QkRmsnormCall (core/call.h).
#include <inttypes.h>
#include <math.h>
#include <stdint.h>

#include "core/validate_util.h"

namespace fusednorm {

namespace {

// q or k (`ref` = q when checking k): an input row of the call's dtype, width >= 1.
fusednorm_status qk_input(const DLTensor* t, const char* name, const DLTensor* ref, DType in_type, QkSide* side) {
  DType type;
  FN_TRY(check_tensor(t, name, &type));
  if (ref != nullptr) {
    FN_TRY(check_same_device(ref, "q", t, name));
    if (type != in_type)
      return FN_FAIL_INVALID("%s.dtype = %s but q.dtype = %s: they must match", name, dtype_name(type),
                             dtype_name(in_type));
    FN_TRY(check_lead(t, name, ref, "q"));
  }
  side->width = t->shape[t->ndim - 1];
  if (side->width == 0)
    return FN_FAIL_INVALID("%s.shape[%d] = 0 (%s shape %s): the width (the last dimension) must be >= 1", name,
                           t->ndim - 1, name, shape_string(t).c_str());
  FN_TRY(check_data(t, name));
  return make_row_view(t, name, dtype_bits(type), &side->in);
}

// A weight: [n] f32, f16 or bf16.
fusednorm_status qk_weight(const DLTensor* w, const char* name, const DLTensor* q, int64_t n, const char* what,
                           QkSide* side) {
  if (w == nullptr) return FN_FAIL_INVALID("%s is NULL", name);
  FN_TRY(check_tensor(w, name, &side->w_type));
  FN_TRY(check_same_device(q, "q", w, name));
  if (!is_input_dtype(side->w_type))
    return fail(FUSEDNORM_UNSUPPORTED, "%s.dtype = %s: must be f32, f16 or bf16", name, dtype_name(side->w_type));
  if (w->ndim != 1 || w->shape[0] != n)
    return FN_FAIL_INVALID("%s has shape %s: must be [%" PRId64 "] (%s)", name, shape_string(w).c_str(), n, what);
  FN_TRY(check_data(w, name));
  RowView v;
  FN_TRY(make_row_view(w, name, dtype_bits(side->w_type), &v));
  side->weight = v.data;
  return FUSEDNORM_SUCCESS;
}

// An output of the input's shape: its dtype is the input's or an FP8 format of FP8 attention
// (`*type`, which k_out must match when q_out has set it).
fusednorm_status qk_output(const DLTensor* out, const char* name, const DLTensor* in, const char* in_name,
                           DType in_type, DType* type, QkSide* side) {
  if (out == nullptr) return FN_FAIL_INVALID("%s is NULL", name);
  DType t;
  FN_TRY(check_tensor(out, name, &t));
  FN_TRY(check_same_device(in, in_name, out, name));
  if (t != in_type && t != DType::k_f8e4m3fn && t != DType::k_f8e4m3fnuz)
    return fail(FUSEDNORM_UNSUPPORTED, "%s.dtype = %s: must be %s.dtype (%s), f8e4m3fn or f8e4m3fnuz", name,
                dtype_name(t), in_name, dtype_name(in_type));
  if (*type != DType::kInvalid && t != *type)
    return FN_FAIL_INVALID("%s.dtype = %s but q_out.dtype = %s: both outputs have one dtype", name, dtype_name(t),
                           dtype_name(*type));
  *type = t;
  FN_TRY(check_lead(out, name, in, in_name));
  if (out->shape[out->ndim - 1] != side->width)
    return FN_FAIL_INVALID("%s has shape %s but %s has shape %s", name, shape_string(out).c_str(), in_name,
                           shape_string(in).c_str());
  FN_TRY(check_data(out, name));
  return make_row_view(out, name, dtype_bits(t), &side->out, /*written=*/true);
}

// FP8 outputs' static dequantization scales: [2] f32 (q's, k's); NULL otherwise.
fusednorm_status qk_out_scales(const DLTensor* sc, const DLTensor* q, QkRmsnormCall* call) {
  const bool fp8 = call->out_type != call->in_type;
  if (!fp8) {
    if (sc != nullptr)
      return FN_FAIL_INVALID("out_scales must be NULL unless the outputs are FP8 (q_out.dtype = %s)",
                             dtype_name(call->out_type));
    return FUSEDNORM_SUCCESS;
  }
  if (sc == nullptr)
    return FN_FAIL_INVALID("out_scales is NULL but the outputs are %s: FP8 outputs need their static scales [2] f32",
                           dtype_name(call->out_type));
  DType t;
  FN_TRY(check_tensor(sc, "out_scales", &t));
  FN_TRY(check_same_device(q, "q", sc, "out_scales"));
  if (t != DType::kF32) return fail(FUSEDNORM_UNSUPPORTED, "out_scales.dtype = %s: the scales are f32", dtype_name(t));
  if (sc->ndim != 1 || sc->shape[0] != 2)
    return FN_FAIL_INVALID("out_scales has shape %s: must be [2] (q's scale, then k's)", shape_string(sc).c_str());
  FN_TRY(check_data(sc, "out_scales"));
  RowView v;
  FN_TRY(make_row_view(sc, "out_scales", 32, &v));
  call->out_scales = v.data;
  return FUSEDNORM_SUCCESS;
}

// The in-place form: the output is the input's very view (same address, dtype, shape, strides).
bool same_view(const DLTensor* a, const DLTensor* b) {
  if (reinterpret_cast<uintptr_t>(a->data) + a->byte_offset != reinterpret_cast<uintptr_t>(b->data) + b->byte_offset ||
      a->ndim != b->ndim || a->dtype.code != b->dtype.code || a->dtype.bits != b->dtype.bits)
    return false;
  for (int i = 0; i < a->ndim; ++i) {
    int64_t sa = 0, sb = 0;
    if (a->shape[i] != b->shape[i] || !elem_stride(a, i, &sa) || !elem_stride(b, i, &sb)) return false;
    if (a->shape[i] > 1 && sa != sb) return false;
  }
  return true;
}

// A tensor's rows as one arithmetic progression of byte addresses: base + i * stride (i < rows),
// each row `bytes` long. False when the leading dimensions do not collapse into one.
struct RowRun {
  int64_t rows = 1, stride = 0, bytes = 0;
  uint64_t base = 0;
};
bool row_run(const DLTensor* t, int bits, RowRun* run) {
  run->base = uint64_t(reinterpret_cast<uintptr_t>(t->data)) + t->byte_offset;
  run->bytes = t->shape[t->ndim - 1] * bits / 8;
  int64_t inner = -1;  // stride (elements) and extent of the dimension inside the current one
  for (int d = t->ndim - 2; d >= 0; --d) {
    if (t->shape[d] <= 1) continue;
    int64_t s = 0;
    elem_stride(t, d, &s);
    if (inner >= 0 && s != inner) return false;  // a gap: not one progression
    if (run->rows == 1) run->stride = s * bits / 8;
    run->rows *= t->shape[d];
    inner = s * t->shape[d];
  }
  return true;
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Whether the bytes of a and b (validated, non-empty, byte ranges intersecting) meet: exact for
// two row progressions of one stride (views of a fused QKV projection: rows interleave, columns
// differ), else the byte ranges' answer (they meet).
bool rows_meet(const DLTensor* a, int abits, const DLTensor* b, int bbits) {
  RowRun ra, rb;
  if (!row_run(a, abits, &ra) || !row_run(b, bbits, &rb)) return true;
  const int64_t stride = ra.rows > 1 ? ra.stride : rb.stride;
  if ((ra.rows > 1 && rb.rows > 1 && ra.stride != rb.stride) || stride <= 0) return true;
  // Row i of a and row j of b meet when d + (j - i) * stride lies in (-bytes_b, bytes_a),
  // d = base_b - base_a (the ranges intersect, so |d| fits).
  const int64_t d = int64_t(rb.base - ra.base);
  const int64_t k_lo = floor_div(-rb.bytes - d, stride) + 1;
  const int64_t k_hi = -floor_div(-(ra.bytes - d), stride) - 1;  // ceil((bytes_a - d) / stride) - 1
  const int64_t lo = k_lo > -(ra.rows - 1) ? k_lo : -(ra.rows - 1);
  const int64_t hi = k_hi < rb.rows - 1 ? k_hi : rb.rows - 1;
  return lo <= hi;
}

// Every written tensor (outputs; stats for the stats call) against every other tensor of the
// call: no shared byte, except an output that is its input's very view (in place). Inputs may
// share memory with each other (q and k as views of one QKV buffer, read only).
struct QkTensorRef {
  const DLTensor* t;
  const char* name;
  int bits;
  bool written;
  int in_place_of;  // index of the input this output may be (or -1)
};
fusednorm_status qk_overlaps(const QkTensorRef* ts, int n) {
  ByteRange r[8];
  for (int i = 0; i < n; ++i) FN_TRY(byte_range(ts[i].t, ts[i].name, ts[i].bits, &r[i]));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (!ts[i].written || i == j || (ts[j].written && j < i)) continue;
      if (ts[i].in_place_of == j && same_view(ts[i].t, ts[j].t)) continue;
      const ByteRange pair[2] = {r[i < j ? i : j], r[i < j ? j : i]};
      if (pair[0].empty || pair[1].empty || !(pair[0].lo < pair[1].hi && pair[1].lo < pair[0].hi)) continue;
      if (!rows_meet(ts[i].t, ts[i].bits, ts[j].t, ts[j].bits)) continue;
      return check_no_overlap(pair, 2);
    }
  return FUSEDNORM_SUCCESS;
}

fusednorm_status qk_args(QkKind kind, const DLTensor* q, const DLTensor* k, const DLTensor* stats,
                         const DLTensor* q_weight, const DLTensor* k_weight, const DLTensor* q_out,
                         const DLTensor* k_out, const DLTensor* out_scales,
                         const fusednorm_qk_rmsnorm_options* options, QkRmsnormCall* call,
                         CallDevice* device) {
  fusednorm_qk_rmsnorm_options o;
  FN_TRY(FN_READ_OPTIONS(options, fusednorm_qk_rmsnorm_options_init, &o));
  call->kind = kind;
  // Options (each entry point checks what it reads).
  if (o.reserved0 != 0) return FN_FAIL_INVALID("options->reserved0 = %d: must be 0", o.reserved0);
  if (kind != QkKind::kStats) {
    if (!(o.eps >= 0.0f) || isinf(o.eps))
      return FN_FAIL_INVALID("options->eps = %g: must be finite and >= 0", double(o.eps));
    if (!isfinite(o.weight_offset))
      return FN_FAIL_INVALID("options->weight_offset = %g: must be finite", double(o.weight_offset));
    call->eps = o.eps;
    call->weight_offset = o.weight_offset;
  }
  if (kind == QkKind::kApply && o.stats_kind != FUSEDNORM_QK_STATS_SUMS &&
      o.stats_kind != FUSEDNORM_QK_STATS_MEAN_SQUARES)
    return FN_FAIL_INVALID("options->stats_kind = %d: must be FUSEDNORM_QK_STATS_SUMS (0) or "
                           "FUSEDNORM_QK_STATS_MEAN_SQUARES (1)", o.stats_kind);
  if (kind == QkKind::kFused && o.head_dim < 0)
    return FN_FAIL_INVALID("options->head_dim = %" PRId64 ": must be 0 (whole rows) or a head's width", o.head_dim);

  // q and k.
  FN_TRY(check_tensor(q, "q", &call->in_type));
  FN_TRY(check_device(q, "q", device));
  if (!is_input_dtype(call->in_type))
    return fail(FUSEDNORM_UNSUPPORTED, "q.dtype = %s: must be f32, f16 or bf16", dtype_name(call->in_type));
  FN_TRY(qk_input(q, "q", nullptr, call->in_type, &call->q));
  FN_TRY(make_lead(q, "q", &call->lead));
  FN_TRY(qk_input(k, "k", q, call->in_type, &call->k));

  // The RMS groups and their divisors.
  call->q.group = call->q.width;
  call->k.group = call->k.width;
  if (kind == QkKind::kFused && o.head_dim > 0) {
    for (const QkSide* s : {&call->q, &call->k})
      if (s->width % o.head_dim != 0)
        return FN_FAIL_INVALID("options->head_dim = %" PRId64 " does not divide %s's width %" PRId64, o.head_dim,
                               s == &call->q ? "q" : "k", s->width);
    call->q.group = call->k.group = o.head_dim;
  }
  call->q.divisor = math::length_f32(call->q.group);
  call->k.divisor = math::length_f32(call->k.group);
  if (kind == QkKind::kApply) {
    call->mean_squares = o.stats_kind == FUSEDNORM_QK_STATS_MEAN_SQUARES;
    if (!call->mean_squares) {
      const int64_t global[2] = {o.q_global_width, o.k_global_width};
      QkSide* sides[2] = {&call->q, &call->k};
      for (int j = 0; j < 2; ++j) {
        const char* nm = j == 0 ? "q" : "k";
        if (global[j] <= 0)
          return FN_FAIL_INVALID("options->%s_global_width = %" PRId64 ": apply from sums needs the width of %s "
                                 "over all ranks (>= %" PRId64 ", its local width)",
                                 nm, global[j], nm, sides[j]->width);
        if (global[j] < sides[j]->width)
          return FN_FAIL_INVALID("options->%s_global_width = %" PRId64 " is smaller than %s's local width %" PRId64,
                                 nm, global[j], nm, sides[j]->width);
        sides[j]->divisor = math::length_f32(global[j]);
      }
    }
  }

  // Statistics.
  if (kind != QkKind::kFused) {
    if (stats == nullptr) return FN_FAIL_INVALID("stats is NULL");
    DType st;
    FN_TRY(check_tensor(stats, "stats", &st));
    FN_TRY(check_same_device(q, "q", stats, "stats"));
    if (st != DType::kF32)
      return fail(FUSEDNORM_UNSUPPORTED, "stats.dtype = %s: the statistics are f32", dtype_name(st));
    FN_TRY(check_lead(stats, "stats", q, "q"));
    if (stats->shape[stats->ndim - 1] != 2)
      return FN_FAIL_INVALID("stats has shape %s: must end in 2 (the sums of q and of k; q has shape %s)",
                             shape_string(stats).c_str(), shape_string(q).c_str());
    FN_TRY(check_data(stats, "stats"));
    FN_TRY(make_row_view(stats, "stats", 32, &call->stats, /*written=*/kind == QkKind::kStats));
  }
  if (kind == QkKind::kStats) return FUSEDNORM_SUCCESS;

  // Weights and outputs.
  const bool heads = kind == QkKind::kFused && o.head_dim > 0;
  FN_TRY(qk_weight(q_weight, "q_weight", q, call->q.group, heads ? "options->head_dim" : "q's width", &call->q));
  FN_TRY(qk_weight(k_weight, "k_weight", q, call->k.group, heads ? "options->head_dim" : "k's width", &call->k));
  FN_TRY(qk_output(q_out, "q_out", q, "q", call->in_type, &call->out_type, &call->q));
  FN_TRY(qk_output(k_out, "k_out", k, "k", call->in_type, &call->out_type, &call->k));
  return qk_out_scales(out_scales, q, call);
}

}  // namespace

fusednorm_status validate_qk_rmsnorm(QkKind kind, const DLTensor* q, const DLTensor* k, const DLTensor* stats,
                                     const DLTensor* q_weight, const DLTensor* k_weight, const DLTensor* q_out,
                                     const DLTensor* k_out, const DLTensor* out_scales,
                                     const fusednorm_qk_rmsnorm_options* options, QkRmsnormCall* call,
                                     CallDevice* device) {
  FN_TRY(qk_args(kind, q, k, stats, q_weight, k_weight, q_out, k_out, out_scales, options, call, device));
  // Aliasing: written tensors hold no element twice and share no byte with any other tensor,
  // except an output that is its input's very view (in place); inputs may share memory.
  const int bits = dtype_bits(call->in_type);
  if (kind == QkKind::kStats) {
    FN_TRY(check_rows_disjoint(stats, "stats"));
    const QkTensorRef ts[] = {{q, "q", bits, false, -1}, {k, "k", bits, false, -1}, {stats, "stats", 32, true, -1}};
    return qk_overlaps(ts, 3);
  }
  FN_TRY(check_rows_disjoint(q_out, "q_out"));
  FN_TRY(check_rows_disjoint(k_out, "k_out"));
  const int out_bits = dtype_bits(call->out_type);
  QkTensorRef ts[8] = {{q, "q", bits, false, -1},
                       {k, "k", bits, false, -1},
                       {q_weight, "q_weight", dtype_bits(call->q.w_type), false, -1},
                       {k_weight, "k_weight", dtype_bits(call->k.w_type), false, -1},
                       {q_out, "q_out", out_bits, true, 0},
                       {k_out, "k_out", out_bits, true, 1}};
  int n = 6;
  if (kind == QkKind::kApply) ts[n++] = {stats, "stats", 32, false, -1};
  if (out_scales != nullptr) ts[n++] = {out_scales, "out_scales", 32, false, -1};
  return qk_overlaps(ts, n);
}

}  // namespace fusednorm
