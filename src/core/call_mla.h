// The validated call of fusednorm_mla_rope_rmsnorm_quant (a plain struct, host and device, 64-bit
// sizes and byte strides; core/call.h holds the other operations'), and the one function that
// turns a token into its sequence, position and cache slot (mla_locate): validation on the CPU,
// the reference, the CPU backend and the GPU kernel all call it.
#pragma once

#include <stdint.h>
#include <string.h>

#include "core/call.h"
#include "core/dtype.h"
#include "math/quant_math.h"

namespace fusednorm {

// A 1-D run of int32 or int64 indices (data == nullptr: absent); stride in bytes.
struct IndexView {
  const char* data = nullptr;
  int64_t stride = 0;
  int32_t is64 = 0;
  int32_t reserved = 0;
};

FN_HD int64_t load_index(const IndexView& v, int64_t i) {
  const char* p = v.data + i * v.stride;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return v.is64 ? *reinterpret_cast<const int64_t*>(p) : int64_t(*reinterpret_cast<const int32_t*>(p));
#else
  if (v.is64) {
    int64_t x;
    memcpy(&x, p, 8);
    return x;
  }
  int32_t x;
  memcpy(&x, p, 4);
  return x;
#endif
}

struct MlaCall {
  int64_t tokens = 0;     // T
  int64_t heads = 0;      // Hq
  int64_t rank = 0;       // L (normalized part of a kv row)
  int64_t rope = 0;       // R (rotated part; q's last dimension)
  int64_t batch = 0;      // B
  int64_t max_pages = 0;  // page_table's second dimension
  int64_t num_pages = 0;
  int64_t page_size = 0;
  int64_t max_pos = 0;    // cos_sin rows
  DType in_type = DType::kInvalid;     // q, q_out, kv
  DType w_type = DType::kInvalid;      // weight
  DType cs_type = DType::kInvalid;     // cos_sin: f32 or bf16
  DType cache_type = DType::kInvalid;  // bf16, f16, f32 or FP8
  int32_t neox = 0;                    // half-split pairs
  float eps = 0, weight_offset = 0;
  const char* q = nullptr;
  int64_t q_stride_t = 0, q_stride_h = 0;    // bytes
  char* q_out = nullptr;                     // q itself when rotated in place
  int64_t qo_stride_t = 0, qo_stride_h = 0;  // bytes
  const char* kv = nullptr;
  int64_t kv_stride = 0;
  const char* weight = nullptr;
  const char* cos_sin = nullptr;
  int64_t cs_stride = 0;
  IndexView positions;  // data == nullptr: positions from cache_len
  IndexView row_offsets;
  IndexView cache_len;
  IndexView page_table;           // row b: data + b * stride; entries of 4 or 8 bytes
  int64_t page_table_row_stride = 0;
  char* cache = nullptr;
  int64_t cache_page_stride = 0, cache_slot_stride = 0;  // bytes
  const float* k_scale = nullptr;  // nullptr: 1 (read at any alignment)
  int32_t* invalid_tokens = nullptr;
};

// Where a token goes. seq: its sequence b; pos: its position (cos/sin row, cache position);
// page: the page id; slot: pos % page_size.
struct MlaSlot {
  int64_t seq = 0, pos = 0, page = 0, slot = 0;
};

enum class MlaLocate : int32_t {
  kOk = 0,
  kNoSequence = 1,  // no b with row_offsets[b] <= t < row_offsets[b + 1]
  kBadPosition = 2, // pos outside [0, max_pos)
  kBadPageIndex = 3,// pos / page_size >= max_pages
  kBadPage = 4,     // page id outside [0, num_pages)
};

// The first reads of locating token t, issued together (no value depends on another): the
// sequence b0 that t would belong to were all sequences equally long (decode, one token each; a
// prefill of equal lengths), its bounds, and its cache_len (when positions are not given).
struct MlaGuess {
  int64_t b = 0, start = 0, end = 0, len = 0;
  int32_t valid = 0;  // b0 was computed and read (B >= 1, T and B below 2^31)
};
FN_HD MlaGuess mla_guess(const MlaCall& c, int64_t t) {
  MlaGuess g;
  if (c.batch < 1 || c.tokens > INT32_MAX || c.batch > INT32_MAX) return g;
  // t < T: b0 < B, so row_offsets[b0 + 1] exists. A 32-bit division where t * B fits (every call
  // but the largest; the GPU kernel's thread 0 waits on it).
  const int64_t tb = t * c.batch;
  g.b = tb <= int64_t(UINT32_MAX) ? int64_t(uint32_t(tb) / uint32_t(c.tokens)) : tb / c.tokens;
  g.start = load_index(c.row_offsets, g.b);
  g.end = load_index(c.row_offsets, g.b + 1);
  if (c.positions.data == nullptr) g.len = load_index(c.cache_len, g.b);
  g.valid = 1;
  return g;
}

// Token t's sequence and position (out->seq, out->pos), every index value read checked, from the
// reads of mla_guess. The sequence is b0 when row_offsets[b0] <= t < row_offsets[b0 + 1]; else the
// last b whose row_offsets[b] <= t (a binary search), confirmed by t < row_offsets[b + 1]. For
// non-decreasing offsets (the CPU rejects others) both give the one b with t in its range.
FN_HD MlaLocate mla_position(const MlaCall& c, int64_t t, const MlaGuess& g, MlaSlot* out) {
  int64_t b = g.b, start = g.start, len = g.len;
  if (!(g.valid && start <= t && t < g.end)) {
    int64_t lo = 0, hi = c.batch;  // the first k in [0, B] with row_offsets[k] > t is in [lo, hi]
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (load_index(c.row_offsets, mid) > t) hi = mid;
      else lo = mid + 1;
    }
    b = lo - 1;
    if (b < 0 || b >= c.batch) return MlaLocate::kNoSequence;
    start = load_index(c.row_offsets, b);
    if (!(start <= t && t < load_index(c.row_offsets, b + 1))) return MlaLocate::kNoSequence;
    if (c.positions.data == nullptr) len = load_index(c.cache_len, b);
  }
  int64_t pos;
  if (c.positions.data != nullptr) {
    pos = load_index(c.positions, t);
  } else {
    if (len < 0 || len >= c.max_pos) return MlaLocate::kBadPosition;
    pos = len + (t - start);  // both in [0, 2^63 / 2): no overflow
  }
  if (pos < 0 || pos >= c.max_pos) return MlaLocate::kBadPosition;
  out->seq = b;
  out->pos = pos;
  return MlaLocate::kOk;
}

// The page-table read of a token that mla_position placed: the entry's index and the page id as
// read (entry_ok == 0: the index is past the table's row, nothing read). mla_page_check then checks
// the page id; a kernel may issue the read, work, and check later.
struct MlaPageRead {
  int64_t index = 0, page = 0;
  int32_t entry_ok = 0;
};
FN_HD MlaPageRead mla_page_read(const MlaCall& c, const MlaSlot& s) {
  MlaPageRead r;
  const int64_t pos = s.pos;
  r.index = pos <= int64_t(UINT32_MAX) && c.page_size <= int64_t(UINT32_MAX)
                ? int64_t(uint32_t(pos) / uint32_t(c.page_size))
                : pos / c.page_size;
  if (r.index >= c.max_pages) return r;
  IndexView row = c.page_table;
  row.data += s.seq * c.page_table_row_stride;
  r.page = load_index(row, r.index);
  r.entry_ok = 1;
  return r;
}
// The page and slot from a page-table read (out->page, out->slot), the page id checked.
FN_HD MlaLocate mla_page_check(const MlaCall& c, const MlaPageRead& r, MlaSlot* out) {
  if (!r.entry_ok) return MlaLocate::kBadPageIndex;
  if (r.page < 0 || r.page >= c.num_pages) return MlaLocate::kBadPage;
  out->page = r.page;
  out->slot = out->pos - r.index * c.page_size;
  return MlaLocate::kOk;
}
// The page and slot of a token that mla_position placed, the page id checked.
FN_HD MlaLocate mla_page(const MlaCall& c, MlaSlot* out) { return mla_page_check(c, mla_page_read(c, *out), out); }

// Token t's sequence, position and slot (mla_position, then mla_page). On the GPU, where validation
// cannot read the index values, this is the only check: a token that is not kOk is skipped.
FN_HD MlaLocate mla_locate(const MlaCall& c, int64_t t, const MlaGuess& g, MlaSlot* out) {
  const MlaLocate st = mla_position(c, t, g, out);
  return st != MlaLocate::kOk ? st : mla_page(c, out);
}
FN_HD MlaLocate mla_locate(const MlaCall& c, int64_t t, MlaSlot* out) { return mla_locate(c, t, mla_guess(c, t), out); }

// The cache row of a located token.
FN_HD char* mla_cache_row(const MlaCall& c, const MlaSlot& s) {
  return c.cache + s.page * c.cache_page_stride + s.slot * c.cache_slot_stride;
}

// The static scale's value (1 without one), read at any alignment.
FN_HD float mla_k_scale(const MlaCall& c) {
  if (c.k_scale == nullptr) return 1.0f;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  const uint8_t* p = reinterpret_cast<const uint8_t*>(c.k_scale);
  return math::float_of(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
#else
  float s;
  memcpy(&s, c.k_scale, sizeof s);
  return s;
#endif
}

}  // namespace fusednorm
