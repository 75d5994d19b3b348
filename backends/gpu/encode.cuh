// Compiled twice: as CUDA and as HIP. The kernels' encoders: f32 to the 16-bit input dtypes in
// pairs (round_pair, encode_words: residual sums, qk and mla outputs) and to the output formats
// two or four at a time (encode2, encode4): hardware conversions where the device has them
// (gpu_runtime.h: sm_89+'s FP8 and int8, MI300's fnuz), else the shared math; and the kernels
// with which the plugin's verify_encoders proves the two equal over all inputs (the e2m1 encoders
// of rmsnorm_fp4 too).
#pragma once

#include <stdint.h>

#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/io.cuh"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// Two f32 values rounded to a 16-bit input dtype (bf16 or f16) in one word, `lo` in the low half:
// on sm_80+ one paired conversion (cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32: round to nearest even,
// subnormals kept, overflow to Inf, like the shared encoders), elsewhere the shared encoders. The
// hardware writes its own NaN (0x7FFF), not the operations' positive NaN: callers replace the half
// of a NaN input (encode_words). verify_encoders (plugin.cuh) proves the two equal for every pair
// of non-NaN inputs, each of the 2^32 f32 patterns in both halves.
template <DType kIn>
__device__ __forceinline__ uint32_t encode_pair_soft(float lo, float hi) {
  return InTraits<kIn>::encode(lo) | (InTraits<kIn>::encode(hi) << 16);
}
template <DType kIn>
__device__ __forceinline__ uint32_t round_pair(float lo, float hi) {
#if FN_CUDA_ARCH >= 800  // the paired conversions: sm_80+
  uint32_t w;
  if (kIn == DType::kBF16) w = gpu_f32x2_to_bf16x2(lo, hi);
  else w = gpu_f32x2_to_f16x2(lo, hi);
  return w;
#else
  return encode_pair_soft<kIn>(lo, hi);
#endif
}

// kN f32 values as codes of kIn, the input dtypes (operations' outputs of the input's type): f32
// one a word; f16/bf16 two a word (element 2i in the low half) by round_pair, and where a value is
// NaN (rare: one test for the vector) its half replaced by the operations' positive NaN (the
// hardware writes its own; the shared encoders give the same code for every other value, and this
// one for every NaN). The fix is a select a half, not the shared encoders inlined: short calls run
// each instruction of a kernel about once, and its code size is part of their time.
template <DType kIn, int kN>
__device__ __forceinline__ void encode_words(const float v[kN], uint32_t* w) {
  if constexpr (InTraits<kIn>::kBytes == 4) {
#pragma unroll
    for (int j = 0; j < kN; ++j) w[j] = InTraits<kIn>::encode(v[j]);
  } else {
    constexpr uint32_t kNan = kIn == DType::kBF16 ? 0x7FC0u : 0x7E00u;  // encode_bf16/f16<false>(NaN)
    bool nan = false;
#pragma unroll
    for (int j = 0; j < kN; ++j) nan |= v[j] != v[j];
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) w[i] = round_pair<kIn>(v[2 * i], v[2 * i + 1]);
    if (nan) {
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) {
        if (v[2 * i] != v[2 * i]) w[i] = (w[i] & 0xFFFF0000u) | kNan;
        if (v[2 * i + 1] != v[2 * i + 1]) w[i] = (w[i] & 0xFFFFu) | (kNan << 16);
      }
    }
  }
}

// ---------------------------------------------------------------- output encoders
// The output format as a type: the kernel is instantiated per format, so each element's encode
// is straight-line code. Software encoders: the shared math, one element at a time.
template <DType kOut>
struct SoftFormat;
#define FN_MINIFLOAT(name, ...)                                                               \
  template <>                                                                                 \
  struct SoftFormat<DType::k_##name> {                                                        \
    static __device__ __forceinline__ uint32_t encode(float v) { return math::name::encode<false>(v); } \
  };
#include "math/formats.inc"
#undef FN_MINIFLOAT
template <>
struct SoftFormat<DType::kI8> {
  static __device__ __forceinline__ uint32_t encode(float v) { return math::encode_int8(v); }
};


// Hardware FP8 conversion (sm_89+): cvt.rn.satfinite rounds to nearest even and saturates
// finite values and infinities exactly like the shared encoders, and writes 0x7F for every NaN,
// the operations' positive NaN; two values per instruction.
//
// f8e4m3fnuz from the same instruction: fnuz (bias 8) is fn (bias 7) with every value halved and
// the codes unchanged, so fnuz(x) = fn(2x) wherever both are ordinary values: 2x is exact in f32
// (|x| < 2^127; above, 2x is Inf and saturates like the next case), and RNE on the fn grid of 2x
// is RNE on the fnuz grid of x, subnormals included (fn's 2^-9 quantum is fnuz's 2^-10 doubled).
// Three places differ; two integer fixes on the packed codes mend them:
// - zero: fn writes -0 (0x80) for negative inputs that round to zero; fnuz has no -0 (0x80 is
//   its NaN) and writes 0. No other input makes fn write 0x80, so bytes equal to 0x80 become 0
//   (fnuz_clear_neg_zero, first);
// - saturation: fnuz has a code above fn's largest, 0x7F = 240 (fn's NaN slot), and every
//   |x| > 232 (above the midpoint of 224 and 240; 232 itself ties to the even 0x7E) encodes to
//   it; fn writes 0x7E (448) there, one below: add 1 to the byte;
// - NaN: fn writes 0x7F, fnuz wants 0x80: add 1 to the byte, too.
// So: + 1 where !(|2x| <= 464), an unordered comparison that is true for NaN and |x| > 232; the
// byte never carries (0x7E, 0xFE and 0x7F are the only bytes incremented). The fixes see only
// 2x, so a kernel may hand the encoders 2x directly (Prescale below).
// verify_encoders (plugin.cuh) proves encode2 and encode4 equal to the shared math over all 2^32
// inputs on the device at hand (tests/gpu runs it).
template <DType kOut>
__device__ __forceinline__ uint32_t soft_encode2(float a, float b) {
  return SoftFormat<kOut>::encode(a) | (SoftFormat<kOut>::encode(b) << 8);
}

using math::fnuz_clear_neg_zero;  // bytes 0x80 cleared (sm_89's fnuz and MI300's)

#if FN_HIP_FNUZ_CVT
// f8e4m3fnuz by MI300's conversion: math::encode_fnuz_rne with FN_CVT_FNUZX2, kN = 2 or 4 values,
// element i in byte i (why these are the shared encoder's bytes: docs/numerics.md §3c, "MI300").
template <int kN>
__device__ __forceinline__ uint32_t fnuz_hw(const float* v) {
  return math::encode_fnuz_rne<kN>(
      v, [](uint32_t old, float lo, float hi, auto half) { return FN_CVT_FNUZX2(old, lo, hi, decltype(half)::kValue); });
}
#endif

// Prescaled encoding. Kernels that quantize as enc(y * r) multiply by r * kFactor instead (where
// prescale_rcp allows it; pre_mult, apply_mult) and call encode2_pre / encode4_pre / encode_pre,
// which expect their values multiplied by kFactor: 2 for f8e4m3fnuz on sm_89+ (the doubling
// above then costs nothing), 1 elsewhere (the plain encoders). Why rn(y * 2r) may stand for
// 2 rn(y * r): docs/numerics.md §3c.
template <DType kOut>
struct Prescale {
#if FN_CUDA_ARCH >= 890
  static constexpr float kFactor = kOut == DType::k_f8e4m3fnuz ? 2.0f : 1.0f;
#else
  static constexpr float kFactor = 1.0f;
#endif
};
// *rp = r * kFactor; false where that is not exact: 2r overflows for a finite r >= 2^127 (an f32
// subnormal scale), and the caller then multiplies by r and then by kFactor (apply_mult).
template <DType kOut>
__device__ __forceinline__ bool prescale_rcp(float r, float* rp) {
  if (Prescale<kOut>::kFactor == 1.0f) {
    *rp = r;
    return true;
  }
  *rp = math::mul_rn(r, Prescale<kOut>::kFactor);
  return !(fabsf(*rp) == INFINITY && fabsf(r) < INFINITY);
}
// A multiplier r of enc(y * r) with its prescaled form, made once per scale unit (pre_mult), and
// the multiply (apply_mult): q = rn(y * r * kFactor) where `pre` (exact), else
// rn(rn(y * r) * kFactor).
struct PreMult {
  float r, rp;
  bool pre;
};
template <DType kOut>
__device__ __forceinline__ PreMult pre_mult(float r) {
  PreMult m;
  m.r = r;
  m.pre = prescale_rcp<kOut>(r, &m.rp);
  return m;
}
template <DType kOut, int kN>
__device__ __forceinline__ void apply_mult(const PreMult& m, float q[kN]) {
  if (__builtin_expect(m.pre, 1)) {
#pragma unroll
    for (int j = 0; j < kN; ++j) q[j] = math::mul_rn(q[j], m.rp);
  } else {
#pragma unroll
    for (int j = 0; j < kN; ++j) q[j] = math::mul_rn(math::mul_rn(q[j], m.r), Prescale<kOut>::kFactor);
  }
}

// + 1 in byte k of w where !(|v2| <= 464): a compare and a predicated add (PTX, so that the
// compiler does not build the increment in another register and select it).
template <int k>
__device__ __forceinline__ void fnuz_bump_byte(uint32_t& w, float v2) {
#if FN_CUDA_ARCH > 0
  asm("{\n\t.reg .pred p;\n\tsetp.gtu.f32 p, %1, 0f43E80000;\n\t@p add.u32 %0, %0, %2;\n\t}"
      : "+r"(w)
      : "f"(fabsf(v2)), "n"(1u << (8 * k)));
#else
  if (!(fabsf(v2) <= 464.0f)) w += 1u << (8 * k);
#endif
}
// Four codes, element i in byte i, from values multiplied by Prescale<kOut>::kFactor (below).
template <DType kOut>
__device__ __forceinline__ uint32_t encode4_pre(const float v[4]);
#if FN_CUDA_ARCH >= 890
// fnuz's four codes of the doubled values v2, element i in byte i, before the saturation/NaN fix
// (fnuz_bump4): the e4m3fn conversion with negative zeros cleared; *t = the converted codes'
// magnitudes (bytes & 0x7F).
__device__ __forceinline__ uint32_t fnuz_codes4(const float v2[4], uint32_t* t) {
  const uint32_t c = encode4_pre<DType::k_f8e4m3fn>(v2);
  *t = c & 0x7F7F7F7Fu;
  return fnuz_clear_neg_zero(c, *t);
}
__device__ __forceinline__ void fnuz_bump4(uint32_t& w, const float v2[4]) {
  fnuz_bump_byte<0>(w, v2[0]);
  fnuz_bump_byte<1>(w, v2[1]);
  fnuz_bump_byte<2>(w, v2[2]);
  fnuz_bump_byte<3>(w, v2[3]);
}
#endif

// Two codes, `a` in the low byte, from values multiplied by Prescale<kOut>::kFactor.
template <DType kOut>
__device__ __forceinline__ uint32_t encode2_pre(float a, float b);
// Two codes, `a` in the low byte.
template <DType kOut>
__device__ __forceinline__ uint32_t encode2(float a, float b) {
#if FN_CUDA_ARCH >= 890  // the FP8 conversions: sm_89+
  if (kOut == DType::k_f8e4m3fn || kOut == DType::k_f8e5m2) {
    uint16_t w;
    if (kOut == DType::k_f8e4m3fn) FN_CVT_E4M3X2(w, a, b);
    else FN_CVT_E5M2X2(w, a, b);
    return w;
  }
  if (kOut == DType::k_f8e4m3fnuz) return encode2_pre<kOut>(math::mul_rn(a, 2.0f), math::mul_rn(b, 2.0f));
#endif
#if FN_HIP_FNUZ_CVT  // MI300
  if (kOut == DType::k_f8e4m3fnuz) {
    const float v[2] = {a, b};
    return fnuz_hw<2>(v);
  }
#endif
#if FN_CUDA_ARCH > 0  // CUDA device code: PTX available
  // int8: cvt.rni.sat rounds to nearest even, saturates to [-128, 127] and converts NaN to 0,
  // which is encode_int8 (also proven by verify_encoders).
  if (kOut == DType::kI8)
    return (uint32_t(gpu_f32_to_s8_sat(a)) & 0xFFu) | ((uint32_t(gpu_f32_to_s8_sat(b)) & 0xFFu) << 8);
#endif
  return soft_encode2<kOut>(a, b);
}
template <DType kOut>
__device__ __forceinline__ uint32_t encode2_pre(float a, float b) {
#if FN_CUDA_ARCH >= 890
  if (kOut == DType::k_f8e4m3fnuz) {
    uint16_t c;
    FN_CVT_E4M3X2(c, a, b);
    uint32_t w = fnuz_clear_neg_zero(c);
    fnuz_bump_byte<0>(w, a);
    fnuz_bump_byte<1>(w, b);
    return w;
  }
#endif
  return encode2<kOut>(a, b);
}

// One code (a pair's instruction with the second value unused).
template <DType kOut>
__device__ __forceinline__ uint32_t encode1(float v) {
  return encode2<kOut>(v, 0.0f) & 0xFFu;
}

// Four codes, element i in byte i, from values multiplied by Prescale<kOut>::kFactor (fnuz: the
// fixes once for the word).
template <DType kOut>
__device__ __forceinline__ uint32_t encode4_pre(const float v[4]) {
#if FN_CUDA_ARCH >= 890
  if (kOut == DType::k_f8e4m3fnuz) {
    uint32_t t;
    uint32_t w = fnuz_codes4(v, &t);
    fnuz_bump4(w, v);
    return w;
  }
#endif
#if FN_HIP_FNUZ_CVT  // MI300: the four codes in one word, the fixes once for it
  if (kOut == DType::k_f8e4m3fnuz) return fnuz_hw<4>(v);
#endif
  return encode2<kOut>(v[0], v[1]) | (encode2<kOut>(v[2], v[3]) << 16);
}

#if FN_CUDA_ARCH >= 890
// Top bit of each byte of fnuz_plain_bytes(c) set where c's byte (an e4m3fn code of 2x) is already
// fnuz's code of x: its magnitude t is neither 0 (fn's -0 is 0x80) nor 0x7E or 0x7F (saturation,
// NaN: the codes of |2x| >= 432). (t + 0x7F) has its top bit set for t >= 1, (t + 0x02) for
// t >= 0x7E; t <= 0x7F, so no sum carries out of its byte.
__device__ __forceinline__ uint32_t fnuz_plain_bytes(uint32_t c) {
  const uint32_t t = c & 0x7F7F7F7Fu;
  return (t + 0x7F7F7F7Fu) & ~(t + 0x02020202u);
}
// fnuz's codes of kN doubled values v2 = 2x (a multiple of 4) none of which saturates
// (|v2| <= 464, not NaN: the caller knows), element i in byte i of w[i / 4]: the e4m3fn
// conversion with negative zeros cleared, the one fix such values need.
template <int kN>
__device__ __forceinline__ void fnuz_codes_unsaturated(const float v2[kN], uint32_t w[kN / 4]) {
#pragma unroll
  for (int i = 0; i < kN / 4; ++i) {
    uint32_t t;
    w[i] = fnuz_codes4(v2 + 4 * i, &t);
  }
}
#endif

// kN codes (a multiple of 4) into kN / 4 words, from values multiplied by
// Prescale<kOut>::kFactor. kRareSat: the caller expects few values of |x| >= 216 (static and
// per-row scales; not group scales, where every group's largest value maps to qmax = 240) and few
// below 2^-11: fnuz then applies neither fix (negative zero, saturation/NaN) unless a code's
// magnitude is 0, 0x7E or 0x7F (fnuz_plain_bytes: the only codes that may need one), one test for
// all kN codes.
template <DType kOut, int kN, bool kRareSat>
__device__ __forceinline__ void encode_pre(const float v[kN], uint32_t w[kN / 4]) {
  if constexpr (Prescale<kOut>::kFactor != 1.0f && kRareSat) {  // fnuz on sm_89+
#if FN_CUDA_ARCH >= 890
    uint32_t plain = 0x80808080u;
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) {
      w[i] = encode4_pre<DType::k_f8e4m3fn>(v + 4 * i);  // fn's codes of 2x, no fix yet
      plain &= fnuz_plain_bytes(w[i]);
    }
    if (__builtin_expect(plain != 0x80808080u, 0)) {
#pragma unroll
      for (int i = 0; i < kN / 4; ++i) {
        w[i] = fnuz_clear_neg_zero(w[i]);
        fnuz_bump4(w[i], v + 4 * i);
      }
    }
#endif
  } else {
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) w[i] = encode4_pre<kOut>(v + 4 * i);
  }
}

// f8e4m3fnuz from halves, for group scales (where encode_pre's rare fixes would run in every
// warp: each group's largest value maps to 240). fnuz(x) is the e4m3fn code of x / 2 plus 0x10
// wherever that code's magnitude t lies in [9, 0x6F]: x / 2 is then a normal fn value below 124
// (codes 9 and up lie above 1.0625 * 2^-6; code 0x6F = 120 takes |x / 2| < 124), x a normal fnuz
// value, the fnuz grid at x twice the fn grid at x / 2 (the quanta of binade e and e - 1: the
// biases differ by one, 8 and 7, and the code's exponent field by 2), and 0x10 moves the
// exponent field by 2 without reaching the sign bit (t + 0x10 <= 0x7F). No saturation fix is
// needed: fn(x / 2) of 116 < |x / 2| < 124 is 0x6F (120), and 0x7F is fnuz's 240, which every
// |x| > 232 encodes to. h = x / 2 by the caller's multiply by r / 2 (half_exact: r / 2 exact), equal
// to rn(y * r) / 2 wherever it is a normal f32, so wherever t >= 9.
// Returns whether every byte's t lay in [9, 0x6F] (then w holds fnuz's codes; else the caller
// encodes the values another way). The test on the packed word: w = c + 0x10101010; where each
// t is in range no byte carries and each byte's magnitude t + 0x10 is at least 0x19, while a byte
// of t <= 8 gets at most 0x18 and one of t >= 0x70 wraps to below 0x10 (a carry it sends into the
// next byte can only add 1 there; the byte itself already fails). (m & 0x7F) + 0x67 has its top
// bit set exactly for m >= 0x19, no carry leaving the byte.
#if FN_CUDA_ARCH >= 890
template <int kN>
__device__ __forceinline__ bool fnuz_from_halves(const float h[kN], bool half_exact, uint32_t w[kN / 4]) {
  uint32_t ok = half_exact ? 0x80808080u : 0u;
#pragma unroll
  for (int i = 0; i < kN / 4; ++i) {
    w[i] = encode4_pre<DType::k_f8e4m3fn>(h + 4 * i) + 0x10101010u;
    ok &= (w[i] & 0x7F7F7F7Fu) + 0x67676767u;
  }
  return ok == 0x80808080u;
}
#endif
// Four codes, element i in byte i.
template <DType kOut>
__device__ __forceinline__ uint32_t encode4(const float v[4]) {
  if constexpr (Prescale<kOut>::kFactor == 1.0f) {
    return encode4_pre<kOut>(v);
  } else {
    float p[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) p[k] = math::mul_rn(v[k], Prescale<kOut>::kFactor);
    return encode4_pre<kOut>(p);
  }
}

// Exhaustive check of the kernels' encoders against the shared math: every f32 bit pattern
// (base + i for i < n), four consecutive patterns through one encode4. Counts mismatches and
// records the smallest mismatching input.
template <DType kOut>
__global__ void verify_encoder_kernel(uint64_t base, uint64_t n, unsigned long long* bad, unsigned int* first) {
  for (uint64_t i = 4 * (blockIdx.x * uint64_t(blockDim.x) + threadIdx.x); i < n;
       i += 4 * uint64_t(gridDim.x) * blockDim.x) {
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = math::float_of(uint32_t(base + i + k));
    // The 4-wide form, the pair form (mla and fp4 use it), and for formats with a prescale the
    // prescaled forms (both kRareSat choices) on every pattern as the product rn(y * r * kFactor)
    // they are given: their codes are those of that value divided by kFactor (rn(v / 2): f32
    // subnormals round, but all of them and their halves encode to 0).
    const uint32_t w4 = encode4<kOut>(v);
    const uint32_t w2 = encode2<kOut>(v[0], v[1]) | (encode2<kOut>(v[2], v[3]) << 16);
    const bool pre = Prescale<kOut>::kFactor != 1.0f;
    const uint32_t wp = pre ? encode4_pre<kOut>(v) : w4;
    uint32_t wr = wp;  // the form for rare saturation (its test of the codes' magnitudes)
    if (pre) encode_pre<kOut, 4, true>(v, &wr);
    // fnuz without the saturation fix, checked on the values that may take it (|v| <= 464).
    uint32_t wu = wp;
#if FN_CUDA_ARCH >= 890
    if (kOut == DType::k_f8e4m3fnuz && pre) fnuz_codes_unsaturated<4>(v, &wu);
#endif
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t want = SoftFormat<kOut>::encode(v[k]);
      const uint32_t want_pre = pre ? SoftFormat<kOut>::encode(math::div_rn(v[k], Prescale<kOut>::kFactor)) : want;
      const bool unsat = fabsf(v[k]) <= 464.0f;
      if (((w4 >> (8 * k)) & 0xFFu) != want || ((w2 >> (8 * k)) & 0xFFu) != want ||
          ((wp >> (8 * k)) & 0xFFu) != want_pre || ((wr >> (8 * k)) & 0xFFu) != want_pre ||
          (unsat && ((wu >> (8 * k)) & 0xFFu) != want_pre)) {
        atomicAdd(bad, 1ull);
        atomicMin(first, uint32_t(base + i + k));
      }
    }
  }
}

#if FN_CUDA_ARCH >= 890
// v[j] = rn(v[j] * m) in place, clamped to [-qc, qc] with qc = rn(qclamp * k) where `clamped`.
template <int kN>
__device__ __forceinline__ void mul_clamp(float v[kN], float m, bool clamped, float qclamp, float k) {
#pragma unroll
  for (int j = 0; j < kN; ++j) v[j] = math::mul_rn(v[j], m);
  if (clamped) {
    const float qc = math::mul_rn(qclamp, k);
#pragma unroll
    for (int j = 0; j < kN; ++j) v[j] = math::clamp_sym(v[j], qc);
  }
}
// The fnuz codes of a step of group scales, y * r from halves (fnuz_from_halves: y * (r / 2), a
// clamp bound halved alike); false where a word was refused or r / 2 is not exact (the caller
// then encodes the step through encode_pre, from its own copy of y).
template <int kN>
__device__ __forceinline__ bool fnuz_group_codes(const float y[kN], float r, bool clamped, float qclamp,
                                                 uint32_t w[kN / 4]) {
  const float rh = math::mul_rn(r, 0.5f);
  float h[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j) h[j] = y[j];
  mul_clamp<kN>(h, rh, clamped, qclamp, 0.5f);
  return fnuz_from_halves<kN>(h, math::mul_rn(rh, 2.0f) == r, w);
}
// The fnuz codes of a step y whose values y * 2r (rp = 2r, exact) none saturates (|y * 2r| <= 464
// and no NaN: the caller knows), a clamp bound doubled alike: fnuz_codes_unsaturated. y becomes
// y * 2r.
template <int kN>
__device__ __forceinline__ void fnuz_unsaturated_step(float y[kN], float rp, bool clamped, float qclamp,
                                                      uint32_t w[kN / 4]) {
  mul_clamp<kN>(y, rp, clamped, qclamp, 2.0f);
  fnuz_codes_unsaturated<kN>(y, w);
}
#endif

// The same check for fnuz_from_halves: position k of a word holds (u + k * 2^23) with its sign
// flipped for odd k (a binade apart, so that words mix values inside and outside the fast range,
// and every position sees every pattern), given as rn(v / 2) with half_exact true. Where the
// function accepts a word, each byte must be the shared encoder's fnuz code of v (its refusals go
// to encode_pre, whose check is the kernel above); a word whose four |v / 2| lie in [2^-5, 64]
// must be accepted (so that a function refusing everything fails too).
template <int kUnused = 0>
__global__ void verify_fnuz_halves_kernel(uint64_t base, uint64_t n, unsigned long long* bad, unsigned int* first) {
#if FN_CUDA_ARCH >= 890
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t u = uint32_t(base + i);
    float v[4], h[4];
    bool inner = true;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[k] = math::float_of((u + uint32_t(k) * 0x00800000u) ^ (uint32_t(k & 1) << 31));
      h[k] = math::mul_rn(v[k], 0.5f);
      inner = inner && fabsf(h[k]) >= 0x1p-5f && fabsf(h[k]) <= 64.0f;
    }
    uint32_t w;
    bool wrong = false;
    if (fnuz_from_halves<4>(h, true, &w)) {
#pragma unroll
      for (int k = 0; k < 4; ++k) wrong = wrong || ((w >> (8 * k)) & 0xFFu) != SoftFormat<DType::k_f8e4m3fnuz>::encode(v[k]);
    } else {
      wrong = inner;
    }
    if (wrong) {
      atomicAdd(bad, 1ull);
      atomicMin(first, u);
    }
  }
#else
  (void)base; (void)n; (void)bad; (void)first;
#endif
}

// The same check for round_pair<kIn>: word i holds patterns base + i (low half) and base + i + 1
// (high half, mod 2^32), so every pattern is checked in both halves; pairs with a NaN are skipped
// (the kernel rounds those by the shared encoder).
template <DType kIn>
__global__ void verify_pair_kernel(uint64_t base, uint64_t n, unsigned long long* bad, unsigned int* first) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t a = uint32_t(base + i), b = a + 1u;
    const float lo = math::float_of(a), hi = math::float_of(b);
    if (lo != lo || hi != hi) continue;
    const uint32_t want = encode_pair_soft<kIn>(lo, hi);
    if (round_pair<kIn>(lo, hi) != want) {
      atomicAdd(bad, 1ull);
      atomicMin(first, a);
    }
  }
}

// The same check for the kernels' e2m1 encoders: branch-free (math::encode_f4e2m1_sel) on every
// input, float arithmetic (math::encode_f4e2m1_num) on every non-NaN input, and
// math::f4e2m1_small_low (its low byte the magnitude code, bits 3-7 clear) on every |v| < 7. Each
// side out of line, so that the compiler cannot fold the comparison (they compute the same
// expressions).
inline __device__ __noinline__ uint32_t f4_sel_out_of_line(float v) { return math::encode_f4e2m1_sel(v); }
inline __device__ __noinline__ uint32_t f4_num_out_of_line(float v) { return math::encode_f4e2m1_num(v); }
inline __device__ __noinline__ uint32_t f4_small_out_of_line(float v) { return math::f4e2m1_small_low(v); }
inline __device__ __noinline__ uint32_t f4_ref_out_of_line(float v) { return math::f4e2m1::encode<false>(v); }
__device__ __forceinline__ bool f4_small_differs(uint32_t u, uint32_t want) {
  if ((u & math::kF32AbsMask) >= math::kF4SmallLimitBits) return false;
  const uint32_t low = f4_small_out_of_line(math::float_of(u & math::kF32AbsMask)) & 0xFFu;
  return (low & 0xF8u) != 0 || (low | ((u >> 28) & 8u)) != want;
}
template <int kUnused = 0>
__global__ void verify_f4_kernel(uint64_t base, uint64_t n, unsigned long long* bad, unsigned int* first) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t u = uint32_t(base + i);
    const float v = math::float_of(u);
    const uint32_t want = f4_ref_out_of_line(v);
    if (f4_sel_out_of_line(v) != want || (v == v && f4_num_out_of_line(v) != want) || f4_small_differs(u, want)) {
      atomicAdd(bad, 1ull);
      atomicMin(first, u);
    }
  }
}

using VerifyKernel = void (*)(uint64_t, uint64_t, unsigned long long*, unsigned int*);

}  // namespace gpu
}  // namespace fusednorm
