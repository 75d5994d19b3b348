// mla_rope_rmsnorm_quant's validation: options, every tensor on its own, shapes against each
// other, overlaps, and on CPU tensors every index value; fills MlaCall (core/call_mla.h).
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/validate_util.h"

namespace fusednorm {

namespace {

// Index tensors and the counter are read and written as whole integers (the GPU kernel loads them
// and adds to the counter atomically): their data must be aligned to the element size.
fusednorm_status check_aligned(const DLTensor* t, const char* name, int bytes) {
  const uint64_t at = uint64_t(reinterpret_cast<uintptr_t>(t->data)) + uint64_t(t->byte_offset);
  if (!is_empty(t) && at % uint64_t(bytes) != 0)
    return FN_FAIL_INVALID("%s: data %p + byte_offset %" PRIu64 " is not aligned to its %d-byte elements", name, t->data,
                           uint64_t(t->byte_offset), bytes);
  return FUSEDNORM_SUCCESS;
}

// An int32 or int64 tensor (positions, row_offsets, cache_len, page_table) of rank `ndim`: the
// checks of check_tensor, then the dtype.
fusednorm_status index_tensor(const DLTensor* t, const char* name, int ndim, int* bits) {
  if (t == nullptr) return FN_FAIL_INVALID("%s is NULL", name);
  DLTensor probe = *t;
  probe.dtype = DLDataType{kDLInt, 8, 1};  // check_tensor knows no int32/int64: check the rest
  DType ignored;
  FN_TRY(check_tensor(&probe, name, &ignored));
  if (t->dtype.code != kDLInt || t->dtype.lanes != 1 || (t->dtype.bits != 32 && t->dtype.bits != 64))
    return fail(FUSEDNORM_UNSUPPORTED, "%s.dtype (code %u, bits %u, lanes %u): must be int32 or int64", name,
                unsigned(t->dtype.code), unsigned(t->dtype.bits), unsigned(t->dtype.lanes));
  if (t->ndim != ndim)
    return FN_FAIL_INVALID("%s has shape %s: must have rank %d", name, shape_string(t).c_str(), ndim);
  *bits = t->dtype.bits;
  FN_TRY(check_data(t, name));
  return check_aligned(t, name, *bits / 8);
}

fusednorm_status index_view(const DLTensor* t, const char* name, int bits, IndexView* v) {
  RowView rv;
  FN_TRY(make_row_view(t, name, bits, &rv));
  v->data = rv.data;
  v->stride = bits / 8;
  v->is64 = bits == 64;
  return FUSEDNORM_SUCCESS;
}

// A tensor of exactly one element of dtype `want` (k_scale f32, invalid_tokens int32).
fusednorm_status scalar_tensor(const DLTensor* t, const char* name, DLDataType want, const char* want_name,
                               bool written, char** data) {
  DLTensor probe = *t;
  probe.dtype = DLDataType{kDLInt, 8, 1};
  DType ignored;
  FN_TRY(check_tensor(&probe, name, &ignored, /*contiguous_last=*/false));
  if (t->dtype.code != want.code || t->dtype.bits != want.bits || t->dtype.lanes != 1)
    return fail(FUSEDNORM_UNSUPPORTED, "%s.dtype (code %u, bits %u, lanes %u): must be %s", name,
                unsigned(t->dtype.code), unsigned(t->dtype.bits), unsigned(t->dtype.lanes), want_name);
  if (numel(t) != 1)
    return FN_FAIL_INVALID("%s has shape %s: must hold exactly one element", name, shape_string(t).c_str());
  FN_TRY(check_data(t, name));
  if (written) FN_TRY(check_aligned(t, name, want.bits / 8));
  RowView rv;
  FN_TRY(make_row_view(t, name, want.bits, &rv, written));
  *data = rv.data;
  return FUSEDNORM_SUCCESS;
}

fusednorm_status check_dim(const DLTensor* t, const char* name, int d, int64_t want, const char* what) {
  if (t->shape[d] != want)
    return FN_FAIL_INVALID("%s has shape %s: dimension %d must be %" PRId64 " (%s)", name, shape_string(t).c_str(), d,
                           want, what);
  return FUSEDNORM_SUCCESS;
}

fusednorm_status check_rank(const DLTensor* t, const char* name, int ndim, const char* layout) {
  if (t->ndim != ndim) return FN_FAIL_INVALID("%s has shape %s: must be %s", name, shape_string(t).c_str(), layout);
  return FUSEDNORM_SUCCESS;
}

bool is_cache_dtype(DType t) {
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32 || (is_quant_dtype(t) && t != DType::kI8);
}

struct Tensors {
  const DLTensor *q, *q_out, *kv, *weight, *cos_sin, *positions, *row_offsets, *cache_len, *page_table, *kv_cache,
      *k_scale, *invalid_tokens;
};

// Options and every tensor on its own, then the shapes against each other.
fusednorm_status mla_args(const Tensors& a, const fusednorm_mla_rope_rmsnorm_quant_options* options, MlaCall* c,
                          CallDevice* device, int* index_bits) {
  fusednorm_mla_rope_rmsnorm_quant_options o;
  FN_TRY(FN_READ_OPTIONS(options, fusednorm_mla_rope_rmsnorm_quant_options_init, &o));
  if (o.rope_style != FUSEDNORM_ROPE_INTERLEAVED && o.rope_style != FUSEDNORM_ROPE_NEOX)
    return FN_FAIL_INVALID("options->rope_style = %d: must be FUSEDNORM_ROPE_INTERLEAVED (0) or FUSEDNORM_ROPE_NEOX (1)",
                           o.rope_style);
  if (!(o.eps >= 0.0f) || isinf(o.eps))
    return FN_FAIL_INVALID("options->eps = %g: must be finite and >= 0", double(o.eps));
  if (!isfinite(o.weight_offset))
    return FN_FAIL_INVALID("options->weight_offset = %g: must be finite", double(o.weight_offset));
  c->neox = o.rope_style == FUSEDNORM_ROPE_NEOX;
  c->eps = o.eps;
  c->weight_offset = o.weight_offset;

  // q [T, Hq, R] and q_out.
  FN_TRY(check_tensor(a.q, "q", &c->in_type));
  FN_TRY(check_device(a.q, "q", device));
  if (!is_input_dtype(c->in_type))
    return fail(FUSEDNORM_UNSUPPORTED, "q.dtype = %s: must be f32, f16 or bf16", dtype_name(c->in_type));
  FN_TRY(check_rank(a.q, "q", 3, "[T, Hq, R]"));
  c->tokens = a.q->shape[0];
  c->heads = a.q->shape[1];
  c->rope = a.q->shape[2];
  if (c->rope < 8 || c->rope % 8 != 0)
    return FN_FAIL_INVALID("q has shape %s: R = %" PRId64 " (the rope dimension) must be a positive multiple of 8",
                           shape_string(a.q).c_str(), c->rope);
  FN_TRY(check_data(a.q, "q"));
  const int in_bits = dtype_bits(c->in_type);
  RowView qv;
  FN_TRY(make_row_view(a.q, "q", in_bits, &qv, /*written=*/a.q_out == nullptr));
  c->q = qv.data;
  c->q_stride_t = qv.strides[0];
  c->q_stride_h = qv.strides[1];
  if (a.q_out != nullptr) {
    DType t;
    FN_TRY(check_tensor(a.q_out, "q_out", &t));
    FN_TRY(check_same_device(a.q, "q", a.q_out, "q_out"));
    if (t != c->in_type)
      return FN_FAIL_INVALID("q_out.dtype = %s but q.dtype = %s: they must match", dtype_name(t), dtype_name(c->in_type));
    FN_TRY(check_lead(a.q_out, "q_out", a.q, "q"));
    if (a.q_out->shape[2] != c->rope)
      return FN_FAIL_INVALID("q_out has shape %s but q has shape %s", shape_string(a.q_out).c_str(),
                             shape_string(a.q).c_str());
    FN_TRY(check_data(a.q_out, "q_out"));
    FN_TRY(make_row_view(a.q_out, "q_out", in_bits, &qv, /*written=*/true));
  }
  c->q_out = qv.data;
  c->qo_stride_t = qv.strides[0];
  c->qo_stride_h = qv.strides[1];

  // kv [T, L + R], weight [L].
  DType t;
  FN_TRY(check_tensor(a.kv, "kv", &t));
  FN_TRY(check_same_device(a.q, "q", a.kv, "kv"));
  if (t != c->in_type)
    return FN_FAIL_INVALID("kv.dtype = %s but q.dtype = %s: they must match", dtype_name(t), dtype_name(c->in_type));
  FN_TRY(check_rank(a.kv, "kv", 2, "[T, L + R]"));
  FN_TRY(check_dim(a.kv, "kv", 0, c->tokens, "T, the tokens of q"));
  c->rank = a.kv->shape[1] - c->rope;
  if (c->rank < 8 || c->rank % 8 != 0)
    return FN_FAIL_INVALID("kv has shape %s and q's R = %" PRId64 ": L = %" PRId64
                           " (kv's last dimension minus R, the kv_lora_rank) must be a positive multiple of 8",
                           shape_string(a.kv).c_str(), c->rope, c->rank);
  FN_TRY(check_data(a.kv, "kv"));
  RowView rv;
  FN_TRY(make_row_view(a.kv, "kv", in_bits, &rv));
  c->kv = rv.data;
  c->kv_stride = rv.strides[0];
  FN_TRY(check_tensor(a.weight, "weight", &c->w_type));
  FN_TRY(check_same_device(a.q, "q", a.weight, "weight"));
  if (!is_input_dtype(c->w_type))
    return fail(FUSEDNORM_UNSUPPORTED, "weight.dtype = %s: must be f32, f16 or bf16", dtype_name(c->w_type));
  FN_TRY(check_rank(a.weight, "weight", 1, "[L]"));
  FN_TRY(check_dim(a.weight, "weight", 0, c->rank, "L, kv's last dimension minus R"));
  FN_TRY(check_data(a.weight, "weight"));
  FN_TRY(make_row_view(a.weight, "weight", dtype_bits(c->w_type), &rv));
  c->weight = rv.data;

  // cos_sin [max_pos, R].
  FN_TRY(check_tensor(a.cos_sin, "cos_sin", &c->cs_type));
  FN_TRY(check_same_device(a.q, "q", a.cos_sin, "cos_sin"));
  if (c->cs_type != DType::kF32 && c->cs_type != DType::kBF16)
    return fail(FUSEDNORM_UNSUPPORTED, "cos_sin.dtype = %s: must be f32 or bf16", dtype_name(c->cs_type));
  FN_TRY(check_rank(a.cos_sin, "cos_sin", 2, "[max_pos, R]"));
  FN_TRY(check_dim(a.cos_sin, "cos_sin", 1, c->rope, "R, q's last dimension"));
  c->max_pos = a.cos_sin->shape[0];
  FN_TRY(check_data(a.cos_sin, "cos_sin"));
  FN_TRY(make_row_view(a.cos_sin, "cos_sin", dtype_bits(c->cs_type), &rv));
  c->cos_sin = rv.data;
  c->cs_stride = rv.strides[0];

  // The batch: row_offsets [B + 1], positions [T] or cache_len [B], page_table [B, max_pages].
  if ((a.positions == nullptr) == (a.cache_len == nullptr))
    return FN_FAIL_INVALID("positions is %s and cache_len is %s: exactly one of them must be given",
                           a.positions ? "given" : "NULL", a.cache_len ? "given" : "NULL");
  int bits;
  FN_TRY(index_tensor(a.row_offsets, "row_offsets", 1, &bits));
  FN_TRY(check_same_device(a.q, "q", a.row_offsets, "row_offsets"));
  if (a.row_offsets->shape[0] < 1)
    return FN_FAIL_INVALID("row_offsets has shape %s: must be [B + 1], at least [1]", shape_string(a.row_offsets).c_str());
  c->batch = a.row_offsets->shape[0] - 1;
  FN_TRY(index_view(a.row_offsets, "row_offsets", bits, &c->row_offsets));
  index_bits[0] = bits;
  if (a.positions != nullptr) {
    FN_TRY(index_tensor(a.positions, "positions", 1, &bits));
    FN_TRY(check_same_device(a.q, "q", a.positions, "positions"));
    FN_TRY(check_dim(a.positions, "positions", 0, c->tokens, "T, the tokens of q"));
    FN_TRY(index_view(a.positions, "positions", bits, &c->positions));
  } else {
    FN_TRY(index_tensor(a.cache_len, "cache_len", 1, &bits));
    FN_TRY(check_same_device(a.q, "q", a.cache_len, "cache_len"));
    FN_TRY(check_dim(a.cache_len, "cache_len", 0, c->batch, "B, row_offsets' length minus 1"));
    FN_TRY(index_view(a.cache_len, "cache_len", bits, &c->cache_len));
  }
  index_bits[1] = bits;
  FN_TRY(index_tensor(a.page_table, "page_table", 2, &bits));
  FN_TRY(check_same_device(a.q, "q", a.page_table, "page_table"));
  FN_TRY(check_dim(a.page_table, "page_table", 0, c->batch, "B, row_offsets' length minus 1"));
  c->max_pages = a.page_table->shape[1];
  FN_TRY(make_row_view(a.page_table, "page_table", bits, &rv));
  c->page_table.data = rv.data;
  c->page_table.stride = bits / 8;
  c->page_table.is64 = bits == 64;
  c->page_table_row_stride = rv.strides[0];
  index_bits[2] = bits;

  // kv_cache [num_pages, page_size, L + R].
  FN_TRY(check_tensor(a.kv_cache, "kv_cache", &c->cache_type));
  FN_TRY(check_same_device(a.q, "q", a.kv_cache, "kv_cache"));
  if (!is_cache_dtype(c->cache_type))
    return fail(FUSEDNORM_UNSUPPORTED, "kv_cache.dtype = %s: must be bf16, f16, f32 or an FP8 format",
                dtype_name(c->cache_type));
  FN_TRY(check_rank(a.kv_cache, "kv_cache", 3, "[num_pages, page_size, L + R]"));
  FN_TRY(check_dim(a.kv_cache, "kv_cache", 2, c->rank + c->rope, "L + R, kv's last dimension"));
  c->num_pages = a.kv_cache->shape[0];
  c->page_size = a.kv_cache->shape[1];
  if (c->page_size < 1)
    return FN_FAIL_INVALID("kv_cache has shape %s: the page size (dimension 1) must be >= 1",
                           shape_string(a.kv_cache).c_str());
  FN_TRY(check_data(a.kv_cache, "kv_cache"));
  FN_TRY(make_row_view(a.kv_cache, "kv_cache", dtype_bits(c->cache_type), &rv, /*written=*/true));
  c->cache = rv.data;
  // make_row_view stores 0 for a dimension of size 1 (never used to move an address).
  c->cache_page_stride = rv.strides[0];
  c->cache_slot_stride = rv.strides[1];

  char* p;
  if (a.k_scale != nullptr) {
    FN_TRY(scalar_tensor(a.k_scale, "k_scale", DLDataType{kDLFloat, 32, 1}, "f32", false, &p));
    FN_TRY(check_same_device(a.q, "q", a.k_scale, "k_scale"));
    c->k_scale = reinterpret_cast<const float*>(p);
  }
  if (a.invalid_tokens != nullptr) {
    FN_TRY(scalar_tensor(a.invalid_tokens, "invalid_tokens", DLDataType{kDLInt, 32, 1}, "int32", true, &p));
    FN_TRY(check_same_device(a.q, "q", a.invalid_tokens, "invalid_tokens"));
    c->invalid_tokens = reinterpret_cast<int32_t*>(p);
  }
  return FUSEDNORM_SUCCESS;
}

// Every index value (CPU tensors): fusednorm.h, "Index values".
fusednorm_status mla_index_values(const Tensors& a, const MlaCall& c) {
  const int64_t first = load_index(c.row_offsets, 0);
  if (first != 0) return FN_FAIL_INVALID("row_offsets[0] = %" PRId64 ": must be 0", first);
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t lo = load_index(c.row_offsets, b), hi = load_index(c.row_offsets, b + 1);
    if (hi < lo)
      return FN_FAIL_INVALID("row_offsets is not non-decreasing: row_offsets[%" PRId64 "] = %" PRId64
                             " < row_offsets[%" PRId64 "] = %" PRId64,
                             b + 1, hi, b, lo);
  }
  const int64_t last = load_index(c.row_offsets, c.batch);
  if (last != c.tokens)
    return FN_FAIL_INVALID("row_offsets[%" PRId64 "] = %" PRId64 ": must be T = %" PRId64 " (the tokens of q %s)",
                           c.batch, last, c.tokens, shape_string(a.q).c_str());
  if (c.cache_len.data != nullptr)
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t len = load_index(c.cache_len, b);
      if (len < 0) return FN_FAIL_INVALID("cache_len[%" PRId64 "] = %" PRId64 " is negative", b, len);
    }
  std::vector<std::pair<int64_t, int64_t>> slots;  // (page * page_size + slot, token)
  slots.reserve(size_t(c.tokens));
  for (int64_t tok = 0; tok < c.tokens; ++tok) {
    MlaSlot s;
    const MlaLocate st = mla_locate(c, tok, &s);
    if (st == MlaLocate::kOk) {
      slots.emplace_back(s.page * c.page_size + s.slot, tok);
      continue;
    }
    // The failing token again, step by step, for the message (row_offsets is valid here).
    int64_t b = 0;
    while (load_index(c.row_offsets, b + 1) <= tok) ++b;
    const int64_t start = load_index(c.row_offsets, b);
    int64_t pos;
    char from[160];
    if (c.positions.data != nullptr) {
      pos = load_index(c.positions, tok);
      snprintf(from, sizeof from, "positions[%" PRId64 "]", tok);
    } else {
      const int64_t len = load_index(c.cache_len, b);
      pos = len + (tok - start);
      snprintf(from, sizeof from, "cache_len[%" PRId64 "] = %" PRId64 " + %" PRId64 " tokens before it", b, len,
               tok - start);
    }
    if (st == MlaLocate::kBadPosition)
      return FN_FAIL_INVALID("token %" PRId64 " (sequence %" PRId64 ") has position %" PRId64
                             " (%s): outside the cos/sin table's %" PRId64 " positions (cos_sin shape %s)",
                             tok, b, pos, from, c.max_pos, shape_string(a.cos_sin).c_str());
    const int64_t index = pos / c.page_size;
    if (st == MlaLocate::kBadPageIndex)
      return FN_FAIL_INVALID("token %" PRId64 " (sequence %" PRId64 ") at position %" PRId64 " needs page %" PRId64
                             " of its sequence (page_size %" PRId64 "), but page_table has shape %s",
                             tok, b, pos, index, c.page_size, shape_string(a.page_table).c_str());
    IndexView row = c.page_table;
    row.data += b * c.page_table_row_stride;
    return FN_FAIL_INVALID("page_table[%" PRId64 ", %" PRId64 "] = %" PRId64 " (token %" PRId64 " at position %" PRId64
                           "): outside the cache's %" PRId64 " pages (kv_cache shape %s)",
                           b, index, load_index(row, index), tok, pos, c.num_pages, shape_string(a.kv_cache).c_str());
  }
  std::sort(slots.begin(), slots.end());
  for (size_t i = 1; i < slots.size(); ++i)
    if (slots[i].first == slots[i - 1].first)
      return FN_FAIL_INVALID("tokens %" PRId64 " and %" PRId64 " both write cache page %" PRId64 ", slot %" PRId64
                             ": every token needs a slot of its own",
                             slots[i - 1].second, slots[i].second, slots[i].first / c.page_size,
                             slots[i].first % c.page_size);
  return FUSEDNORM_SUCCESS;
}

}  // namespace

fusednorm_status validate_mla_rope_rmsnorm_quant(
    const DLTensor* q, const DLTensor* q_out, const DLTensor* kv, const DLTensor* weight,
    const DLTensor* cos_sin, const DLTensor* positions, const DLTensor* row_offsets, const DLTensor* cache_len,
    const DLTensor* page_table, const DLTensor* kv_cache, const DLTensor* k_scale, const DLTensor* invalid_tokens,
    const fusednorm_mla_rope_rmsnorm_quant_options* options, MlaCall* call, CallDevice* device) {
  const Tensors a{q, q_out, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table, kv_cache, k_scale,
                  invalid_tokens};
  int bits[3] = {32, 32, 32};  // row_offsets, positions or cache_len, page_table
  FN_TRY(mla_args(a, options, call, device, bits));
  // Aliasing: written tensors (q in place or q_out, kv_cache, invalid_tokens) address no element
  // twice; no two tensors share a byte.
  FN_TRY(check_rows_disjoint(q_out != nullptr ? q_out : q, q_out != nullptr ? "q_out" : "q"));
  FN_TRY(check_rows_disjoint(kv_cache, "kv_cache"));
  ByteRange r[12];
  int n = 0;
  const int in_bits = dtype_bits(call->in_type);
  FN_TRY(byte_range(q, "q", in_bits, &r[n++]));
  if (q_out != nullptr) FN_TRY(byte_range(q_out, "q_out", in_bits, &r[n++]));
  FN_TRY(byte_range(kv, "kv", in_bits, &r[n++]));
  FN_TRY(byte_range(weight, "weight", dtype_bits(call->w_type), &r[n++]));
  FN_TRY(byte_range(cos_sin, "cos_sin", dtype_bits(call->cs_type), &r[n++]));
  if (positions != nullptr) FN_TRY(byte_range(positions, "positions", bits[1], &r[n++]));
  FN_TRY(byte_range(row_offsets, "row_offsets", bits[0], &r[n++]));
  if (cache_len != nullptr) FN_TRY(byte_range(cache_len, "cache_len", bits[1], &r[n++]));
  FN_TRY(byte_range(page_table, "page_table", bits[2], &r[n++]));
  FN_TRY(byte_range(kv_cache, "kv_cache", dtype_bits(call->cache_type), &r[n++]));
  if (k_scale != nullptr) FN_TRY(byte_range(k_scale, "k_scale", 32, &r[n++]));
  if (invalid_tokens != nullptr) FN_TRY(byte_range(invalid_tokens, "invalid_tokens", 32, &r[n++]));
  FN_TRY(check_no_overlap(r, n));
  // The index values, where the host can read them.
  if (device->type == kDLCPU) FN_TRY(mla_index_values(a, *call));
  return FUSEDNORM_SUCCESS;
}

}  // namespace fusednorm
