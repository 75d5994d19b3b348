// libFuzzer harness over the C ABI: each input decodes into one call of one operation (table
// kOps), run by libfusednorm.so and by the scalar reference on separate copies of the same
// buffers. Invariants (a broken one prints the call and traps):
//  - no crash, no sanitizer report;
//  - every byte that no element of a written tensor covers (guards, gaps, inputs) is unchanged;
//  - a failing call has a message and writes nothing;
//  - library and reference return the same status (and message); on success every byte of every
//    buffer is identical (not required where a written tensor overlaps another tensor or itself,
//    unless FUZZ_STRICT_OVERLAP=1: such calls may be rejected by a later overlap check).
// Input: a fixed-size Spec (visit() lists its fields), then value bytes. FUZZ_WRITE_SEEDS=dir
// writes the seed corpus (seeds.inc) and exits. tests/scripts/fuzz.sh runs it.
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <hwy/targets.h>
#include <tbb/global_control.h>

#include "core/dtype.h"
#include "core/elements.h"
#include "core/error.h"
#include "fusednorm/fusednorm.h"
#include "reference/reference.h"
#include "fuzz_call.h"

using namespace fusednorm;
using namespace fuzz;

namespace {

// The harness's own byte loops (building buffers, checking guards) carry no coverage: tracing
// their comparisons cost most of the run time and tells the fuzzer nothing about the library.
#define FUZZ_HARNESS_ONLY __attribute__((no_sanitize("coverage")))

// ------------------------------------------------------------------ the operations
struct SlotDesc {
  const char* name;
  std::vector<DType> likely;  // empty: the dtype of slot 0
};
struct OpDesc {
  const char* name;
  std::vector<SlotDesc> slots;
  void (*options)(Ctx&);
  bool (*absent)(const Ctx&, int slot);  // NULL in the call's ordinary form
  int (*written)(const Ctx&, int slot);  // 0: read, 1: read and written, 2: written
  std::vector<int64_t> (*shape)(const Ctx&, int slot);
  fusednorm_status (*lib)(Ctx&);
  fusednorm_status (*ref)(Ctx&);
};

std::vector<int64_t> full_shape(const Ctx& c, int64_t last) {
  std::vector<int64_t> v = c.lead;
  v.push_back(last);
  return v;
}
size_t struct_size(uint8_t sel, size_t good) {
  const size_t bad[] = {0, sizeof(size_t), good - 4, good + 8, size_t(-1)};
  return sel % 16 == 15 ? bad[(sel >> 4) % 5] : good;
}

const std::vector<DType> kAllTypes = [] {
  std::vector<DType> v;
  for (const auto& d : kDTypes) v.push_back(d.type);
  return v;
}();
const DLDataType kInvalidTypes[] = {{kDLFloat, 64, 1}, {kDLFloat, 32, 2}, {kDLFloat, 16, 0}, {kDLInt, 32, 1},
                                    {kDLUInt, 8, 1}, {kDLBfloat, 32, 1}, {kDLFloat8_e8m0fnu, 16, 1}, {99, 8, 1},
                                    {kDLFloat4_e2m1fn, 8, 1}, {kDLComplex, 64, 1}, {kDLInt, 8, 4}, {kDLFloat, 8, 1}};

void cast_options(Ctx& c) {
  const Spec& s = *c.s;
  fusednorm_cast_options_init(&c.co);
  c.opts_null = s.osel[0] % 16 == 14;
  c.co.struct_size = struct_size(s.osel[0], sizeof c.co);
  const int32_t rounding[] = {FUSEDNORM_E8M0_NEAREST, FUSEDNORM_E8M0_UP, FUSEDNORM_E8M0_NEAREST, FUSEDNORM_E8M0_UP};
  c.co.e8m0_rounding = pick(s.osel[1], rounding, int32_t(s.oraw[0]));
}

// eps and weight_offset of both operations: defaults, edges and invalid values.
const float kEpsChoices[] = {1e-6f, 1e-6f, 0.0f, 1e-5f, 1.0f, 1e30f, 1e-40f, -0.0f, -1e-6f, NAN, INFINITY};
const float kWoffChoices[] = {0.0f, 0.0f, 1.0f, -1.0f, 0.5f, 1e38f, 1e-40f, NAN, INFINITY};

// An options struct at its defaults, then the spec's NULL pointer and struct_size choices.
template <class O>
O& init_options(Ctx& c, O& o, void (*init)(O*)) {
  init(&o);
  c.opts_null = c.s->osel[0] % 16 == 14;
  o.struct_size = struct_size(c.s->osel[0], sizeof o);
  return o;
}

void rq_options(Ctx& c) {
  const Spec& s = *c.s;
  auto& o = init_options(c, c.ro, fusednorm_rmsnorm_quant_options_init);
  const float inf = INFINITY, nan = NAN, sub = 1e-40f;
  const int32_t norms[] = {0, 0, 0, 0, 0, 1, 1};
  const int32_t modes[] = {0, 0, 1, 1, 1, 2, 2, 2};
  const int32_t places[] = {0, 0, 0, 0, 0, 1, 1};
  const int64_t groups[] = {32, 32, 64, 64, 128, 128, 16, 256, 0, -32};
  const float ub[] = {inf, inf, 1.0f, 1e-3f, 448.0f, sub, 0.0f, -1.0f, nan};
  const float mins[] = {0.0f, 0.0f, 1e-3f, 1.0f, 1e30f, sub, -0.0f, -1.0f, nan, inf};
  const float qmax[] = {0.0f, 0.0f, 0.0f, 448.0f, 127.0f, 57344.0f, 240.0f, 1.0f, 0.5f, 1e-30f, 100.0f, -1.0f, nan, inf};
  o.norm = pick(s.osel[1], norms, int32_t(s.oraw[0] % 5) - 2);
  o.scale_mode = pick(s.osel[2], modes, int32_t(s.oraw[1] % 7) - 3);
  o.scale_placement = pick(s.osel[3], places, int32_t(s.oraw[2] % 5) - 2);
  o.reserved0 = s.osel[3] >= 0xF0 ? int32_t(s.oraw[3]) : 0;
  o.group_size = pick(s.osel[4], groups, int64_t(int32_t(s.oraw[3])));
  o.eps = pick(s.osel[5], kEpsChoices, f32_bits(s.oraw[0]));
  o.weight_offset = pick(s.osel[6], kWoffChoices, f32_bits(s.oraw[1]));
  o.scale_ub = pick(s.osel[7], ub, f32_bits(s.oraw[2]));
  o.min_scale = pick(s.osel[8], mins, f32_bits(s.oraw[3]));
  o.qmax = pick(s.osel[9], qmax, f32_bits(s.oraw[0] ^ s.oraw[2]));
}
bool rq_packed(const Ctx& c) { return !c.opts_null && c.ro.scale_placement == FUSEDNORM_SCALES_PACKED_ROW_END; }
int32_t rq_mode(const Ctx& c) { return c.opts_null ? FUSEDNORM_SCALE_DYNAMIC_ROW : c.ro.scale_mode; }

// ---- rmsnorm_fp4 (slots: input, residual, weight, output, scales; the global scale stays NULL).
void fp4_options(Ctx& c) {
  const Spec& s = *c.s;
  auto& o = init_options(c, c.fo, fusednorm_rmsnorm_fp4_options_init);
  const int32_t norms[] = {0, 0, 0, 0, 1, 1};
  const int32_t formats[] = {0, 0, 1, 1};
  const int32_t layouts[] = {0, 0, 1, 1};
  o.norm = pick(s.osel[1], norms, int32_t(s.oraw[0] % 5) - 2);
  o.format = pick(s.osel[2], formats, int32_t(s.oraw[1] % 5) - 2);
  o.scale_layout = pick(s.osel[3], layouts, int32_t(s.oraw[2] % 5) - 2);
  o.reserved0 = s.osel[3] >= 0xF0 ? int32_t(s.oraw[3]) : 0;
  o.eps = pick(s.osel[5], kEpsChoices, f32_bits(s.oraw[0]));
  o.weight_offset = pick(s.osel[6], kWoffChoices, f32_bits(s.oraw[1]));
}
// The scales' shape: row-major [..., H / block], or the swizzled tensor's bytes (1-D).
std::vector<int64_t> fp4_scales_shape(const Ctx& c) {
  const int32_t format = c.opts_null ? FUSEDNORM_FP4_NVFP4 : c.fo.format;
  const int64_t block = format == FUSEDNORM_FP4_MXFP4 ? 32 : 16;
  if (!c.opts_null && c.fo.scale_layout == FUSEDNORM_FP4_SCALES_SWIZZLED) {
    int64_t rows = 1, bytes = 0;
    for (int64_t d : c.lead) rows *= d;
    if (fusednorm_fp4_swizzled_size(rows, c.h, format, &bytes) != FUSEDNORM_SUCCESS || bytes > (int64_t(1) << 20))
      bytes = 512;
    return std::vector<int64_t>{bytes};
  }
  return full_shape(c, c.h / block > 0 ? c.h / block : 1);
}

#include "fuzz_qk.inc"  // qk_rmsnorm's options, shapes and its entries of kOps (FUZZ_QK_OPS)
#include "fuzz_mla.h"

const OpDesc kOps[] = {
    {"cast",
     {{"src", kAllTypes}, {"dst", kAllTypes}},
     cast_options,
     [](const Ctx&, int) { return false; },
     [](const Ctx&, int slot) { return slot == 1 ? 2 : 0; },
     [](const Ctx& c, int) { return full_shape(c, c.h); },
     [](Ctx& c) { return fusednorm_cast(tp(c, 0), tp(c, 1), c.opts_null ? nullptr : &c.co, nullptr); },
     [](Ctx& c) { return reference::cast(tp(c, 0), tp(c, 1), c.opts_null ? nullptr : &c.co); }},
    {"rmsnorm_quant",
     {{"input", {DType::kF32, DType::kF16, DType::kBF16}},
      {"residual", {}},
      {"weight", {DType::kF32, DType::kF16, DType::kBF16}},
      {"output", {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::k_f8e4m3, DType::k_f8e5m2, DType::k_f8e5m2fnuz, DType::kI8}},
      {"scales", {DType::kF32, DType::kF16, DType::kBF16, DType::kE8M0}}},
     rq_options,
     [](const Ctx& c, int slot) {
       return (slot == 1 && !c.residual) || (slot == 2 && !c.opts_null && c.ro.norm == FUSEDNORM_NORM_NONE) ||
              (slot == 4 && rq_packed(c));
     },
     [](const Ctx& c, int slot) {
       return slot == 1 ? 1 : slot == 3 || (slot == 4 && rq_mode(c) != FUSEDNORM_SCALE_STATIC) ? 2 : 0;
     },
     [](const Ctx& c, int slot) {
       switch (slot) {
         case 2: return std::vector<int64_t>{c.h};
         case 3: return full_shape(c, c.h + (rq_packed(c) ? 4 : 0));
         case 4: {
           if (rq_mode(c) == FUSEDNORM_SCALE_STATIC) return std::vector<int64_t>{1};
           const int64_t g = c.ro.group_size;
           const bool grp = rq_mode(c) == FUSEDNORM_SCALE_DYNAMIC_GROUP && g > 0 && c.h % g == 0;
           return full_shape(c, grp ? c.h / g : 1);
         }
         default: return full_shape(c, c.h);
       }
     },
     [](Ctx& c) {
       return fusednorm_rmsnorm_quant(tp(c, 0), tp(c, 1), tp(c, 2), tp(c, 3), tp(c, 4), c.opts_null ? nullptr : &c.ro,
                                      nullptr);
     },
     [](Ctx& c) {
       return reference::rmsnorm_quant(tp(c, 0), tp(c, 1), tp(c, 2), tp(c, 3), tp(c, 4), c.opts_null ? nullptr : &c.ro);
     }},
    // qk_rmsnorm (appended: existing inputs keep their operation)
    FUZZ_QK_OPS
    mla_op_desc(),  // tests/fuzz/fuzz_mla.h
    {"rmsnorm_fp4",
     {{"input", {DType::kF32, DType::kF16, DType::kBF16}},
      {"residual", {}},
      {"weight", {DType::kF32, DType::kF16, DType::kBF16}},
      {"output", {DType::k_f4e2m1}},
      {"scales", {DType::k_f8e4m3fn, DType::kE8M0}}},
     fp4_options,
     [](const Ctx& c, int slot) {
       return (slot == 1 && !c.residual) || (slot == 2 && !c.opts_null && c.fo.norm == FUSEDNORM_NORM_NONE);
     },
     [](const Ctx&, int slot) { return slot == 1 ? 1 : slot >= 3 ? 2 : 0; },
     [](const Ctx& c, int slot) {
       switch (slot) {
         case 2: return std::vector<int64_t>{c.h};
         case 4: return fp4_scales_shape(c);
         default: return full_shape(c, c.h);
       }
     },
     [](Ctx& c) {
       return fusednorm_rmsnorm_fp4(tp(c, 0), tp(c, 1), tp(c, 2), tp(c, 3), tp(c, 4), nullptr,
                                    c.opts_null ? nullptr : &c.fo, nullptr);
     },
     [](Ctx& c) {
       return reference::rmsnorm_fp4(tp(c, 0), tp(c, 1), tp(c, 2), tp(c, 3), tp(c, 4), nullptr,
                                     c.opts_null ? nullptr : &c.fo);
     }},
};
constexpr int kNumOps = int(sizeof kOps / sizeof kOps[0]);

// ------------------------------------------------------------------ building the tensors
const int64_t kInterestingH[] = {0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 96, 127, 128, 129,
                                 192, 255, 256, 257, 384, 512, 640, 768, 1000, 1024, 1536, 2048, 4096};

void logical_shape(Ctx& c) {
  const Spec& s = *c.s;
  const uint16_t hs = s.h;
  c.h = hs < 0x8000 ? kInterestingH[hs % (sizeof kInterestingH / sizeof kInterestingH[0])] : int64_t(hs & 0xFFF);
  const int r = s.rank % 3;  // lead dims: 0..2 (rank 1..3); ranks 0 and 10 come from shape_mut
  for (int i = 0; i < r; ++i) c.lead.push_back(s.dims[i] == 255 ? 0 : 1 + s.dims[i] % 6);
  // Keep buffers small (and the fuzzer fast): at most ~4Ki elements a tensor.
  for (size_t i = 0; i < c.lead.size(); ++i) {
    int64_t rows = 1;
    for (int64_t d : c.lead) rows *= d;
    if (rows * std::max<int64_t>(c.h, 1) <= 4096) break;
    c.lead[i] = 1;
  }
}

void make_strides(Tensor& t, const TensorSpec& ts, bool is_scales) {
  const int nd = int(t.shape.size());
  const int lay = ts.layout % 16;
  t.strides.assign(size_t(nd), 1);
  if (nd == 0) return;
  const bool sub = t.bits == 4;
  int64_t pad = lay >= kLayPadded && lay < kLayPermuted ? 1 + ts.pad % 17 : 0;
  if (sub) pad *= 2;
  for (int i = nd - 2; i >= 0; --i) {
    const int64_t n = std::max<int64_t>(t.shape[size_t(i + 1)], 1);
    t.strides[size_t(i)] = t.strides[size_t(i + 1)] * (n < (int64_t(1) << 20) ? n : 1) + (i == nd - 2 ? pad : 0);
  }
  const size_t k = size_t(ts.pad) % size_t(nd > 1 ? nd - 1 : 1);  // a leading dimension
  switch (lay) {
    case kLayPermuted: {  // leading dims stored in reverse order (dim 0 innermost)
      // (huge dims count as 1 here, as above: the harness's own arithmetic must not overflow)
      auto dim = [&](int i) { const int64_t n = t.shape[size_t(i)]; return n > 0 && n < (int64_t(1) << 20) ? n : 1; };
      int64_t st = t.strides[size_t(nd - 1)] * dim(nd - 1) + ts.pad % 3;
      for (int i = 0; i + 1 < nd; ++i) t.strides[size_t(i)] = st, st *= dim(i);
      break;
    }
    case kLayZero:
      if (nd >= 2) t.strides[k] = 0;
      break;
    case kLayNegative:
      if (nd >= 2) t.strides[k] = -t.strides[k];
      break;
    case kLayLastDim:
      if (is_scales && nd >= 2) {  // column-major scales: [rows, G] with strides {1, rows}
        int64_t rows = 1;
        auto dim = [&](int i) { const int64_t n = t.shape[size_t(i)]; return n > 0 && n < (int64_t(1) << 20) ? n : 1; };
        for (int i = 0; i < nd - 1; ++i) rows *= dim(i);
        int64_t s = 1;
        for (int i = nd - 2; i >= 0; --i) t.strides[size_t(i)] = s, s *= dim(i);
        t.strides[size_t(nd - 1)] = rows + ts.extra % 3;
      } else {
        const int64_t last[] = {2, 0, -1, 3};
        t.strides[size_t(nd - 1)] = last[ts.extra % 4];
      }
      break;
    case kLayHuge: {
      const int64_t huge[] = {INT64_MAX / 4 + 1, INT64_MAX, INT64_MAX / 2, int64_t(1) << 61};
      t.strides[k] = huge[ts.extra % 4];
      break;
    }
  }
}

// Bit offsets of the tensor's elements from dl.data (byte_offset included), or false when the
// span is not addressable in 64 bits (the library must reject) or too large for the harness.
enum class Span { kPlaced, kEmpty, kUnaddressable, kTooBig };
FUZZ_HARNESS_ONLY Span measure(Tensor& t) {
  const int nd = int(t.shape.size());
  if (nd == 0 || t.dl.shape == nullptr) return Span::kEmpty;
  for (int64_t d : t.shape)
    if (d <= 0) return Span::kEmpty;  // negative: rejected; zero: nothing addressed
  if (t.dl.byte_offset > uint64_t(INT64_MAX) / 8) return Span::kUnaddressable;
  __int128 lo = __int128(t.dl.byte_offset) * 8, hi = lo;
  const __int128 cap = __int128(1) << 100;
  __int128 elems = 1;
  for (int i = 0; i < nd; ++i) {
    __int128 st = t.strides[size_t(i)];
    if (t.dl.strides == nullptr) {  // compact
      st = 1;
      for (int j = i + 1; j < nd; ++j) st = std::min<__int128>(st * t.shape[size_t(j)], cap);
      if (st > INT64_MAX) return Span::kUnaddressable;
    }
    const __int128 lim = __int128(1) << 60;  // clamped factors: no __int128 overflow
    const __int128 term = std::min<__int128>(t.shape[size_t(i)] - 1, lim) * std::max(std::min(st, lim), -lim) * t.bits;
    (term < 0 ? lo : hi) += term;
    elems = std::min<__int128>(elems * t.shape[size_t(i)], cap);
  }
  if (hi > INT64_MAX || lo < INT64_MIN) return Span::kUnaddressable;
  hi += t.bits;
  const __int128 lo_b = lo >= 0 ? lo / 8 : -((-lo + 7) / 8), hi_b = (hi + 7) / 8;
  if (hi_b - lo_b > kMaxRegion || elems > kMaxElems || lo_b > (1 << 20) || lo_b < -(int64_t(1) << 40))
    return Span::kTooBig;
  t.lo = int64_t(lo_b);
  t.size = int64_t(hi_b - lo_b);
  return Span::kPlaced;
}

// Calls f(bit offset from dl.data) for each element of a placed tensor.
template <class F>
FUZZ_HARNESS_ONLY void for_each_elem(const Tensor& t, F f) {
  const int nd = int(t.shape.size());
  std::vector<int64_t> idx(size_t(nd), 0), st(size_t(nd), 0);
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; --i) {
    st[size_t(i)] = t.dl.strides ? t.strides[size_t(i)] : s;
    s *= t.shape[size_t(i)];
  }
  const int64_t base = int64_t(t.dl.byte_offset) * 8;
  for (;;) {
    int64_t off = base;
    for (int i = 0; i < nd; ++i) off += idx[size_t(i)] * st[size_t(i)] * t.bits;
    f(off);
    int i = nd - 1;
    while (i >= 0 && ++idx[size_t(i)] == t.shape[size_t(i)]) idx[size_t(i--)] = 0;
    if (i < 0) return;
  }
}

float special(uint64_t r) {
  const float v[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.4e38f, -3.4e38f, 1e-45f, 1.1754942e-38f,
                     65504.0f, 448.0f, 57344.0f, 127.5f, 6.0f, 1e-8f};
  return v[r % 16];
}

// Fills a placed tensor's elements (or its whole region for raw modes).
FUZZ_HARNESS_ONLY void fill_values(Ctx& c, int slot, uint8_t* region) {
  Tensor& t = c.t[slot];
  const TensorSpec& ts = c.s->t[slot];
  uint64_t rng = c.s->seed * 0x100000001B3ull + uint64_t(slot) * 0x9E3779B9ull;
  const int mode = ts.values % 8;
  const float scale = ldexpf(1.0f, int(ts.values >> 3) - 16);
  size_t k = size_t(ts.extra) * 7;
  for (int64_t i = 0; i < t.size; ++i)
    region[i] = mode == 5 && c.tail_n ? c.tail[k++ % c.tail_n] : uint8_t(splitmix(rng));
  if (mode == 0 || mode == 5 || t.type == DType::kInvalid || !t.placed) return;
  const float konst = (float(int64_t(splitmix(rng) % 2001) - 1000) / 500.0f) * scale;
  for_each_elem(t, [&](int64_t bit) {
    const uint64_t r = splitmix(rng);
    const float u = float(int64_t(r >> 40) - (int64_t(1) << 23)) / float(1 << 23);  // [-1, 1)
    float v;
    switch (mode) {
      case 1: v = u * scale; break;
      case 2: v = (u + float(int64_t(r & 0xFFFF) - 32768) / 32768.0f) * scale; break;
      case 3: v = fabsf(u) * scale; break;
      case 4: v = (r & 7) == 0 ? special(r >> 3) : u * scale; break;
      case 6: v = konst; break;
      default: v = (r & 31) == 0 ? u * scale : 0.0f; break;
    }
    const int64_t b = bit - t.lo * 8;
    store_code(t.type, reinterpret_cast<char*>(region) + (b / 8), (b % 8) / 4, encode<true>(t.type, v));
  });
}

// Builds every tensor and buffer; false: the input is skipped (the harness cannot host it).
FUZZ_HARNESS_ONLY bool build(Ctx& c, const OpDesc& op) {
  const Spec& s = *c.s;
  const int ns = int(op.slots.size());
  const bool all_gpu = s.flags % 32 >= 30;
  for (int i = 0; i < ns; ++i) {
    Tensor& t = c.t[i];
    const TensorSpec& ts = s.t[i];
    const int brk = ts.brk % 32;
    t.present = !op.absent(c, i) != (brk == kBrkToggleNull);
    if (!t.present) continue;
    const auto& likely = op.slots[size_t(i)].likely;
    DLDataType dt;
    if (ts.dtype < 160)
      dt = likely.empty() ? c.t[0].dl.dtype : dl_from_dtype(likely[ts.dtype % likely.size()]);
    else if (ts.dtype < 240)
      dt = dl_from_dtype(kAllTypes[ts.dtype % kAllTypes.size()]);
    else
      dt = kInvalidTypes[ts.dtype % (sizeof kInvalidTypes / sizeof kInvalidTypes[0])];
    t.type = dtype_from_dl(dt);
    t.bits = t.type == DType::kInvalid ? std::max(8, int(dt.bits)) : dtype_bits(t.type);
    t.shape = op.shape(c, i);
    const int m = ts.shape_mut % 16;
    if (m == 14 && !t.shape.empty()) t.shape[ts.pad % t.shape.size()] += 1;
    if (m == 15) {
      const size_t ranks[] = {0, 10, t.shape.size() + 1, t.shape.size() > 0 ? t.shape.size() - 1 : 2};
      const size_t r = ranks[ts.pad % 4];
      while (t.shape.size() > r) t.shape.erase(t.shape.begin());
      while (t.shape.size() < r) t.shape.insert(t.shape.begin(), 1);
    }
    if (brk == kBrkHugeShape && !t.shape.empty()) {
      const int64_t huge[] = {INT64_MAX, INT64_MAX / 2 + 1, int64_t(1) << 62, int64_t(1) << 32, -1, int64_t(1) << 40};
      const int64_t v = huge[ts.extra % 6];
      t.shape[ts.pad % t.shape.size()] = v;
      if (v == int64_t(1) << 32 && t.shape.size() >= 2) t.shape[(ts.pad + 1) % t.shape.size()] = v;
    }
    make_strides(t, ts, op.slots[size_t(i)].name == std::string("scales"));
    t.dl.ndim = int32_t(t.shape.size());
    t.dl.dtype = dt;
    t.dl.shape = brk == kBrkNullShape ? nullptr : t.shape.data();
    t.dl.strides = ts.layout % 16 == kLayNullStrides ? nullptr : t.strides.data();
    t.dl.device = {all_gpu ? (s.flags % 32 == 30 ? kDLCUDA : kDLROCM) : kDLCPU, 0};
    if (brk == kBrkDeviceType) {
      const int32_t types[] = {kDLCUDA, kDLROCM, kDLCUDAHost, kDLOpenCL, 0, 99, kDLCUDAManaged};
      t.dl.device.device_type = DLDeviceType(types[ts.extra % 7]);
    }
    if (brk == kBrkDeviceId) t.dl.device.device_id = int32_t(ts.extra % 3) - 1 + (ts.extra % 3 == 1 ? 7 : 0);
    t.dl.byte_offset = (ts.offset & 0x80) ? ts.offset & 7 : 0;
    if (brk == kBrkHugeOffset) {
      const uint64_t off[] = {uint64_t(INT64_MAX) / 8 + 1, UINT64_MAX, uint64_t(1) << 63, uint64_t(INT64_MAX) / 8 - 3};
      t.dl.byte_offset = off[ts.extra % 4];
    }
    const Span sp = measure(t);
    if (sp == Span::kTooBig) return false;
    t.empty = sp == Span::kEmpty;
    t.placed = sp == Span::kPlaced;
    if (!t.placed) t.lo = 0, t.size = 64;  // small guarded buffer; the call must not address it
    // Own buffer, or a region of an earlier slot's buffer (overlap).
    const int host = ts.pad % std::max(i, 1);
    if (brk == kBrkShare && i > 0 && c.t[host].present && c.t[host].placed && t.placed) {
      Buffer& b = c.bufs[size_t(c.t[host].buf)];
      t.buf = c.t[host].buf;
      t.pos = int64_t(ts.offset) % (b.size + 1);
      b.size = std::max(b.size, t.pos + t.size);
    } else {
      t.buf = int(c.bufs.size());
      c.bufs.emplace_back();
      c.bufs.back().size = t.size;
      c.bufs.back().mis = t.placed ? (ts.offset >> 3) & 7 : 0;
    }
  }
  for (auto& b : c.bufs) {
    b.lib.assign(size_t(2 * kGuard + b.mis + b.size + 64), kGuardByte);
    b.writable.assign(size_t(b.size), 0);
    b.uses.assign(size_t(2 * b.size), 0);
  }
  // Values, element maps, then data pointers (filled before pointing: regions may be shared).
  for (int i = 0; i < ns; ++i) {
    Tensor& t = c.t[i];
    if (!t.present) continue;
    Buffer& b = c.bufs[size_t(t.buf)];
    uint8_t* region = b.lib.data() + kGuard + b.mis + t.pos;
    const int w = op.written(c, i);
    const bool out = w != 0;
    if (w == 2) memset(region, s.poison, size_t(t.size));
    else fill_values(c, i, region);
    if (!t.placed) continue;
    for_each_elem(t, [&](int64_t bit) {
      const int64_t nib = (bit - t.lo * 8) / 4 + t.pos * 2;
      for (int64_t k = 0; k < t.bits / 4; ++k) {
        uint8_t& u = b.uses[size_t(nib + k)];
        u = uint8_t(std::min(u + (out ? 16 : 1), 255));
        if (out) b.writable[size_t((nib + k) / 2)] = 1;
      }
    });
  }
  for (auto& b : c.bufs) {
    // A nibble of a written tensor that another element (of any tensor) covers too.
    for (uint8_t u : b.uses) b.overlap = b.overlap || (u >= 16 && u != 16);
    b.pre = b.ref = b.lib;
  }
  return true;
}

FUZZ_HARNESS_ONLY void point(Ctx& c, int ns, bool ref) {
  for (int i = 0; i < ns; ++i) {
    Tensor& t = c.t[i];
    if (!t.present) continue;
    Buffer& b = c.bufs[size_t(t.buf)];
    uint8_t* region = (ref ? b.ref : b.lib).data() + kGuard + b.mis + t.pos;
    t.dl.data = c.s->t[i].brk % 32 == kBrkNullData ? nullptr : region - t.lo;
  }
}

// ------------------------------------------------------------------ checking
void describe(const Ctx& c, const OpDesc& op) {
  fprintf(stderr, "call: %s", c.op_name);
  if (c.opts_null) fprintf(stderr, " options=NULL");
  else if (&op == &kOps[0]) fprintf(stderr, " struct_size=%zu e8m0_rounding=%d", c.co.struct_size, c.co.e8m0_rounding);
  else if (strncmp(op.name, "qk_", 3) == 0)
    fprintf(stderr, " struct_size=%zu stats_kind=%d reserved0=%d global=%lld/%lld head_dim=%lld eps=%g woff=%g",
            c.qo.struct_size, c.qo.stats_kind, c.qo.reserved0, (long long)c.qo.q_global_width,
            (long long)c.qo.k_global_width, (long long)c.qo.head_dim, double(c.qo.eps), double(c.qo.weight_offset));
  else
    fprintf(stderr, " struct_size=%zu norm=%d mode=%d placement=%d group=%lld eps=%g woff=%g ub=%g min=%g qmax=%g",
            c.ro.struct_size, c.ro.norm, c.ro.scale_mode, c.ro.scale_placement, (long long)c.ro.group_size,
            double(c.ro.eps), double(c.ro.weight_offset), double(c.ro.scale_ub), double(c.ro.min_scale),
            double(c.ro.qmax));
  fprintf(stderr, "\n");
  for (size_t i = 0; i < op.slots.size(); ++i) {
    const Tensor& t = c.t[i];
    fprintf(stderr, "  %-8s ", op.slots[i].name);
    if (!t.present) { fprintf(stderr, "NULL\n"); continue; }
    int32_t dev;
    memcpy(&dev, &t.dl.device.device_type, 4);  // any int a C caller may pass
    fprintf(stderr, "%s(code %d bits %d lanes %d) dev %d:%d shape [", dtype_name(t.type), t.dl.dtype.code,
            t.dl.dtype.bits, t.dl.dtype.lanes, dev, t.dl.device.device_id);
    for (size_t k = 0; k < t.shape.size(); ++k) fprintf(stderr, "%s%lld", k ? ", " : "", (long long)t.shape[k]);
    fprintf(stderr, "] strides %s", t.dl.strides ? "[" : "NULL");
    for (size_t k = 0; t.dl.strides && k < t.strides.size(); ++k)
      fprintf(stderr, "%s%lld", k ? ", " : "", (long long)t.strides[k]);
    fprintf(stderr, "%s byte_offset %llu buffer %d at %lld (%lld bytes)%s%s%s\n", t.dl.strides ? "]" : "",
            (unsigned long long)t.dl.byte_offset, t.buf, (long long)t.pos, (long long)t.size,
            t.placed ? "" : " unplaced", t.dl.data ? "" : " data=NULL", t.dl.shape ? "" : " shape=NULL");
  }
}
[[noreturn]] void die(const Ctx& c, const OpDesc& op, const char* what) {
  fprintf(stderr, "\n==== fuzz_c_abi invariant broken: %s\n", what);
  describe(c, op);
  fflush(stderr);
  __builtin_trap();
}
FUZZ_HARNESS_ONLY void check_unwritten(const Ctx& c, const OpDesc& op, bool ref, bool failed) {
  for (size_t bi = 0; bi < c.bufs.size(); ++bi) {
    const Buffer& b = c.bufs[bi];
    const auto& now = ref ? b.ref : b.lib;
    for (size_t k = 0; k < now.size(); ++k) {
      const int64_t p = int64_t(k) - kGuard - b.mis;
      const bool guard = p < 0 || p >= b.size;
      if (now[k] == b.pre[k] || (!failed && !guard && b.writable[size_t(p)])) continue;
      fprintf(stderr, "%s: buffer %zu byte %lld (payload offset %lld) changed 0x%02x -> 0x%02x\n",
              ref ? "reference" : "library", bi, (long long)k, (long long)p, b.pre[k], now[k]);
      die(c, op, failed ? "a failing call wrote"
                 : guard ? "a guard byte changed (write outside the tensors)"
                         : "a byte outside every written tensor changed (input, gap or padding)");
    }
  }
}

// A message without its addresses ("0x6110..."), which differ between the two runs' buffers.
std::string strip_addresses(const std::string& m) {
  std::string r;
  for (size_t i = 0; i < m.size(); ++i) {
    r += m[i];
    if (m[i] == '0' && i + 1 < m.size() && m[i + 1] == 'x') {
      r += 'x';
      for (i += 2; i < m.size() && isxdigit((unsigned char)m[i]);) ++i;
      --i;
    }
  }
  return r;
}

bool g_strict_overlap = false;

std::vector<int64_t> g_targets;

int run_one(const uint8_t* data, size_t size, fusednorm_status* lib_status = nullptr) {
  Spec s{};
  Reader rd{data, size};
  visit(s, rd);
  Ctx c;
  c.s = &s;
  if (rd.pos < size) c.tail = data + rd.pos, c.tail_n = size - rd.pos;
  const OpDesc& op = kOps[s.op % kNumOps];
  c.op_name = op.name;
  c.residual = s.flags & 0x10;
  op.options(c);
  logical_shape(c);
  if (!build(c, op)) return 0;
  const int ns = int(op.slots.size());

  // Sentinels, so that a failing call must set its own message: the library's and the reference's
  // (each has its copy of core/error.cc) last errors.
  fusednorm_query_backend(kDLCPU, nullptr);
  const std::string sentinel_l = fusednorm_last_error();
  fusednorm::fail(FUSEDNORM_INTERNAL_ERROR, "fuzz sentinel");
  point(c, ns, false);
  const bool pick_target = !g_targets.empty() && s.target % 4 == 0;
  if (pick_target) hwy::SetSupportedTargetsForTest(g_targets[(s.target >> 2) % g_targets.size()]);
  const fusednorm_status sl = op.lib(c);
  if (pick_target) hwy::SetSupportedTargetsForTest(0);
  const std::string msg_l = fusednorm_last_error();
  if (lib_status) *lib_status = sl;
  if (sl != FUSEDNORM_SUCCESS && (msg_l.empty() || msg_l == sentinel_l))
    die(c, op, "a failing call did not set fusednorm_last_error()");
  check_unwritten(c, op, false, sl != FUSEDNORM_SUCCESS);

  point(c, ns, true);
  const fusednorm_status sr = op.ref(c);
  const std::string msg_r = fusednorm::last_error();
  if (sr != FUSEDNORM_SUCCESS && (msg_r.empty() || msg_r == "fuzz sentinel"))
    die(c, op, "a failing reference call did not set its last error");
  check_unwritten(c, op, true, sr != FUSEDNORM_SUCCESS);
  const bool gpu_only = sr == FUSEDNORM_UNSUPPORTED && msg_r.find("CPU tensors only") != std::string::npos;
  if (gpu_only) {  // a valid GPU call: no plugin here, the library must say so
    if (sl != FUSEDNORM_BACKEND_UNAVAILABLE) {
      fprintf(stderr, "library %s (%s) for a valid call on a GPU device\n", fusednorm_status_string(sl), msg_l.c_str());
      die(c, op, "a valid GPU call without a GPU backend did not return BACKEND_UNAVAILABLE");
    }
    return 0;
  }
  if (sl != sr || (sl != FUSEDNORM_SUCCESS && strip_addresses(msg_l) != strip_addresses(msg_r))) {
    fprintf(stderr, "library: %s \"%s\"\nreference: %s \"%s\"\n", fusednorm_status_string(sl), msg_l.c_str(),
            fusednorm_status_string(sr), msg_r.c_str());
    die(c, op, "library and reference disagree on the status");
  }
  if (sl != FUSEDNORM_SUCCESS) return 0;
  for (size_t bi = 0; bi < c.bufs.size(); ++bi) {
    const Buffer& b = c.bufs[bi];
    if (b.overlap && !g_strict_overlap) continue;
    for (size_t k = 0; k < b.lib.size(); ++k)
      if (b.lib[k] != b.ref[k]) {
        const int64_t p = int64_t(k) - kGuard - b.mis;
        for (int i = 0; i < ns; ++i)
          if (c.t[i].present && c.t[i].buf == int(bi) && p >= c.t[i].pos && p < c.t[i].pos + c.t[i].size)
            fprintf(stderr, "in %s region, byte %lld from its start\n", op.slots[size_t(i)].name,
                    (long long)(p - c.t[i].pos));
        fprintf(stderr, "buffer %zu byte %lld: library 0x%02x, reference 0x%02x (before 0x%02x)%s\n", bi,
                (long long)p, b.lib[k], b.ref[k], b.pre[k], b.overlap ? " [tensors overlap]" : "");
        die(c, op, "library and reference results differ");
      }
  }
  return 0;
}

#include "seeds.inc"

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static std::unique_ptr<tbb::global_control> threads;
  const char* nt = getenv("FUZZ_THREADS");
  threads.reset(new tbb::global_control(tbb::global_control::max_allowed_parallelism,
                                        size_t(nt && atoi(nt) > 0 ? atoi(nt) : 1)));
  g_strict_overlap = getenv("FUZZ_STRICT_OVERLAP") && atoi(getenv("FUZZ_STRICT_OVERLAP")) != 0;
  if (!(getenv("FUZZ_NO_TARGETS") && atoi(getenv("FUZZ_NO_TARGETS")))) g_targets = hwy::SupportedAndGeneratedTargets();
  if (const char* dir = getenv("FUZZ_WRITE_SEEDS")) exit(write_seeds(dir));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return run_one(data, size); }
