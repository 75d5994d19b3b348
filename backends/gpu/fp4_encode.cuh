// Compiled twice: as CUDA and as HIP. rmsnorm_fp4's encoding pieces, shared by its kernels
// (rmsnorm_fp4.cuh, rmsnorm_fp4_short.cuh): the global scale read at any alignment, the e2m1 codes
// of 8 values, a block's |y| maximum and the block scale.
#pragma once

#include <stdint.h>

#include "backends/gpu/encode.cuh"
#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/io.cuh"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// A thread loads vectors of 8 elements and keeps up to kSteps of them: a kernel for rows of up to
// 4 steps and one for up to 8 (blocks of at most 512 threads, so 128 registers a thread).
constexpr int kFp4Vec = 8;

// The f32 value at any alignment (4 byte loads): the global scale tensor may sit anywhere.
__device__ __forceinline__ float load_f32_any(const char* p) {
  uint32_t u = 0;
#pragma unroll
  for (int b = 0; b < 4; ++b) u |= uint32_t(reinterpret_cast<const uint8_t*>(p)[b]) << (8 * b);
  return math::float_of(u);
}

// The nibble of a code: bits 0-2 of low3 (f4e2m1_num_low3), bit 3 from sh = bits(p) >> 28 (the
// sign; sh is below 16). One bit select (LOP3 with the mask 7: the compiler, knowing sh's range,
// would otherwise mask each side apart).
__device__ __forceinline__ uint32_t fp4_nibble(uint32_t low3, uint32_t sh) {
#if FN_CUDA_ARCH > 0
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, 7, 0xE4;" : "=r"(r) : "r"(low3), "r"(sh));  // 7 ? low3 : sh, bit by bit
  return r;
#else
  return (low3 & 7u) | (sh & ~7u);
#endif
}

// Eight e2m1 codes of y[0..7] × r, where r >= +0 (sign bit clear) and every |y × r| < 7 (so no
// NaN), in one word, element j in bits 4j .. 4j+3. The magnitude codes are those of |y| × r (the
// product's sign bit taken off by an operand modifier; y × r has y's sign as r's sign bit is
// clear), math::f4e2m1_small_low's low bytes (bits 3-7 clear), put in pairs (code(2k) +
// (code(2k+1) << 4): no carry) and the pairs' low bytes gathered by byte permutes; the signs of y
// are gathered as sign-replicated bytes (the permute's sign mode: 0xFF where bit 31 is set), the
// even elements' in one word and the odd elements' in another, and merged into bits 3 and 7 of
// each byte. The encoder takes 5 instructions a value (the product, a maximum, a mask, an FMA and a
// shift-add) and the packing 15 for the eight, where the clamped encoder with a sign select and
// a shift-add a value took 10 a value.
__device__ __forceinline__ uint32_t pack_fp4_small8(const float y[8], float r) {
  uint32_t q[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    q[k] = math::f4e2m1_small_low(math::mul_rn(fabsf(y[2 * k]), r)) +
           (math::f4e2m1_small_low(math::mul_rn(fabsf(y[2 * k + 1]), r)) << 4);
  const uint32_t codes = gpu_prmt(gpu_prmt(q[0], q[1], 0x40u), gpu_prmt(q[2], q[3], 0x40u), 0x5410u);
  using math::bits_of;
  const uint32_t even = gpu_prmt(gpu_prmt(bits_of(y[0]), bits_of(y[2]), 0xFBu),
                                 gpu_prmt(bits_of(y[4]), bits_of(y[6]), 0xFBu), 0x5410u);
  const uint32_t odd = gpu_prmt(gpu_prmt(bits_of(y[1]), bits_of(y[3]), 0xFBu),
                                gpu_prmt(bits_of(y[5]), bits_of(y[7]), 0xFBu), 0x5410u);
  return codes | (((even & 0x0F0F0F0Fu) | (odd & 0xF0F0F0F0u)) & 0x88888888u);
}

// verify_encoders' check of pack_fp4_small8 (the packing and the signs; the encoder itself is
// verify_f4_kernel's), with r = 1: input u with |u| < 7 sits at position 0, and position j at
// magnitude bits (|u| + j·K) mod bits(7) with sign u's sign xor bit 0 of j xor bit 2 of j, so that
// over all u every position sees every magnitude below 7 with both signs. The word must equal the
// shared encoder's codes put in their nibbles. (r != 1 changes only the products, which are IEEE
// multiplications.)
inline __device__ __noinline__ uint32_t f4_pack8_out_of_line(const float (&y)[8], float r) { return pack_fp4_small8(y, r); }
template <int kUnused = 0>
__global__ void verify_f4_pack_kernel(uint64_t base, uint64_t n, unsigned long long* bad, unsigned int* first) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t u = uint32_t(base + i), a = u & math::kF32AbsMask;
    if (a >= math::kF4SmallLimitBits) continue;
    float y[8];
    uint32_t want = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t aj = a + uint32_t(j) * 0x01234567u;
      if (aj >= math::kF4SmallLimitBits) aj -= math::kF4SmallLimitBits;
      const uint32_t sj = ((u >> 31) ^ uint32_t(j) ^ (uint32_t(j) >> 2)) & 1u;
      y[j] = math::float_of(aj | (sj << 31));
      want |= f4_ref_out_of_line(y[j]) << (4 * j);
    }
    if (f4_pack8_out_of_line(y, 1.0f) != want) {
      atomicAdd(bad, 1ull);
      atomicMin(first, u);
    }
  }
}

// pack_fp4's `small` for a block of maximum amax (bits) and multiplier r: t = rn(amax × r) has
// bits below 7's, that is t is +0 or positive and below 7. That bounds every |rn(y × r)| of the
// block by t (rounding is monotonic), and it is false for a NaN or infinite amax or r and for an r
// with its sign bit set (t is then negative, -0 or NaN), so r >= +0 as pack_fp4_small8 wants.
__device__ __forceinline__ bool fp4_block_small(uint32_t amax, float r) {
  return math::bits_of(math::mul_rn(math::float_of(amax), r)) < math::kF4SmallLimitBits;
}

// kVec e2m1 codes of v × r in one word, element j in bits 4j .. 4j+3 (element 2k in the low nibble
// of byte k). Where every |v × r| < 7 and r >= +0 (`small`, fp4_block_small) pack_fp4_small8;
// else where no v × r can be NaN (`num`: the block's y are finite, so its amax is below Inf's bits,
// and r is finite) the float-arithmetic encoder; else the branch-free one (all proven equal to the
// shared one by verify_encoders).
template <int kVec>
__device__ __forceinline__ uint32_t pack_fp4(const float v[kVec], float r, bool num, bool small) {
  uint32_t w = 0;
  if (small) {
    static_assert(kVec == 8, "pack_fp4_small8 packs 8 values");
    w = pack_fp4_small8(v, r);
  } else if (num) {
    // encode_f4e2m1_num, nibble by nibble: the code's low 3 bits and the sign merged by one bit
    // select, the clean nibble added into place (a shift-add).
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float p = math::mul_rn(v[j], r);
      const uint32_t nib = fp4_nibble(math::f4e2m1_num_low3(p), math::bits_of(p) >> 28);
      w += nib << (4 * j);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) w |= math::encode_f4e2m1_sel(math::mul_rn(v[j], r)) << (4 * j);
  }
  return w;
}

// The |y| maximum of a block (the exact amax of numerics.md, as bits): this thread's kN values,
// then the block's `lanes` adjacent threads (a power of two) by shuffles.
template <int kWarp, bool kFast, int kN = kFp4Vec>
__device__ __forceinline__ uint32_t fp4_block_amax(const float* y, int lanes) {
  uint32_t m = 0;
#if FN_CUDA_ARCH > 0
  if (kFast) {
    // max.NaN of |y|: for non-NaN values the float maximum of non-negative floats, whose bits
    // are the integer maximum below; any NaN gives the canonical NaN, above Inf's bits as a
    // NaN's are (block_scale looks only at amax >= Inf's bits).
    // A pairwise tree (the maximum is order-free): a dependency chain of log2(kN), not kN.
    float mf[kN];
#pragma unroll
    for (int j = 0; j < kN; ++j) mf[j] = fabsf(y[j]);
#pragma unroll
    for (int level = 1; level < kN; level *= 2)
#pragma unroll
      for (int j = 0; j < kN; j += 2 * level) mf[j] = gpu_max_nan(mf[j], mf[j + level]);
    m = math::bits_of(mf[0]);
  } else
#endif
  {
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const uint32_t b = math::bits_of(y[j]) & math::kF32AbsMask;
      m = b > m ? b : m;
    }
  }
#pragma unroll
  for (int k = 1; k < kWarp; k *= 2)
    if (k < lanes) {
      const uint32_t o = FN_SHFL_XOR(m, k, kWarp);
      m = o > m ? o : m;
    }
  return m;
}

// The block scale of amax: NVFP4 (kBlock 16) or MXFP4 (32), the shared math's
// (math::nvfp4_block_scale, math::mxfp4_block_scale) with cheaper equal steps:
// - NVFP4: (gs × amax) / 6 by math::div6_for_scale (the same code as the division, proven over
//   all 2^32 inputs), the e4m3 code by the hardware conversion where there is one (encode1,
//   proven equal to f8e4m3fn::encode by verify_encoders); r from `r_of_code` (kTable: math::nvfp4_multiplier of
//   every code, tabulated by the caller; on CUDA read at its 32-bit shared address r_table_sh) or,
//   without a table, dec(code) exactly as the code's bits moved
//   to f32's places (exponent and mantissa fields at bits 23.., 20..: a normal f32, or for
//   magnitudes below 8 a subnormal one) times 2^120, which turns bias 127 into 7, the NaN code by
//   the shared decoder;
// - MXFP4: math::mxfp4_block_scale_finite (the NaN and Inf amax handled first).
template <int kBlock, bool kTable = false>
__device__ __forceinline__ math::BlockScale block_scale(uint32_t amax, float gs, const float* r_of_code = nullptr,
                                                        uint32_t r_table_sh = 0) {
  math::BlockScale s;
  if (amax >= math::kF32InfBits) {
    s.code = kBlock == 16 ? math::f8e4m3fn::kNan : math::kE8m0Nan;
    s.r = 0.0f;
    return s;
  }
  if (kBlock == 16) {
    // The pair form with +0 as the second value, whose code 0x00 is the high byte: the code needs
    // no mask before it indexes the table (encode1 masks it).
    s.code = encode2<DType::k_f8e4m3fn>(math::div6_for_scale(math::mul_rn(gs, math::float_of(amax))), 0.0f);
    if (kTable) {
#if FN_CUDA_ARCH > 0
      s.r = gpu_load_shared4(r_table_sh + 4u * s.code);
#else
      s.r = r_of_code[s.code];
#endif
    } else {
      const uint32_t mag = s.code & math::f8e4m3fn::kMagMask;
      const float d = mag == 0x7Fu ? math::f8e4m3fn::decode(s.code)
                                   : math::mul_rn(math::float_of(((s.code & 0x80u) << 24) | (mag << 20)), 0x1p120f);
      s.r = mag == 0 ? 0.0f : math::div_rn(gs, d);
    }
    return s;
  }
  return math::mxfp4_block_scale_finite(amax);
}

}  // namespace gpu
}  // namespace fusednorm
