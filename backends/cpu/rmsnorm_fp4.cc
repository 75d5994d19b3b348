// Compiled once per Highway target (foreach_target.h re-includes this file), then once more
// with HWY_ONCE for the dispatch tables and the oneTBB drivers.
// rmsnorm_fp4 on the CPU: per row the residual add and canonical sum of squares (rows-inl.h),
// the y pass with one |y| max per block, the block scales (shared math, scalar), then y × r
// encoded to e2m1 two codes a byte. dequantize_fp4: codes × scale / gs, per block.

#include <math.h>
#include <string.h>

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/rmsnorm_fp4.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "backends/cpu/rows-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fusednorm {
namespace HWY_NAMESPACE {

// Codes of v[0, 2n) (n = Lanes) packed two a byte into out[0, n): element 2k in the low nibble.
HWY_INLINE void StorePackedFp4(VU c0, VU c1, char* out) {
#if HWY_TARGET == HWY_SCALAR
  out[0] = char(hn::GetLane(c0) | (hn::GetLane(c1) << 4));
#else
  const DU du;
  const hn::Repartition<uint64_t, DU> d64;
  // As u64 lanes, c_even | c_odd << 32; | (>> 28) puts c_odd << 4 beside c_even in the low byte
  // of the even u32 lane.
  const auto pair = [&](VU c) {
    const auto w = hn::BitCast(d64, c);
    return hn::BitCast(du, hn::Or(w, hn::ShiftRight<28>(w)));
  };
  const VU bytes = hn::And(hn::ConcatEven(du, pair(c1), pair(c0)), hn::Set(du, 0xFFu));
  StoreCodes<1>(bytes, out, 0);
#endif
}

// q_i = enc_e2m1(y_i × r_block) for the row, packed into out. y: the row's y (h_pad floats).
HWY_NOINLINE void EncodeFp4Row(float* y, const float* r, int64_t h, int64_t block, char* out) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  // y × r in place, block by block (a block is a whole number of vectors, or a vector holds
  // whole blocks: both are powers of two).
  if (block >= n) {
    for (int64_t b = 0; b * block < h; ++b) {
      const VF vr = hn::Set(df, r[b]);
      for (int64_t i = b * block; i < (b + 1) * block; i += n) hn::StoreU(hn::Mul(hn::LoadU(df, y + i), vr), df, y + i);
    }
  } else {
    for (int64_t i = 0; i < h; ++i) y[i] = math::mul_rn(y[i], r[i / block]);
  }
  int64_t i = 0;
  for (; i + 2 * n <= h; i += 2 * n)
    StorePackedFp4(EncodeMini<math::f4e2m1, false>(hn::LoadU(df, y + i)),
                   EncodeMini<math::f4e2m1, false>(hn::LoadU(df, y + i + n)), out + i / 2);
  for (; i < h; i += 2)
    out[i / 2] = char(math::f4e2m1::encode<false>(y[i]) | (math::f4e2m1::encode<false>(y[i + 1]) << 4));
}

template <class InT>
void RmsnormFp4RowsT(const RmsnormFp4Call& c, int64_t row_begin, int64_t row_end, const float* g) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const int64_t h = c.h;
  const int64_t h_pad = (h + n - 1) / n * n;
  const int64_t blocks = h / c.block;
  float* part = Scratch(1, size_t(math::reduction_partials(h)));
  float* y = Scratch(2, size_t(h_pad));
  uint32_t* amax = reinterpret_cast<uint32_t*>(Scratch(3, size_t(blocks)));
  float* rcp = Scratch(4, size_t(blocks));
  const float h_f = math::length_f32(h);
  const float gs = global_scale_value(c.global_scale);
  const bool nv = c.format == FUSEDNORM_FP4_NVFP4;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const char* x = row_ptr(c.lead, c.in, r);
    char* out = row_ptr(c.lead, c.out, r);
    NextRow next;
    if (r + 1 < c.lead.rows) {
      next.p0 = row_ptr(c.lead, c.in, r + 1);
      next.p1 = c.res.data != nullptr ? row_ptr(c.lead, c.res, r + 1) : nullptr;
      next.elem_bytes = InT::kBytes;
      next.bytes = h * InT::kBytes;
    }
    float inv_s = 1.0f;
    x = NormRow<InT>(x, c.res.data != nullptr ? row_ptr(c.lead, c.res, r) : nullptr, c.norm == FUSEDNORM_NORM_RMS, h,
                     h_f, c.eps, part, &inv_s);
    YAbsMaxUnits<InT>(x, g, hn::Set(df, inv_s), y, h, c.block, amax, next);
    char* srow = c.swizzled ? c.scales.data : row_ptr(c.lead, c.scales, r);
    for (int64_t b = 0; b < blocks; ++b) {
      const math::BlockScale s = nv ? math::nvfp4_block_scale(amax[b], gs) : math::mxfp4_block_scale(amax[b]);
      srow[c.swizzled ? math::fp4_swizzled_offset(r, b, c.swizzle_tiles) : b] = char(s.code);
      rcp[b] = s.r;
    }
    EncodeFp4Row(y, rcp, h, c.block, out);
  }
}

void RmsnormFp4Rows(const RmsnormFp4Call& c, int64_t row_begin, int64_t row_end, uint64_t call_id) {
  const float* g = CallGamma(c.w_type, c.norm == FUSEDNORM_NORM_RMS ? c.weight : nullptr, c.weight_offset, c.h, call_id);
  switch (c.in_type) {
    case DType::kF32: return RmsnormFp4RowsT<InF32>(c, row_begin, row_end, g);
    case DType::kF16: return RmsnormFp4RowsT<InF16>(c, row_begin, row_end, g);
    default: return RmsnormFp4RowsT<InBF16>(c, row_begin, row_end, g);
  }
}

// out_i = rn_out((dec(q_i) × dec(sf)) / gs): the 16 e2m1 values times the block's scale, by a
// table of the 16 products per block (each one correctly rounded product, then the division).
void DequantizeFp4Rows(const DequantizeFp4Call& c, int64_t row_begin, int64_t row_end) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const float gs = global_scale_value(c.global_scale);
  const bool nv = c.format == FUSEDNORM_FP4_NVFP4;
  float* v = Scratch(1, size_t((c.h + n - 1) / n * n));
  const int out_bytes = dtype_bits(c.out_type) / 8;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* q = reinterpret_cast<const uint8_t*>(row_ptr(c.lead, c.codes, r));
    char* out = row_ptr(c.lead, c.out, r);
    for (int64_t b = 0; b * c.block < c.h; ++b) {
      const uint32_t sf = uint8_t(*fp4_scale_ptr(c.lead, c.scales, c.swizzled, c.swizzle_tiles, r, b));
      const float scale = nv ? math::f8e4m3fn::decode(sf) : math::decode_e8m0(sf);
      float table[16];
      for (uint32_t k = 0; k < 16; ++k) table[k] = math::div_rn(math::mul_rn(math::f4e2m1::decode(k), scale), gs);
      for (int64_t i = b * c.block; i < (b + 1) * c.block; i += 2) {
        const uint8_t byte = q[i / 2];
        v[i] = table[byte & 0xF];
        v[i + 1] = table[byte >> 4];
      }
    }
    int64_t i = 0;
    for (; i + n <= c.h; i += n) {
      const VF x = hn::LoadU(df, v + i);
      if (out_bytes == 4) StoreCodes<4>(EncodeF32<false>(x), out, i);
      else if (c.out_type == DType::kF16) StoreCodes<2>(EncodeF16<false>(x), out, i);
      else StoreCodes<2>(EncodeBF16<false>(x), out, i);
    }
    for (; i < c.h; ++i) store_code(c.out_type, out, i, encode<false>(c.out_type, v[i]));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fusednorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/parallel.h"

namespace fusednorm {

HWY_EXPORT(RmsnormFp4Rows);
HWY_EXPORT(DequantizeFp4Rows);

void cpu_rmsnorm_fp4(const RmsnormFp4Call& call) {
  const uint64_t call_id = next_call_id();
  if (call.swizzled) {
    // The swizzled layout's padding, before the rows write theirs: the tiles of the last 128 rows
    // (padding rows past the last row), and the last column of tiles (blocks past H / block).
    const int64_t tiles = call.swizzle_tiles, row_tiles = call.swizzle_rows / 128;
    if (call.lead.rows % 128 != 0) memset(call.scales.data + (row_tiles - 1) * tiles * 512, 0, size_t(tiles) * 512);
    if ((call.h / call.block) % 4 != 0)
      for (int64_t t = 0; t < row_tiles; ++t) memset(call.scales.data + (t * tiles + tiles - 1) * 512, 0, 512);
  }
  const int64_t rows = call.lead.rows;
  parallel_rows(rows, block_rows(rows, call.h),
                [&](int64_t r0, int64_t r1) { HWY_DYNAMIC_DISPATCH(RmsnormFp4Rows)(call, r0, r1, call_id); });
}

void cpu_dequantize_fp4(const DequantizeFp4Call& call) {
  parallel_rows(call.lead.rows, block_rows(call.lead.rows, call.h),
                [&](int64_t r0, int64_t r1) { HWY_DYNAMIC_DISPATCH(DequantizeFp4Rows)(call, r0, r1); });
}

}  // namespace fusednorm
#endif  // HWY_ONCE
