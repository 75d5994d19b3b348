// The fuzz harness's input format (a fixed-size Spec, then value bytes) and the description of
// one call (its tensors and buffers), shared by tests/fuzz/fuzz_c_abi.cc and its seed table.
#pragma once

#include <stdint.h>
#include <string.h>

#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "fusednorm/fusednorm.h"

namespace fuzz {

using namespace fusednorm;

constexpr int kMaxSlots = 5;
constexpr int kGuard = 64;
constexpr uint8_t kGuardByte = 0xA5;
constexpr int64_t kMaxRegion = 256 << 10;  // larger representable spans: the input is skipped
constexpr int64_t kMaxElems = 1 << 18;

// ------------------------------------------------------------------ the input format
struct TensorSpec {
  uint8_t brk, dtype, shape_mut, layout, pad, offset, values, extra;
};
struct Spec {
  uint8_t op, target, rank, flags;
  uint8_t dims[3];
  uint16_t h;
  uint8_t osel[10];
  uint32_t oraw[4];
  uint32_t seed;
  uint8_t poison;
  TensorSpec t[kMaxSlots];
};
template <class V>
void visit(Spec& s, V& v) {
  v(s.op), v(s.target), v(s.rank), v(s.flags);
  for (auto& d : s.dims) v(d);
  v(s.h);
  for (auto& o : s.osel) v(o);
  for (auto& o : s.oraw) v(o);
  v(s.seed), v(s.poison);
  for (auto& t : s.t)
    v(t.brk), v(t.dtype), v(t.shape_mut), v(t.layout), v(t.pad), v(t.offset), v(t.values), v(t.extra);
}
struct Reader {
  const uint8_t* p;
  size_t n, pos = 0;
  template <class T>
  void operator()(T& v) {
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); ++i, ++pos) x |= uint64_t(pos < n ? p[pos] : 0) << (8 * i);
    v = T(x);
  }
};
struct Writer {
  std::vector<uint8_t> out;
  template <class T>
  void operator()(T& v) {
    for (size_t i = 0; i < sizeof(T); ++i) out.push_back(uint8_t(uint64_t(v) >> (8 * i)));
  }
};

// Breakages (TensorSpec::brk % 32); 0..23: none.
enum { kBrkToggleNull = 24, kBrkNullData, kBrkNullShape, kBrkDeviceType, kBrkDeviceId, kBrkHugeShape,
       kBrkHugeOffset, kBrkShare };
// Layouts (TensorSpec::layout % 16).
enum { kLayNullStrides = 5, kLayPadded = 8, kLayPermuted = 11, kLayZero, kLayNegative, kLayLastDim, kLayHuge };

inline uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
float f32_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
template <class T, size_t N>
T pick(uint8_t sel, const T (&table)[N], T raw) { return sel % (N + 1) == N ? raw : table[sel % (N + 1)]; }

// ------------------------------------------------------------------ one call
struct Tensor {
  bool present = false;
  DLTensor dl{};
  std::vector<int64_t> shape, strides;
  DType type = DType::kInvalid;
  int bits = 8;
  bool placed = false;  // elements located in a region of `buf` (else: small guarded buffer)
  bool empty = false;
  int64_t lo = 0, size = 0;  // byte range [lo, lo + size) relative to dl.data
  int buf = -1;
  int64_t pos = 0;  // region start in the buffer's payload
};
struct Buffer {
  int64_t size = 0, mis = 0;
  std::vector<uint8_t> lib, ref, pre;  // guard + mis + size + guard
  std::vector<uint8_t> writable;       // per payload byte: covered by a written element
  std::vector<uint8_t> uses;           // per payload nibble: how many elements cover it
  bool overlap = false;
};

struct Ctx {
  const Spec* s = nullptr;
  const uint8_t* tail = nullptr;
  size_t tail_n = 0;
  std::vector<int64_t> lead;
  int64_t h = 0;
  bool opts_null = false, residual = false;
  fusednorm_cast_options co{};
  fusednorm_rmsnorm_quant_options ro{};
  fusednorm_qk_rmsnorm_options qo{};  // qk_rmsnorm
  fusednorm_mla_rope_rmsnorm_quant_options mo{};  // tests/fuzz/fuzz_mla.h
  fusednorm_rmsnorm_fp4_options fo{};              // rmsnorm_fp4
  std::shared_ptr<void> extra;                     // an operation's own tensors (fuzz_mla.h)
  Tensor t[kMaxSlots];
  std::vector<Buffer> bufs;
  const char* op_name = "";
};
DLTensor* tp(Ctx& c, int i) { return c.t[i].present ? &c.t[i].dl : nullptr; }

}  // namespace fuzz
