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

// Codes of 4 Lanes values (c0, then c1, c2, c3) packed two a byte into out[0, 2 Lanes). x86: the
// codes as bytes in order (PackBytes4x1), whose u16 lanes b_even | b_odd << 8 become b_even |
// b_odd << 4 in their low byte by | (>> 4), kept by one truncating narrowing.
HWY_INLINE void StorePackedFp4x4(VU c0, VU c1, VU c2, VU c3, char* out) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  const __m512i b = PackBytes4x1(c0, c1, c2, c3);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi16_epi8(_mm512_or_si512(b, _mm512_srli_epi16(b, 4))));
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  const __m256i b = PackBytes4x1(c0, c1, c2, c3);
  const __m256i w = _mm256_and_si256(_mm256_or_si256(b, _mm256_srli_epi16(b, 4)), _mm256_set1_epi16(0xFF));
  const __m256i p = _mm256_packus_epi16(w, w);  // 128-bit half k: its 8 bytes, twice
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));
#else
  const int64_t n = int64_t(hn::Lanes(DU()));
  StorePackedFp4(c0, c1, out);
  StorePackedFp4(c2, c3, out + n);
#endif
}

// The e2m1 codes of p where every |p| < 7 (a small block: BlockScales), lane-wise: the magnitude by
// math::f4e2m1_small_low (its operations, each exact: a maximum, a mask, an FMA, a shift and an
// add; proven equal to f4e2m1::encode's magnitude for every |v| < 7 by the exhaustive encoder
// test), whose low 3 bits are the code, and bit 3 the sign (bits(p) >> 28: the sign in bit 3, and
// below 16) by one bit select. e × 4194433 is exact (e = 1, 2 or 4; 4194433 < 2^23), so on a
// target without FMA (MulAdd as a product, then a sum) the sum is the one rounding, as in fma_rn.
HWY_INLINE VU EncodeF4Small(VF p) {
  const DF df;
  const DU du;
  const VU u = hn::BitCast(du, p);
  const VF a = hn::BitCast(df, hn::And(u, SetU(math::kF32AbsMask)));
  const VU e = hn::And(hn::BitCast(du, hn::Max(a, hn::Set(df, 1.0f))), SetU(math::kF32InfBits));
  const VU low = hn::Add(hn::BitCast(du, hn::MulAdd(hn::BitCast(df, e), hn::Set(df, 4194433.0f), a)), hn::ShiftRight<22>(e));
  return BitSelect(SetU(7u), low, hn::ShiftRight<28>(u));
}

// q_i = enc_e2m1(y_i × r_block) for the row, packed into out. y: the row's y (h_pad floats).
// Asks for the next row's input as it goes (NextRow::Step).
// kNoNaN: no block holds a NaN or Inf (every r finite, so no y × r is NaN): the encoder without
// its NaN select.
// kSmall: every |y × r| < 7 (EncodeF4Small).
template <bool kNoNaN, bool kSmall = false>
HWY_NOINLINE void EncodeFp4Row(const float* y, const float* r, int64_t h, int64_t block, char* out,
                               NextRow next) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  int64_t i = 0;
  if (block >= n) {  // a vector lies in one block (both are powers of two: a shift, not a division)
    const int shift = __builtin_ctzll(uint64_t(block));
    const auto enc = [&](int64_t k) {
      const VF v = hn::Mul(hn::LoadU(df, y + k), hn::Set(df, r[k >> shift]));
      if (kSmall) return EncodeF4Small(v);
      return kNoNaN ? EncodeMiniNoNaN<math::f4e2m1>(v) : EncodeMini<math::f4e2m1, false>(v);
    };
    for (; i + 4 * n <= h; i += 4 * n) {
      next.Step(i, i + 4 * n);
      StorePackedFp4x4(enc(i), enc(i + n), enc(i + 2 * n), enc(i + 3 * n), out + i / 2);
    }
    for (; i + 2 * n <= h; i += 2 * n) StorePackedFp4(enc(i), enc(i + n), out + i / 2);
  }
  next.Step(i, h);
  for (; i < h; i += 2)
    out[i / 2] = char(math::f4e2m1::encode<false>(math::mul_rn(y[i], r[i / block])) |
                      (math::f4e2m1::encode<false>(math::mul_rn(y[i + 1], r[(i + 1) / block])) << 4));
}

// The block scales of a row, Lanes blocks at a time: the shared math's formulas
// (math::nvfp4_block_scale / mxfp4_block_scale) as vector operations, each an exact IEEE operation
// or an encoder proven equal to the scalar one:
// - NVFP4: sf = enc_f8e4m3fn((gs × a) / 6), r = math::nvfp4_multiplier(sf, gs) = gs / dec(sf)
//   with dec(sf) from the code's bits (no table: a gather measured slower than the division);
// - MXFP4: the steps of math::mxfp4_block_scale_finite after the quotient v = rn(a / 6): code 0 for
//   v <= 2^-127, else (bits(v) + 0x7FFFFF) >> 23 (enc_e8m0_up of a finite non-negative v below
//   2^126), r = 2^(127 - code) as the exponent field 254 - code (0 for a zero block).
// A block holding NaN or Inf gets the format's NaN code and r = 0. The scale byte of block b in
// codes[b], r[b] for b < blocks (amax padded to a multiple of Lanes). Returns whether no block
// holds a NaN or Inf (kFinite), and with kSmall set whether every block's rn(amax × r) is below 7:
// then every |y × r| of those blocks is (rounding is monotonic), and no block holds a NaN or Inf
// and no r is NaN or negative (each makes that product NaN, or negative: bits above 7's).
constexpr int kFinite = 1, kSmall = 2;
HWY_NOINLINE int BlockScales(const uint32_t* amax, int64_t blocks, bool nv, float gs, char* codes, float* r) {
  const DF df;
  const DU du;
  const int64_t n = int64_t(hn::Lanes(df));
  int64_t b = 0;
  VU most = hn::Zero(du), tmax = hn::Zero(du);
  for (; b + n <= blocks; b += n) {
    const VU a = hn::LoadU(du, amax + b);
    most = hn::Max(most, a);
    const auto bad = hn::RebindMask(df, GeS(a, math::kF32InfBits));  // NaN or Inf in the block
    VU code;
    VF rv;
    if (nv) {
      code = EncodeMini<math::f8e4m3fn, false>(hn::Div(hn::Mul(hn::Set(df, gs), hn::BitCast(df, a)), hn::Set(df, 6.0f)));
      // dec(code) of a non-NaN code: its fields at f32's places (a normal f32, or for magnitudes
      // below 8 a subnormal one) times 2^120 (bias 127 to 7), exact. The NaN code comes only from a
      // NaN quotient in a finite block: a NaN gs (then gs / anything is NaN, as the shared r), or
      // gs = ±Inf with a zero block, whose ±0 values give y × r = NaN for the shared r (NaN) and
      // for this one (±Inf) alike: the same codes.
      const VU mag = hn::And(code, SetU(math::f8e4m3fn::kMagMask));
      const VF dec = hn::Mul(hn::BitCast(df, hn::Or(hn::ShiftLeft<24>(hn::And(code, SetU(0x80u))), hn::ShiftLeft<20>(mag))),
                             hn::Set(df, 0x1p120f));
      rv = hn::IfThenZeroElse(hn::RebindMask(df, hn::Eq(mag, hn::Zero(du))), hn::Div(hn::Set(df, gs), dec));
      code = hn::IfThenElse(hn::RebindMask(du, bad), hn::Set(du, math::f8e4m3fn::kNan), code);
    } else {
      const VU v = hn::BitCast(du, hn::Div(hn::BitCast(df, a), hn::Set(df, 6.0f)));
      code = hn::IfThenElseZero(hn::RebindMask(du, GtS(v, math::kF32Pow2m127)), hn::ShiftRight<23>(hn::Add(v, SetU(0x7FFFFFu))));
      rv = hn::IfThenZeroElse(hn::RebindMask(df, hn::Eq(a, hn::Zero(du))), hn::BitCast(df, hn::ShiftLeft<23>(hn::Sub(SetU(254u), code))));
      code = hn::IfThenElse(hn::RebindMask(du, bad), hn::Set(du, math::kE8m0Nan), code);
    }
    StoreCodes<1>(code, codes, b);
    rv = hn::IfThenZeroElse(bad, rv);
    hn::StoreU(rv, df, r + b);
    tmax = hn::Max(tmax, hn::BitCast(du, hn::Mul(hn::BitCast(df, a), rv)));  // unsigned: -x above +x
  }
  bool finite = hn::AllTrue(df, hn::RebindMask(df, LtS(most, math::kF32InfBits)));
  bool small = hn::AllTrue(df, hn::RebindMask(df, hn::Lt(tmax, SetU(math::kF4SmallLimitBits))));
  for (; b < blocks; ++b) {
    const math::BlockScale sc = nv ? math::nvfp4_block_scale(amax[b], gs) : math::mxfp4_block_scale(amax[b]);
    codes[b] = char(sc.code);
    r[b] = sc.r;
    finite = finite && amax[b] < math::kF32InfBits;
    small = small && math::bits_of(math::mul_rn(math::float_of(amax[b]), sc.r)) < math::kF4SmallLimitBits;
  }
  return (finite ? kFinite : 0) | (small ? kSmall : 0);
}

// The scale bytes of rows [r0, r1) (at most 4, inside one group of 4 rows: r0 / 4 == (r1 - 1) / 4)
// into the 128x4 swizzled layout; row r's bytes at codes + (r & 3) * stride. Blocks 4k .. 4k+3 of
// a row are 4 adjacent bytes of tile k, at offset(r, 0) + 512 k (math::fp4_swizzled_offset), and
// rows 4j .. 4j+3 of a tile share a 64-byte line (16 bytes apart): a row's 4-byte copies alone,
// 512 bytes apart, miss L1 every time (the tiles of a row outgrow its sets), while a group's rows
// written tile by tile miss once a line.
HWY_INLINE void WriteSwizzled(const RmsnormFp4Call& c, int64_t r0, int64_t r1, const char* codes, int64_t stride) {
  const int64_t blocks = c.h / c.block;
  char* s[4];
  for (int64_t r = r0; r < r1; ++r) s[r - r0] = c.scales.data + math::fp4_swizzled_offset(r, 0, c.swizzle_tiles);
  int64_t b = 0;
  for (; b + 4 <= blocks; b += 4)
    for (int64_t r = r0; r < r1; ++r) memcpy(s[r - r0] + (b >> 2) * 512, codes + (r & 3) * stride + b, 4);
  for (; b < blocks; ++b)
    for (int64_t r = r0; r < r1; ++r) s[r - r0][(b >> 2) * 512 + (b & 3)] = codes[(r & 3) * stride + b];
}

template <class InT>
void RmsnormFp4RowsT(const RmsnormFp4Call& c, int64_t row_begin, int64_t row_end, const float* g) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  const int64_t h = c.h;
  const int64_t h_pad = (h + n - 1) / n * n;
  const int64_t blocks = h / c.block, blocks_pad = (blocks + n - 1) / n * n;
  float* part = Scratch(1, size_t(math::reduction_partials(h)));
  float* y = Scratch(2, size_t(h_pad));
  uint32_t* amax = reinterpret_cast<uint32_t*>(Scratch(3, size_t(blocks_pad)));
  float* rcp = Scratch(4, size_t(blocks_pad));
  // Swizzled scales: the scale bytes of up to 4 rows (r & ~3 .. r), written to the tensor together
  // (WriteSwizzled).
  char* swizzle_bytes = reinterpret_cast<char*>(Scratch(5, size_t(blocks_pad) + 1));
  const float h_f = math::length_f32(h);
  const float gs = global_scale_value(c.global_scale);
  const bool nv = c.format == FUSEDNORM_FP4_NVFP4;
  const bool gs_finite = (math::bits_of(gs) & math::kF32AbsMask) < math::kF32InfBits;
  // After the sum of squares, whole-row passes: y and the block maxima, the scales, the codes
  // (y in pieces of about 1024 elements kept in L1, the three passes called once a piece, measured
  // 5-24% slower at H 8192 and 16384, bf16 and f32: docs/performance.md).
  for (int64_t r = row_begin; r < row_end; ++r) {
    char* out = row_ptr(c.lead, c.out, r);
    // Row-major scales go to the row's scale bytes directly; swizzled ones to swizzle_bytes first.
    char* codes = c.swizzled ? swizzle_bytes + (r & 3) * blocks_pad : row_ptr(c.lead, c.scales, r);
    NextRow next;
    float inv_s = 1.0f;
    const char* x = StartRow<InT>(c, r, h_f, part, &next, &inv_s);
    const VF inv = hn::Set(df, inv_s);
    if (c.block >= n) YBlockMax<InT>(x, g, inv, y, h, c.block, amax);
    else YAbsMaxUnits<InT>(x, g, inv, y, h, c.block, amax);
    // Small blocks: every |y × r| < 7 (no NaN); else a finite row and global scale: every r is
    // finite, so no y × r is NaN.
    const int kind = BlockScales(amax, blocks, nv, gs, codes, rcp);
    if (kind & kSmall) EncodeFp4Row<true, true>(y, rcp, h, c.block, out, next);
    else if ((kind & kFinite) && gs_finite) EncodeFp4Row<true>(y, rcp, h, c.block, out, next);
    else EncodeFp4Row<false>(y, rcp, h, c.block, out, next);
    if (c.swizzled && ((r & 3) == 3 || r + 1 == row_end))
      WriteSwizzled(c, std::max(row_begin, r & ~int64_t(3)), r + 1, swizzle_bytes, blocks_pad);
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
