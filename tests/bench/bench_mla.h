// fusednorm-bench: the mla_rope_rmsnorm_quant cases (--ops mla): DeepSeek-V3 shapes (L 512, R 64,
// Hq from --mla-heads, page sizes from --mla-pages, cache dtypes from --mla-cache, tokens from
// --tokens), q rotated in place (compact, or with --mla-q-nope the rope part of a q projection: a
// strided view), an FP8 cache with a static scale (a device scalar, 1/80), a cache_len batch: up to 64 tokens a decode batch (one token a
// sequence, cache lengths 1000..8000), above that a prefill of sequences of 2048 tokens after 0 to
// 3 Ki cached ones. Each case is checked against the reference on a sample of tokens (their q
// rows and cache rows) and timed like the rmsnorm_quant cases; %copy relates the bytes a call must
// move (q read and written, kv read, cache rows written, table rows, weight, indices) to the copy
// bandwidth. Included by fusednorm_bench.cc after bench_run.h.
#pragma once

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_run.h"
#include "core/elements.h"
#include "reference/reference.h"

namespace fusednorm {
namespace bench {

constexpr int64_t kMlaL = 512, kMlaR = 64;

// One case's batch: sequences, positions, pages (host side), and the device buffers.
struct MlaBatch {
  int64_t t = 0, b = 0, heads = 0, page = 0, max_pages = 0, num_pages = 0, max_pos = 0;
  int64_t nope = 0;  // q: the last kMlaR of each head's nope + kMlaR elements
  DType cache = DType::kBF16;
  std::vector<int64_t> lens, cache_len, row_offsets, table, pos, seq;  // table: [b, max_pages]
  size_t sets = 0, q_stride = 0, kv_stride = 0, cache_stride = 0;
  Buffer q, kv, cache_buf, w, cs, off, len, pt, ks;
  // The shapes the DLTensors point to.
  int64_t q_shape[3] = {}, q_strides[3] = {}, kv_shape[2] = {}, cache_shape[3] = {}, w_shape[1] = {kMlaL}, cs_shape[2] = {}, off_shape[1] = {},
          len_shape[1] = {}, pt_shape[2] = {};

  MlaBatch(int64_t tokens, int64_t hq, int64_t page_size, DType cache_type, int64_t q_nope, uint64_t seed)
      : t(tokens), heads(hq), page(page_size), nope(q_nope), cache(cache_type) {
    std::mt19937_64 rng(seed);
    if (t <= 64) {  // decode: one token a sequence
      b = t;
      lens.assign(size_t(b), 1);
      for (int64_t i = 0; i < b; ++i) cache_len.push_back(1000 + int64_t(rng() % 7000));
    } else {  // prefill: sequences of 2048 tokens after 0..3 Ki cached ones
      b = std::max<int64_t>(1, t / 2048);
      for (int64_t i = 0; i < b; ++i) {
        lens.push_back(t / b + (i < t % b ? 1 : 0));
        cache_len.push_back(int64_t(rng() % 4) * 1024);
      }
    }
    row_offsets.assign(1, 0);
    for (int64_t l : lens) row_offsets.push_back(row_offsets.back() + l);
    for (int64_t i = 0; i < b; ++i) {
      max_pages = std::max(max_pages, (cache_len[size_t(i)] + lens[size_t(i)] + page - 1) / page);
      max_pos = std::max(max_pos, cache_len[size_t(i)] + lens[size_t(i)]);
    }
    // Pages the call writes get distinct ids in shuffled order; the others (cached positions) id 0.
    table.assign(size_t(b * max_pages), 0);
    std::vector<int64_t*> written;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t k = cache_len[size_t(i)] / page; k <= (cache_len[size_t(i)] + lens[size_t(i)] - 1) / page; ++k)
        written.push_back(&table[size_t(i * max_pages + k)]);
    num_pages = int64_t(written.size());
    std::vector<int64_t> ids(written.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    for (size_t k = 0; k < written.size(); ++k) *written[k] = ids[k];
    for (int64_t i = 0; i < b; ++i)
      for (int64_t k = 0; k < lens[size_t(i)]; ++k) {
        pos.push_back(cache_len[size_t(i)] + k);
        seq.push_back(i);
      }
  }
  size_t q_bytes() const { return size_t(t * heads * kMlaR * 2); }          // the rope parts a call moves
  size_t q_alloc_bytes() const { return size_t(t * heads * (nope + kMlaR) * 2); }  // the q projection
  bool fp8() const { return dtype_bits(cache) == 8; }
  size_t kv_bytes() const { return size_t(t * (kMlaL + kMlaR) * 2); }
  size_t cache_bytes() const { return size_t(num_pages * page * (kMlaL + kMlaR) * (dtype_bits(cache) / 8)); }
  // Bytes a call must move.
  double moved() const {
    return 2.0 * double(q_bytes()) + double(kv_bytes()) + double(t * (kMlaL + kMlaR) * (dtype_bits(cache) / 8)) +
           double(t * kMlaR * 4) + double(kMlaL * 2) + double((2 * b + 1) * 4) + double(num_pages * 4);
  }
  // Token k's cache row: byte offset in a set.
  size_t cache_row(int64_t k) const {
    const int64_t p = pos[size_t(k)], id = table[size_t(seq[size_t(k)] * max_pages + p / page)];
    return size_t((id * page + p % page) * (kMlaL + kMlaR) * (dtype_bits(cache) / 8));
  }
};

inline DLTensor mla_tensor(void* data, DLDevice d, DLDataType dt, int ndim, int64_t* shape) {
  DLTensor x = tensor(data, d, DType::kF32, ndim, shape);
  x.dtype = dt;  // int32 indices too (no fusednorm DType)
  return x;
}
constexpr DLDataType kInt32{kDLInt, 32, 1};
constexpr float kMlaKScale = 1.0f / 80.0f;  // the FP8 caches' static scale

// The tensors of one call on set s (q rotated in place).
struct MlaTensors {
  DLTensor q, kv, w, cs, off, len, pt, cache, ks;
  bool has_ks = false;
  MlaTensors(MlaBatch& m, DLDevice d, size_t s) {
    const DLDataType bf16 = dl_from_dtype(DType::kBF16);
    q = mla_tensor(m.q.data() + s * m.q_stride + m.nope * 2, d, bf16, 3, m.q_shape);
    q.strides = m.q_strides;
    kv = mla_tensor(m.kv.data() + s * m.kv_stride, d, bf16, 2, m.kv_shape);
    w = mla_tensor(m.w.data(), d, bf16, 1, m.w_shape);
    cs = mla_tensor(m.cs.data(), d, dl_from_dtype(DType::kF32), 2, m.cs_shape);
    off = mla_tensor(m.off.data(), d, kInt32, 1, m.off_shape);
    len = mla_tensor(m.len.data(), d, kInt32, 1, m.len_shape);
    pt = mla_tensor(m.pt.data(), d, kInt32, 2, m.pt_shape);
    cache = mla_tensor(m.cache_buf.data() + s * m.cache_stride, d, dl_from_dtype(m.cache), 3, m.cache_shape);
    static int64_t one[1] = {1};
    ks = mla_tensor(m.ks.data(), d, dl_from_dtype(DType::kF32), 1, one);
    has_ks = m.fp8();
  }
  fusednorm_status call(void* stream) {
    return fusednorm_mla_rope_rmsnorm_quant(&q, nullptr, &kv, &w, &cs, nullptr, &off, &len, &pt, &cache,
                                            has_ks ? &ks : nullptr, nullptr, nullptr, stream);
  }
};

// Set 0 by the library, a sample of its tokens by the reference (as sequences of one token with
// explicit positions); q rows and cache rows compared.
inline Run::Result mla_check(Run& run, MlaBatch& m) {
  Run::Result res;
  Device& dev = run.dev;
  const std::vector<int64_t> tokens = Run::sample_rows(m.t, run.o.check_rows);
  // qrow: a token's bytes of the q projection (its heads' nope and rope parts).
  const int64_t n = int64_t(tokens.size()), qrow = m.heads * (m.nope + kMlaR) * 2, kvrow = (kMlaL + kMlaR) * 2;
  const int64_t crow = (kMlaL + kMlaR) * (dtype_bits(m.cache) / 8);
  res.checked = int(n);
  std::vector<uint8_t> q(size_t(n * qrow)), kv(size_t(n * kvrow)), w(kMlaL * 2), cs(size_t(m.max_pos * kMlaR * 4));
  for (int64_t k = 0; k < n; ++k) {
    dev.download(q.data() + k * qrow, m.q.data() + tokens[size_t(k)] * qrow, size_t(qrow));
    dev.download(kv.data() + k * kvrow, m.kv.data() + tokens[size_t(k)] * kvrow, size_t(kvrow));
  }
  dev.download(w.data(), m.w.data(), w.size());
  dev.download(cs.data(), m.cs.data(), cs.size());
  {
    MlaTensors x(m, dev.dl_device(), 0);
    if (!run.timed_check_call([&] { return x.call(dev.stream()); }, &res)) return res;
  }
  // The reference on the sampled tokens: n sequences of one token each.
  std::vector<int32_t> pos(static_cast<size_t>(n)), off(static_cast<size_t>(n + 1)),
      pt(static_cast<size_t>(n * m.max_pages));
  for (int64_t k = 0; k <= n; ++k) off[size_t(k)] = int32_t(k);
  for (int64_t k = 0; k < n; ++k) {
    pos[size_t(k)] = int32_t(m.pos[size_t(tokens[size_t(k)])]);
    for (int64_t j = 0; j < m.max_pages; ++j)
      pt[size_t(k * m.max_pages + j)] = int32_t(m.table[size_t(m.seq[size_t(tokens[size_t(k)])] * m.max_pages + j)]);
  }
  std::vector<uint8_t> cache(m.cache_bytes());
  int64_t qs[3] = {n, m.heads, kMlaR}, qst[3] = {m.heads * (m.nope + kMlaR), m.nope + kMlaR, 1}, kvs[2] = {n, kMlaL + kMlaR}, ws[1] = {kMlaL}, css[2] = {m.max_pos, kMlaR},
          ps[1] = {n}, os[1] = {n + 1}, pts[2] = {n, m.max_pages}, cas[3] = {m.num_pages, m.page, kMlaL + kMlaR};
  const DLDevice host{kDLCPU, 0};
  const float ks_value = kMlaKScale;
  int64_t ks_shape[1] = {1};
  DLTensor tq = mla_tensor(q.data() + m.nope * 2, host, dl_from_dtype(DType::kBF16), 3, qs),
           tkv = mla_tensor(kv.data(), host, dl_from_dtype(DType::kBF16), 2, kvs),
           tw = mla_tensor(w.data(), host, dl_from_dtype(DType::kBF16), 1, ws),
           tcs = mla_tensor(cs.data(), host, dl_from_dtype(DType::kF32), 2, css),
           tpos = mla_tensor(pos.data(), host, kInt32, 1, ps), toff = mla_tensor(off.data(), host, kInt32, 1, os),
           tpt = mla_tensor(pt.data(), host, kInt32, 2, pts),
           tcache = mla_tensor(cache.data(), host, dl_from_dtype(m.cache), 3, cas),
           tks = mla_tensor(const_cast<float*>(&ks_value), host, dl_from_dtype(DType::kF32), 1, ks_shape);
  tq.strides = qst;
  const fusednorm_status st = reference::mla_rope_rmsnorm_quant(&tq, nullptr, &tkv, &tw, &tcs, &tpos, &toff, nullptr,
                                                                &tpt, &tcache, m.fp8() ? &tks : nullptr, nullptr,
                                                                nullptr);
  if (st != FUSEDNORM_SUCCESS) {
    res.ok = false;
    res.error = std::string("reference: ") + fusednorm_status_string(st) + ": " + fusednorm_last_error();
    return res;
  }
  std::vector<uint8_t> got(size_t(std::max(qrow, crow)));
  int reported = 0;
  auto compare = [&](const char* what, int64_t k, const uint8_t* want, int64_t bytes) {
    for (int64_t i = 0; i < bytes; ++i)
      if (got[size_t(i)] != want[i]) {
        ++res.mismatches;
        if (reported++ < 3)
          fprintf(stderr, "  MISMATCH mla T=%" PRId64 " Hq=%" PRId64 " page %" PRId64 " %s: token %" PRId64 " %s byte %" PRId64
                          ": library 0x%02x, reference 0x%02x\n",
                  m.t, m.heads, m.page, dtype_name(m.cache), tokens[size_t(k)], what, i, got[size_t(i)], want[i]);
      }
  };
  for (int64_t k = 0; k < n; ++k) {
    dev.download(got.data(), m.q.data() + tokens[size_t(k)] * qrow, size_t(qrow));
    compare("q", k, q.data() + k * qrow, qrow);
    dev.download(got.data(), m.cache_buf.data() + m.cache_row(tokens[size_t(k)]), size_t(crow));
    compare("cache row", k, cache.data() + m.cache_row(tokens[size_t(k)]), crow);
  }
  return res;
}

// One case: buffers, check, timing, its row of the table.
inline void mla_case(Run& run, int64_t tokens, int64_t heads, int64_t page, DType cache, int64_t nope) {
  Device& dev = run.dev;
  MlaBatch m(tokens, heads, page, cache, nope, run.o.seed ^ uint64_t(tokens * 131 + heads * 7 + page));
  char mode[48];
  if (nope == 0) snprintf(mode, sizeof mode, "Hq%" PRId64 " page%" PRId64, heads, page);
  else snprintf(mode, sizeof mode, "Hq%" PRId64 " page%" PRId64 " q%" PRId64, heads, page, nope + kMlaR);
  Run::Result r;
  m.q_stride = round64(m.q_alloc_bytes());
  m.kv_stride = round64(m.kv_bytes());
  m.cache_stride = round64(m.cache_bytes());
  // Sets: enough that the bytes a call touches (not the cache's untouched slots), summed over the
  // sets, exceed rotate_bytes.
  const size_t per_set = m.q_stride + m.kv_stride + m.cache_stride;
  const size_t touched = round64(m.q_bytes()) + m.kv_stride + size_t(m.t * (kMlaL + kMlaR) * (dtype_bits(cache) / 8));
  m.sets = std::min<size_t>(65536, std::max<size_t>(1, (run.rotate_bytes + touched - 1) / touched));
  m.sets = std::min(m.sets, std::max<size_t>(1, size_t(run.o.budget_gib * kGiB / double(per_set))));
  m.q_shape[0] = m.t, m.q_shape[1] = m.heads, m.q_shape[2] = kMlaR;
  m.q_strides[0] = m.heads * (m.nope + kMlaR), m.q_strides[1] = m.nope + kMlaR, m.q_strides[2] = 1;
  m.kv_shape[0] = m.t, m.kv_shape[1] = kMlaL + kMlaR;
  m.cache_shape[0] = m.num_pages, m.cache_shape[1] = m.page, m.cache_shape[2] = kMlaL + kMlaR;
  m.cs_shape[0] = m.max_pos, m.cs_shape[1] = kMlaR;
  m.off_shape[0] = m.b + 1, m.len_shape[0] = m.b, m.pt_shape[0] = m.b, m.pt_shape[1] = m.max_pages;
  try {
    m.q = Buffer(dev, m.sets * m.q_stride);
    m.kv = Buffer(dev, m.sets * m.kv_stride);
    m.cache_buf = Buffer(dev, m.sets * m.cache_stride);
    m.w = Buffer(dev, kMlaL * 2);
    m.cs = Buffer(dev, size_t(m.max_pos * kMlaR * 4));
    m.off = Buffer(dev, size_t(m.b + 1) * 4);
    m.len = Buffer(dev, size_t(std::max<int64_t>(m.b, 1)) * 4);
    m.pt = Buffer(dev, size_t(std::max<int64_t>(m.b * m.max_pages, 1)) * 4);
    m.ks = Buffer(dev, 4);
  } catch (const std::bad_alloc&) {
    fprintf(stderr, "note: skipping mla T=%" PRId64 " %s: allocation failed\n", tokens, mode);
    ++run.skipped;
    ++run.cases_done;
    return;
  }
  fill_random(dev, m.q.data(), m.sets, m.q_stride, m.t * m.heads, m.nope + kMlaR, DType::kBF16, run.x_pool, 11);
  fill_random(dev, m.kv.data(), m.sets, m.kv_stride, m.t, kMlaL + kMlaR, DType::kBF16, run.x_pool, 12);
  fill_random(dev, m.w.data(), 1, 0, 1, kMlaL, DType::kBF16, run.w_pool, 13);
  dev.fill_bytes(m.cache_buf.data(), 0, m.cache_buf.bytes());
  std::vector<float> cs(size_t(m.max_pos * kMlaR));
  for (int64_t p = 0; p < m.max_pos; ++p)
    for (int64_t j = 0; j < kMlaR / 2; ++j) {
      const double theta = double(p) * std::pow(10000.0, -2.0 * double(j) / double(kMlaR));
      cs[size_t(p * kMlaR + 2 * j)] = float(std::cos(theta));
      cs[size_t(p * kMlaR + 2 * j + 1)] = float(std::sin(theta));
    }
  dev.upload(m.cs.data(), cs.data(), cs.size() * 4);
  dev.upload(m.ks.data(), &kMlaKScale, 4);
  auto upload_i32 = [&](Buffer& dst, const std::vector<int64_t>& v) {
    std::vector<int32_t> x(v.begin(), v.end());
    if (!x.empty()) dev.upload(dst.data(), x.data(), x.size() * 4);
  };
  upload_i32(m.off, m.row_offsets);
  upload_i32(m.len, m.cache_len);
  upload_i32(m.pt, m.table);
  dev.synchronize();
  r = mla_check(run, m);
  if (r.ok) {
    fusednorm_status bad = FUSEDNORM_SUCCESS;
    std::vector<MlaTensors> x;
    for (size_t s = 0; s < m.sets; ++s) x.emplace_back(m, dev.dl_device(), s);
    size_t next = 0;
    auto call = [&] {
      const fusednorm_status st = x[next].call(dev.stream());
      next = next + 1 == m.sets ? 0 : next + 1;
      if (st != FUSEDNORM_SUCCESS && bad == FUSEDNORM_SUCCESS) bad = st;
    };
    run.time_case(call, double(m.q_bytes() + m.kv_bytes()), m.sets, &r);
    if (bad != FUSEDNORM_SUCCESS) {
      r.ok = false;
      r.error = std::string(fusednorm_status_string(bad)) + " in the timed calls: " + fusednorm_last_error();
    }
    r.bytes = m.moved();
  }
  run.tally(r);
  run.print_row("mla", mode, DType::kBF16, cache, tokens, kMlaL + kMlaR, m.sets, r, [&](Json& j) {
    j["heads"] = heads;
    j["page_size"] = page;
    j["sequences"] = m.b;
    j["L"] = kMlaL;
    j["R"] = kMlaR;
    j["q_nope"] = nope;
    j["k_scale"] = m.fp8() ? double(kMlaKScale) : 1.0;
  });
}

inline int mla_case_count(const Options& o) {
  return int(o.mla_tokens().size() * o.mla_heads.size() * o.mla_pages.size() * o.mla_cache.size() *
             o.mla_q_nope.size());
}

inline void run_mla_cases(Run& run) {
  for (DType cache : run.o.mla_cache)
    for (int64_t heads : run.o.mla_heads)
      for (int64_t page : run.o.mla_pages)
        for (int64_t nope : run.o.mla_q_nope)
          for (int64_t t : run.o.mla_tokens()) mla_case(run, t, heads, page, cache, nope);
}

}  // namespace bench
}  // namespace fusednorm
