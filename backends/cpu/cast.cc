// Compiled once per Highway target (foreach_target.h re-includes this file), then once more
// with HWY_ONCE for the dispatch table and the oneTBB driver.
// fusednorm_cast on the CPU: each row decoded in chunks to f32, then encoded with the vector encoders.

#include <math.h>
#include <string.h>

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/cast.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "backends/cpu/rows-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fusednorm {
namespace HWY_NAMESPACE {

// Vector encode of one chunk to `dst` (u32 codes).
template <bool kKeepNanSign>
HWY_INLINE VU EncodeAny(DType t, VF v, bool e8m0_up) {
  switch (t) {
    case DType::kF32: return EncodeF32<kKeepNanSign>(v);
    case DType::kF16: return EncodeF16<kKeepNanSign>(v);
    case DType::kBF16: return EncodeBF16<kKeepNanSign>(v);
    case DType::kI8: return EncodeInt8(v);
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return EncodeMini<math::name, kKeepNanSign>(v);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kE8M0: return e8m0_up ? EncodeE8m0Up(v) : EncodeE8m0Rn(v);
    default: return SetU(0);
  }
}

void CastRows(const CastCall& c, int64_t row_begin, int64_t row_end) {
  constexpr int64_t kChunk = 256;  // a multiple of every target's lane count
  const DF df;
  const int64_t n_lanes = int64_t(hn::Lanes(df));
  HWY_ALIGN float tmp[kChunk];
  HWY_ALIGN uint32_t codes[kChunk];
  const int dst_bits = dtype_bits(c.dst_type);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const char* src = row_ptr(c.lead, c.src, r);
    char* dst = row_ptr(c.lead, c.dst, r);
    for (int64_t i0 = 0; i0 < c.cols; i0 += kChunk) {
      const int64_t n = std::min(kChunk, c.cols - i0);
      int64_t i = 0;
      if (c.src_type == DType::kF32 || c.src_type == DType::kF16 || c.src_type == DType::kBF16) {
        for (; i + n_lanes <= n; i += n_lanes) {
          const VF v = c.src_type == DType::kF32   ? InputLoader<float>::Load(src, i0 + i)
                       : c.src_type == DType::kF16 ? InputLoader<F16Tag>::Load(src, i0 + i)
                                                   : InputLoader<BF16Tag>::Load(src, i0 + i);
          hn::Store(v, df, tmp + i);
        }
      }
      for (; i < n; ++i) tmp[i] = decode(c.src_type, load_code(c.src_type, src, i0 + i));
      for (; i % n_lanes != 0; ++i) tmp[i] = 0.0f;
      for (int64_t j = 0; j < i; j += n_lanes)
        hn::Store(EncodeAny<true>(c.dst_type, hn::Load(df, tmp + j), c.e8m0_up), DU(), codes + j);
      int64_t j = 0;
      if (dst_bits >= 8 && n == kChunk) {
        for (; j < n; j += n_lanes) {
          const VU v = hn::Load(DU(), codes + j);
          if (dst_bits == 32) StoreCodes<4>(v, dst, i0 + j);
          else if (dst_bits == 16) StoreCodes<2>(v, dst, i0 + j);
          else StoreCodes<1>(v, dst, i0 + j);
        }
      }
      if (dst_bits == 4) {
        for (; j < n; j += 2) dst[(i0 + j) / 2] = char(codes[j] | (codes[j + 1] << 4));
      }
      for (; j < n; ++j) store_code(c.dst_type, dst, i0 + j, codes[j]);
    }
  }
}


}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/parallel.h"

namespace fusednorm {

HWY_EXPORT(CastRows);

void cpu_cast(const CastCall& call) {
  if (call.cols == 0) return;
  parallel_rows(call.lead.rows, grain_rows(call.cols),
                [&](int64_t r0, int64_t r1) { HWY_DYNAMIC_DISPATCH(CastRows)(call, r0, r1); });
}

}  // namespace fusednorm
#endif  // HWY_ONCE
