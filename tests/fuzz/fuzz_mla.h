// The fuzz harness's mla_rope_rmsnorm_quant entry (kOps in fuzz_c_abi.cc, included there before
// the table, inside its anonymous namespace). The five fuzzed slots are q (rotated in place), kv,
// weight, cos_sin and kv_cache; the index tensors (row_offsets, positions or cache_len,
// page_table) and k_scale are built here from the Spec, valid or broken in one of the ways the
// validation must catch (a page id past the cache, a negative one, decreasing row_offsets, a
// position past the table, a negative cache_len, two tokens on one slot), on the device of q.
// They are inputs only: one copy serves the library and the reference; it is checked unchanged.
// (No includes: it is included inside a namespace; fuzz_c_abi.cc and fuzz_call.h include what it
// uses.)
#pragma once

namespace mla_fuzz {

using namespace fusednorm;
using namespace fuzz;

// The call's dimensions, from the Spec: T = the rows of the logical shape, L = its H.
struct Dims {
  int64_t t = 0, heads = 0, r = 8, l = 0, batch = 1, page = 1, max_pos = 1, num_pages = 1, max_pages = 1;
};
inline Dims dims(const Ctx& c) {
  const Spec& s = *c.s;
  Dims d;
  d.t = 1;
  for (int64_t x : c.lead) d.t *= x;
  d.heads = s.osel[1] % 4;
  d.r = 8 * (1 + s.osel[2] % 3) + (s.osel[2] % 29 == 28 ? 4 : 0);  // sometimes not a multiple of 8
  d.l = c.h;
  d.batch = d.t == 0 ? 1 + s.osel[3] % 2 : 1 + int64_t(s.osel[3] % std::min<int64_t>(d.t, 4));
  d.page = 1 + s.osel[4] % 4;
  // Positions: cache_len[b] in [0, 8), tokens after it; the table covers them (or not: osel[5]).
  d.max_pos = 8 + d.t + (s.osel[5] % 8 == 7 ? -int64_t(s.osel[5] % 3) - 1 : 1);
  d.max_pages = (8 + d.t + d.page - 1) / d.page;
  d.num_pages = d.batch * d.max_pages;  // one page id per page of each sequence
  return d;
}

// The index tensors and k_scale of one input.
struct Extra {
  std::vector<int64_t> off_shape, len_shape, pt_shape, one{1};
  std::vector<uint8_t> off, len, pos, pt, ks;
  DLTensor doff{}, dlen{}, dpt{}, dks{};
  bool use_positions = false, has_scale = false;
};

inline DLTensor index_dl(std::vector<uint8_t>& bytes, std::vector<int64_t>& shape, bool is64, DLDevice dev) {
  DLTensor d{};
  d.data = bytes.data();
  d.device = dev;
  d.ndim = int32_t(shape.size());
  d.dtype = DLDataType{kDLInt, uint8_t(is64 ? 64 : 32), 1};
  d.shape = shape.data();
  return d;
}
inline void put(std::vector<uint8_t>& b, size_t i, int64_t v, bool is64) {
  if (is64) memcpy(b.data() + 8 * i, &v, 8);
  else {
    const int32_t w = int32_t(v);
    memcpy(b.data() + 4 * i, &w, 4);
  }
}

inline Extra& extra(Ctx& c) {
  if (c.extra) return *static_cast<Extra*>(c.extra.get());
  auto e = std::make_shared<Extra>();
  const Spec& s = *c.s;
  const Dims d = dims(c);
  const bool is64 = s.osel[6] & 1;
  const int breakage = s.osel[7] % 16;  // 0..9: valid
  e->use_positions = s.osel[6] & 2;
  const size_t w = is64 ? 8 : 4;
  std::vector<int64_t> offs(size_t(d.batch + 1), 0), lens(size_t(d.batch));
  for (int64_t b = 0; b < d.batch; ++b) {
    offs[size_t(b + 1)] = b + 1 == d.batch ? d.t : d.t * (b + 1) / d.batch;
    lens[size_t(b)] = int64_t((s.oraw[0] >> (4 * (b % 8))) % 8);
  }
  if (breakage == 10 && d.batch > 1) std::swap(offs[1], offs[2 % size_t(d.batch + 1)]);  // decreasing
  if (breakage == 11) lens[0] = -1;
  e->off_shape = {d.batch + 1};
  e->off.assign(offs.size() * w, 0);
  for (size_t i = 0; i < offs.size(); ++i) put(e->off, i, offs[i], is64);
  e->len_shape = {e->use_positions ? d.t : d.batch};
  e->len.assign(size_t(std::max<int64_t>(e->len_shape[0], 1)) * w, 0);
  if (e->use_positions) {
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t t = offs[size_t(b)]; t < offs[size_t(b + 1)] && t < d.t && t >= 0; ++t)
        put(e->len, size_t(t), lens[size_t(b)] + t - offs[size_t(b)], is64);
    if (breakage == 12 && d.t > 0) put(e->len, 0, d.max_pos + 3, is64);  // past the table
  } else {
    for (int64_t b = 0; b < d.batch; ++b) put(e->len, size_t(b), lens[size_t(b)], is64);
  }
  e->pt_shape = {d.batch, d.max_pages};
  e->pt.assign(size_t(d.batch * d.max_pages) * w, 0);
  for (int64_t i = 0; i < d.batch * d.max_pages; ++i) put(e->pt, size_t(i), i, is64);
  if (breakage == 13) put(e->pt, 0, d.num_pages + int64_t(s.osel[8] % 3), is64);  // past the cache
  if (breakage == 14) put(e->pt, 0, -1 - int64_t(s.osel[8] % 3), is64);
  if (breakage == 15 && d.batch > 1) put(e->pt, size_t(d.max_pages), 0, is64);  // sequence 1 on sequence 0's page
  const DLDevice dev = c.t[0].dl.device;
  e->doff = index_dl(e->off, e->off_shape, is64, dev);
  e->dlen = index_dl(e->len, e->len_shape, is64, dev);
  e->dpt = index_dl(e->pt, e->pt_shape, is64, dev);
  e->has_scale = s.osel[9] % 4 != 0;
  const float scales[] = {1.0f, 0.5f, 1e-3f, 0.0f, INFINITY, NAN, 3e38f, 1e-40f};
  const float k = scales[s.osel[9] / 4 % 8];
  e->ks.resize(4);
  memcpy(e->ks.data(), &k, 4);
  e->dks = index_dl(e->ks, e->one, false, dev);
  e->dks.dtype = DLDataType{kDLFloat, 32, 1};
  c.extra = e;
  return *e;
}

inline void options(Ctx& c) {
  const Spec& s = *c.s;
  fusednorm_mla_rope_rmsnorm_quant_options_init(&c.mo);
  c.opts_null = s.osel[0] % 16 == 14;
  c.mo.struct_size = struct_size(s.osel[0], sizeof c.mo);
  const int32_t styles[] = {0, 0, 1};
  const float eps[] = {1e-6f, 1e-6f, 0.0f, 1.0f, -1e-6f, NAN};
  const float woff[] = {0.0f, 0.0f, 1.0f, 1e38f, INFINITY};
  c.mo.rope_style = pick(s.osel[1] >> 2, styles, int32_t(s.oraw[1] % 5) - 2);
  c.mo.eps = pick(s.osel[2] >> 2, eps, f32_bits(s.oraw[2]));
  c.mo.weight_offset = pick(s.osel[3] >> 2, woff, f32_bits(s.oraw[3]));
}

inline std::vector<int64_t> shape(const Ctx& c, int slot) {
  const Dims d = dims(c);
  switch (slot) {
    case 0: return {d.t, d.heads, d.r};
    case 1: return {d.t, d.l + d.r};
    case 2: return {d.l};
    case 3: return {d.max_pos, d.r};
    default: return {d.num_pages, d.page, d.l + d.r};
  }
}

inline fusednorm_status call(Ctx& c, bool ref) {
  Extra& e = extra(c);
  const std::vector<uint8_t> before = e.off, before_len = e.len, before_pt = e.pt;
  DLTensor* pos = e.use_positions ? &e.dlen : nullptr;
  DLTensor* len = e.use_positions ? nullptr : &e.dlen;
  DLTensor* ks = e.has_scale ? &e.dks : nullptr;
  const auto* o = c.opts_null ? nullptr : &c.mo;
  const fusednorm_status st =
      ref ? reference::mla_rope_rmsnorm_quant(tp(c, 0), nullptr, tp(c, 1), tp(c, 2), tp(c, 3), pos, &e.doff, len, &e.dpt,
                                              tp(c, 4), ks, nullptr, o)
          : fusednorm_mla_rope_rmsnorm_quant(tp(c, 0), nullptr, tp(c, 1), tp(c, 2), tp(c, 3), pos, &e.doff, len, &e.dpt,
                                             tp(c, 4), ks, nullptr, o, nullptr);
  if (e.off != before || e.len != before_len || e.pt != before_pt) __builtin_trap();  // inputs are read only
  return st;
}

}  // namespace mla_fuzz

inline OpDesc mla_op_desc() {
  return {"mla_rope_rmsnorm_quant",
          {{"q", {DType::kBF16, DType::kF16, DType::kF32}},
           {"kv", {}},
           {"weight", {DType::kBF16, DType::kF32, DType::kF16}},
           {"cos_sin", {DType::kF32, DType::kBF16}},
           {"kv_cache", {DType::kBF16, DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::k_f8e5m2, DType::kF16, DType::kF32,
                         DType::k_f8e4m3, DType::k_f8e5m2fnuz}}},
          mla_fuzz::options,
          [](const Ctx&, int) { return false; },
          [](const Ctx&, int slot) { return slot == 0 ? 1 : slot == 4 ? 2 : 0; },
          mla_fuzz::shape,
          [](Ctx& c) { return mla_fuzz::call(c, false); },
          [](Ctx& c) { return mla_fuzz::call(c, true); }};
}
