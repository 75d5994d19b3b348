// Test helper for mla_rope_rmsnorm_quant: one call's tensors built from a spec and a seed (the
// same spec and seed build the same bytes, so a case is cloned by building it again), the call by
// the library or the reference, byte comparison of every allocation, the slots a call owns, and a
// random case mix (tests/cpu, tests/gpu, the bench).
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_tensor.h"
#include "fusednorm/fusednorm.h"
#include "reference/reference.h"

namespace fusednorm {
namespace test {

enum MlaDist { kMlaNormal = 0, kMlaUniform = 1, kMlaSparse = 2, kMlaConstant = 3 };

struct MlaSpec {
  DType in = DType::kBF16, w = DType::kBF16, cs = DType::kF32, cache = DType::kBF16;
  int64_t heads = 16, l = 512, r = 64, page_size = 16;
  bool neox = false;
  bool use_positions = false;  // explicit positions [T] (else cache_len [B])
  bool in_place = false;       // q rotated in place (q_out NULL)
  bool idx64 = false;          // int64 index tensors (else int32)
  int64_t q_nope = 0;          // q is the last R of [T, Hq, q_nope + R]
  int64_t kv_pad = 0;          // elements between kv rows beyond L + R
  int64_t layers = 1;          // the cache is the last layer of [pages, layers, page_size, L + R]
  float k_scale = 0.0f;        // 0: k_scale NULL
  float eps = 1e-6f, weight_offset = 0.0f;
  int dist = kMlaNormal;
  std::vector<int64_t> seq_lens = {1}, cache_lens = {0};
  int64_t spare_pages = 2;  // pages no token addresses (their bytes must stay untouched)
  int64_t min_max_pos = 0;  // cos_sin has at least this many rows
  uint64_t seed = 1;

  int64_t tokens() const { return std::accumulate(seq_lens.begin(), seq_lens.end(), int64_t(0)); }
  int64_t batch() const { return int64_t(seq_lens.size()); }
  std::string describe() const {
    std::ostringstream o;
    o << "mla in=" << dtype_name(in) << " w=" << dtype_name(w) << " cs=" << dtype_name(cs)
      << " cache=" << dtype_name(cache) << " Hq=" << heads << " L=" << l << " R=" << r << " page=" << page_size
      << (neox ? " neox" : " interleaved") << (use_positions ? " positions" : " cache_len")
      << (in_place ? " in-place" : "") << (idx64 ? " int64" : " int32") << " nope=" << q_nope << " kv_pad=" << kv_pad
      << " layers=" << layers << " k_scale=" << k_scale << " eps=" << eps << " offset=" << weight_offset
      << " dist=" << dist << " seed=" << seed << " seqs=[";
    for (size_t b = 0; b < seq_lens.size(); ++b) o << (b ? " " : "") << seq_lens[b] << "@" << cache_lens[b];
    return o.str() + "]";
  }
};

// An int32/int64 tensor over a HostTensor of bytes (poisoned like every test tensor).
class IndexTensor {
 public:
  IndexTensor(const std::vector<int64_t>& shape, bool is64) : is64_(is64), shape_(shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    bytes_ = std::make_unique<HostTensor>(DType::kI8, std::vector<int64_t>{std::max<int64_t>(n, 1) * (is64 ? 8 : 4)});
    dl_ = *bytes_->dl();
    dl_.dtype = DLDataType{kDLInt, uint8_t(is64 ? 64 : 32), 1};
    dl_.ndim = int32_t(shape_.size());
    dl_.shape = shape_.data();
    dl_.strides = nullptr;
  }
  void set(int64_t i, int64_t v) {
    char* p = static_cast<char*>(dl_.data);
    if (is64_) memcpy(p + 8 * i, &v, 8);
    else {
      const int32_t w = int32_t(v);
      memcpy(p + 4 * i, &w, 4);
    }
  }
  DLTensor* dl() { return &dl_; }
  HostTensor& bytes() { return *bytes_; }

 private:
  bool is64_;
  std::vector<int64_t> shape_;
  std::unique_ptr<HostTensor> bytes_;
  DLTensor dl_{};
};

// A view [dims] with element strides into a HostTensor's data (at element offset `offset`).
inline DLTensor view_of(HostTensor& t, int64_t offset, std::vector<int64_t>* shape, std::vector<int64_t>* strides) {
  DLTensor d = *t.dl();
  d.data = static_cast<char*>(d.data) + offset * dtype_bits(t.type()) / 8;
  d.ndim = int32_t(shape->size());
  d.shape = shape->data();
  d.strides = strides->data();
  return d;
}

class MlaCase {
 public:
  explicit MlaCase(const MlaSpec& s) : spec(s) {
    std::mt19937_64 rng(s.seed);
    const int64_t t_count = s.tokens(), b_count = s.batch(), w = s.l + s.r;
    // Positions, pages: each sequence gets the pages its tokens write, distinct ids drawn from a
    // shuffled pool (with spare pages nobody addresses); unused page-table entries hold -7 (never
    // read: a read would fail validation).
    pos.clear();
    seq_of.clear();
    int64_t max_pages = 1;
    std::vector<std::vector<int64_t>> needed(static_cast<size_t>(b_count));
    for (int64_t b = 0; b < b_count; ++b) {
      for (int64_t k = 0; k < s.seq_lens[size_t(b)]; ++k) {
        const int64_t p = s.cache_lens[size_t(b)] + k;
        pos.push_back(p);
        seq_of.push_back(b);
        auto& nb = needed[size_t(b)];
        if (std::find(nb.begin(), nb.end(), p / s.page_size) == nb.end()) nb.push_back(p / s.page_size);
      }
      const int64_t end = s.cache_lens[size_t(b)] + s.seq_lens[size_t(b)];
      max_pages = std::max(max_pages, (end + s.page_size - 1) / s.page_size + int64_t(rng() % 2));
    }
    int64_t used = 0;
    for (auto& nb : needed) used += int64_t(nb.size());
    num_pages = used + s.spare_pages;
    std::vector<int64_t> pool(static_cast<size_t>(num_pages));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    page_ids.assign(size_t(b_count * max_pages), -7);
    size_t next = 0;
    for (int64_t b = 0; b < b_count; ++b)
      for (int64_t idx : needed[size_t(b)]) page_ids[size_t(b * max_pages + idx)] = pool[next++];
    int64_t max_pos = 1;
    for (int64_t p : pos) max_pos = std::max(max_pos, p + 1);
    max_pos += int64_t(rng() % 3);
    max_pos = std::max(max_pos, s.min_max_pos);

    // Float tensors.
    q_alloc = std::make_unique<HostTensor>(s.in, std::vector<int64_t>{t_count, s.heads, s.q_nope + s.r});
    q_shape = {t_count, s.heads, s.r};
    q_strides = {s.heads * (s.q_nope + s.r), s.q_nope + s.r, 1};
    q_view = view_of(*q_alloc, s.q_nope, &q_shape, &q_strides);
    if (!s.in_place) q_out = std::make_unique<HostTensor>(s.in, std::vector<int64_t>{t_count, s.heads, s.r});
    kv = std::make_unique<HostTensor>(s.in, std::vector<int64_t>{t_count, w}, s.kv_pad);
    weight = std::make_unique<HostTensor>(s.w, std::vector<int64_t>{s.l});
    cos_sin = std::make_unique<HostTensor>(s.cs, std::vector<int64_t>{max_pos, s.r});
    cache_alloc = std::make_unique<HostTensor>(s.cache, std::vector<int64_t>{num_pages, s.layers, s.page_size, w});
    cache_shape = {num_pages, s.page_size, w};
    cache_strides = {s.layers * s.page_size * w, w, 1};
    cache_view = view_of(*cache_alloc, (s.layers - 1) * s.page_size * w, &cache_shape, &cache_strides);
    if (s.k_scale != 0.0f) {
      k_scale = std::make_unique<HostTensor>(DType::kF32, std::vector<int64_t>{1});
      k_scale->set(0, 0, s.k_scale);
    }
    fill(rng);

    // Index tensors.
    row_offsets = std::make_unique<IndexTensor>(std::vector<int64_t>{b_count + 1}, s.idx64);
    int64_t off = 0;
    for (int64_t b = 0; b <= b_count; ++b) {
      row_offsets->set(b, off);
      if (b < b_count) off += s.seq_lens[size_t(b)];
    }
    if (s.use_positions) {
      positions = std::make_unique<IndexTensor>(std::vector<int64_t>{t_count}, s.idx64);
      for (int64_t t = 0; t < t_count; ++t) positions->set(t, pos[size_t(t)]);
    } else {
      cache_len = std::make_unique<IndexTensor>(std::vector<int64_t>{b_count}, s.idx64);
      for (int64_t b = 0; b < b_count; ++b) cache_len->set(b, s.cache_lens[size_t(b)]);
    }
    page_table = std::make_unique<IndexTensor>(std::vector<int64_t>{b_count, max_pages}, s.idx64);
    for (size_t i = 0; i < page_ids.size(); ++i) page_table->set(int64_t(i), page_ids[i]);
    this->max_pages = max_pages;
  }

  fusednorm_mla_rope_rmsnorm_quant_options options() const {
    fusednorm_mla_rope_rmsnorm_quant_options o;
    fusednorm_mla_rope_rmsnorm_quant_options_init(&o);
    o.rope_style = spec.neox ? FUSEDNORM_ROPE_NEOX : FUSEDNORM_ROPE_INTERLEAVED;
    o.eps = spec.eps;
    o.weight_offset = spec.weight_offset;
    return o;
  }
  DLTensor* q_out_dl() { return q_out ? q_out->dl() : nullptr; }
  DLTensor* pos_dl() { return positions ? positions->dl() : nullptr; }
  DLTensor* len_dl() { return cache_len ? cache_len->dl() : nullptr; }
  DLTensor* scale_dl() { return k_scale ? k_scale->dl() : nullptr; }

  fusednorm_status run_library() {
    const auto o = options();
    return fusednorm_mla_rope_rmsnorm_quant(&q_view, q_out_dl(), kv->dl(), weight->dl(), cos_sin->dl(), pos_dl(),
                                            row_offsets->dl(), len_dl(), page_table->dl(), &cache_view, scale_dl(),
                                            nullptr, &o, nullptr);
  }
  fusednorm_status run_reference() {
    const auto o = options();
    return reference::mla_rope_rmsnorm_quant(&q_view, q_out_dl(), kv->dl(), weight->dl(), cos_sin->dl(), pos_dl(),
                                             row_offsets->dl(), len_dl(), page_table->dl(), &cache_view,
                                             scale_dl(), nullptr, &o);
  }

  // The allocations a call may write, by name.
  std::vector<std::pair<const char*, const HostTensor*>> written() const {
    std::vector<std::pair<const char*, const HostTensor*>> v = {{"q", q_alloc.get()}, {"kv_cache", cache_alloc.get()}};
    if (q_out) v.push_back({"q_out", q_out.get()});
    return v;
  }
  // Token t's cache row as a byte offset into cache_alloc's storage (the test's own page map).
  size_t cache_row_byte(int64_t t) const { return cache_row_byte_at(seq_of[size_t(t)], pos[size_t(t)]); }
  // The row of position p of sequence b under the test's page map; SIZE_MAX where that map has no
  // page there.
  size_t cache_row_byte_at(int64_t b, int64_t p) const {
    if (b < 0 || p < 0 || p / spec.page_size >= max_pages) return SIZE_MAX;
    const int64_t page = page_ids[size_t(b * max_pages + p / spec.page_size)];
    if (page < 0 || page >= num_pages) return SIZE_MAX;
    const int64_t elem = page * cache_strides[0] + (p % spec.page_size) * cache_strides[1] +
                         (spec.layers - 1) * spec.page_size * (spec.l + spec.r);
    return size_t(cache_alloc->data_begin() - cache_alloc->storage().data()) +
           size_t(elem * dtype_bits(spec.cache) / 8);
  }

  MlaSpec spec;
  std::vector<int64_t> pos, seq_of, page_ids;
  int64_t num_pages = 0, max_pages = 0;
  std::unique_ptr<HostTensor> q_alloc, q_out, kv, weight, cos_sin, cache_alloc, k_scale;
  std::vector<int64_t> q_shape, q_strides, cache_shape, cache_strides;
  DLTensor q_view{}, cache_view{};
  std::unique_ptr<IndexTensor> row_offsets, positions, cache_len, page_table;

 private:
  void fill(std::mt19937_64& rng) {
    std::normal_distribution<float> normal(0.0f, 0.5f);
    std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
    std::uniform_int_distribution<int> sparse(0, 9);
    const float constant = 0.3f + float(rng() % 7) * 0.25f;
    auto value = [&]() {
      switch (spec.dist) {
        case kMlaUniform: return uni(rng);
        case kMlaSparse: return sparse(rng) == 0 ? 3.0f * normal(rng) : 0.0f;
        case kMlaConstant: return constant;
        default: return normal(rng);
      }
    };
    for (int64_t r = 0; r < q_alloc->rows(); ++r)
      for (int64_t i = 0; i < q_alloc->cols(); ++i) q_alloc->set(r, i, value());
    for (int64_t r = 0; r < kv->rows(); ++r)
      for (int64_t i = 0; i < kv->cols(); ++i) kv->set(r, i, value());
    for (int64_t i = 0; i < spec.l; ++i) weight->set(0, i, 0.5f + uni(rng) * 0.25f);
    // A real rope table: theta = p * 10000^(-2j/R).
    for (int64_t p = 0; p < cos_sin->rows(); ++p)
      for (int64_t j = 0; j < spec.r / 2; ++j) {
        const double theta = double(p) * pow(10000.0, -2.0 * double(j) / double(spec.r));
        cos_sin->set(p, 2 * j, float(cos(theta)));
        cos_sin->set(p, 2 * j + 1, float(sin(theta)));
      }
  }
};

// "" when the data bytes of every written allocation of a and b are equal and the guard bytes
// around them (the rest of the allocation) are still the poison 0xA5, else the first difference.
inline std::string compare_mla(const MlaCase& a, const MlaCase& b) {
  const auto wa = a.written(), wb = b.written();
  for (size_t k = 0; k < wa.size(); ++k) {
    const HostTensor& x = *wa[k].second;
    const HostTensor& y = *wb[k].second;
    if (x.data_bytes() != y.data_bytes()) return std::string(wa[k].first) + ": sizes differ";
    for (size_t i = 0; i < x.data_bytes(); ++i)
      if (x.data_begin()[i] != y.data_begin()[i]) {
        std::ostringstream o;
        o << wa[k].first << ": data byte " << i << " is 0x" << std::hex << int(x.data_begin()[i]) << " vs 0x"
          << int(y.data_begin()[i]);
        return o.str();
      }
    for (const HostTensor* t : {&x, &y}) {
      const size_t begin = size_t(t->data_begin() - t->storage().data()), end = begin + t->data_bytes();
      for (size_t i = 0; i < t->storage().size(); ++i)
        if ((i < begin || i >= end) && t->storage()[i] != 0xA5)
          return std::string(wa[k].first) + ": a guard byte outside the tensor was written";
    }
  }
  return "";
}

// Random specs of the case mix of issue 20: batch 1..16, cache_len 0..4096 biased to page
// boundaries, seq_len 1..256 (a quarter 1), Hq 16/64/128, page sizes 1/16/64/128, every input
// distribution, bf16 and FP8 caches; `budget`: at most this many q elements (T * Hq * R) a case.
inline MlaSpec random_mla_spec(std::mt19937_64& rng, int64_t budget) {
  MlaSpec s;
  s.seed = rng();
  auto pick = [&](auto list) { return list[rng() % list.size()]; };
  s.heads = pick(std::vector<int64_t>{16, 64, 128});
  s.page_size = pick(std::vector<int64_t>{1, 16, 64, 128});
  s.cache = pick(std::vector<DType>{DType::kBF16, DType::kBF16, DType::k_f8e4m3fn, DType::k_f8e4m3fnuz,
                                    DType::k_f8e5m2, DType::kF16, DType::kF32});
  s.in = pick(std::vector<DType>{DType::kBF16, DType::kBF16, DType::kF16, DType::kF32});
  s.w = pick(std::vector<DType>{s.in, DType::kF32});
  s.cs = pick(std::vector<DType>{DType::kF32, DType::kBF16});
  s.dist = int(rng() % 4);
  s.neox = rng() % 4 == 0;
  s.use_positions = rng() % 3 == 0;
  s.in_place = rng() % 2 == 0;
  s.idx64 = rng() % 2 == 0;
  s.q_nope = pick(std::vector<int64_t>{0, 0, 16, 128});
  s.kv_pad = pick(std::vector<int64_t>{0, 0, 8, 3});
  s.layers = pick(std::vector<int64_t>{1, 2});
  s.k_scale = s.cache == DType::kBF16 || s.cache == DType::kF16 ? pick(std::vector<float>{0.0f, 0.5f})
                                                                : pick(std::vector<float>{0.0f, 0.02f, 1.5f});
  s.weight_offset = rng() % 4 == 0 ? 1.0f : 0.0f;
  const int64_t batch = 1 + int64_t(rng() % 16);
  const int64_t max_tokens = std::max<int64_t>(1, budget / (s.heads * s.r));
  s.seq_lens.clear();
  s.cache_lens.clear();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t left = max_tokens - s.tokens() - (batch - b - 1);
    int64_t len = rng() % 4 == 0 ? 1 : 1 + int64_t(rng() % 256);
    len = std::max<int64_t>(1, std::min({len, left, std::max<int64_t>(1, 3 * max_tokens / batch)}));
    s.seq_lens.push_back(len);
    int64_t cl = int64_t(rng() % 4097);
    if (rng() % 2 == 0) cl = std::max<int64_t>(0, cl / s.page_size * s.page_size + int64_t(rng() % 3) - 1);
    s.cache_lens.push_back(cl);
  }
  return s;
}

}  // namespace test
}  // namespace fusednorm
