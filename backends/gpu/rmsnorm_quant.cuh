// Compiled twice: as CUDA (backends/cuda) and as HIP (backends/hip).
// rmsnorm_quant on the GPU (docs/architecture.md, "GPU kernel"). One row per group of T threads,
// the row read once and kept in registers. Thread t owns the kVec partial sums kVec*t .. kVec*t +
// kVec - 1 of the canonical reduction (docs/numerics.md §2), i.e. elements s*P + kVec*t + j for
// steps s < S, which it accumulates in step order; the pairwise tree continues across threads
// with shfl_xor and across warps through shared memory. kVec * kSteps = 32 elements a thread in
// the general kernel, 20 to 48 in the fast ones (fast_vec). The grid is persistent: each block
// walks over groups of R rows (resident blocks hide each other's load latency; the block's next
// rows are prefetched into L2, not into registers, which measured slower). Block shape and
// kernel depend on H, the dtypes and the options only; the grid size depends on the row count but
// no row's arithmetic does (batch invariance). A block with a single row group (short calls)
// runs a copy of the row body tuned for latency: the same arithmetic, other instruction order
// (CUDA only).
#pragma once

#include <stdint.h>

#include "backends/gpu/gpu_runtime.h"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// log2 of a power of two, at compile time.
__host__ __device__ constexpr int ilog2(int v) { return v <= 1 ? 0 : 1 + ilog2(v / 2); }
template <int N>
struct IntConstant {
  static constexpr int value = N;
};
template <DType D>
struct DTypeConstant {
  static constexpr DType value = D;
};

// kVec * kSteps, the row share a thread keeps in registers: 32 elements (general kernel), or what
// fast_vec gives a fast kernel (20 to 48).
constexpr int kElemsPerThread = 32;
constexpr int kMaxBlockThreads = 1024;
constexpr int kMaxSteps = 8;
constexpr int kRowThreads = 256;  // threads of a block when rows are short (R rows of T threads)

struct RowShape {
  int32_t vec;              // elements per access
  int32_t threads_per_row;  // T = P / vec
  int32_t rows_per_block;   // R
  int32_t steps;            // S = ceil(H / P)
  int32_t partials;         // P
};

// From H alone (batch invariance: never from the row count), with vectors of `vec` elements (at
// most the partials P), or the general kernel's: 8 when S <= 4, else 4.
inline RowShape row_shape(int64_t h, int vec = 0) {
  RowShape s;
  s.partials = int32_t(math::reduction_partials(h));
  s.steps = int32_t((h + s.partials - 1) / s.partials);
  s.vec = vec != 0 ? vec : s.steps <= kElemsPerThread / 8 ? 8 : 4;
  s.threads_per_row = s.partials / s.vec;
  s.rows_per_block = s.threads_per_row >= kRowThreads ? 1 : kRowThreads / s.threads_per_row;
  return s;
}

// How a row's elements may be accessed: vectors of kVec elements, whole elements, or bytes (a
// pointer not aligned to its element size is legal in the API).
enum Access : int32_t { kBytesOnly = 0, kElements = 1, kVectors = 2 };

struct Accesses {
  int32_t in;   // input and residual
  int32_t out;  // codes
  int32_t w;    // weight
};

// ---------------------------------------------------------------- element access
// A vector of kVec elements travels as 32-bit words: one per f32, two 16-bit codes per word
// (element 2i in the low half), four 8-bit codes per word.

template <int kBytes>
__device__ __forceinline__ uint32_t load_elem(const char* row, int32_t i, int32_t access) {
  if (access != kBytesOnly) {
    if (kBytes == 2) return reinterpret_cast<const uint16_t*>(row)[i];
    if (kBytes == 4) return reinterpret_cast<const uint32_t*>(row)[i];
    return reinterpret_cast<const uint8_t*>(row)[i];
  }
  const uint8_t* p = reinterpret_cast<const uint8_t*>(row) + i * kBytes;
  uint32_t v = 0;
#pragma unroll
  for (int b = 0; b < kBytes; ++b) v |= uint32_t(p[b]) << (8 * b);
  return v;
}

template <int kBytes>
__device__ __forceinline__ void store_elem(char* row, int32_t i, uint32_t v, int32_t access) {
  if (access != kBytesOnly) {
    if (kBytes == 2) reinterpret_cast<uint16_t*>(row)[i] = uint16_t(v);
    else if (kBytes == 4) reinterpret_cast<uint32_t*>(row)[i] = v;
    else reinterpret_cast<uint8_t*>(row)[i] = uint8_t(v);
    return;
  }
  uint8_t* p = reinterpret_cast<uint8_t*>(row) + i * kBytes;
#pragma unroll
  for (int b = 0; b < kBytes; ++b) p[b] = uint8_t(v >> (8 * b));
}

// Words of kN elements of kBytes each: 4, 8, 16 or 32 bytes.
template <int kBytes, int kN>
struct Vec {
  static constexpr int kWords = (kBytes * kN + 3) / 4;
  static constexpr int kPerWord = 4 / kBytes < 1 ? 1 : 4 / kBytes;
};

// Word i of a vector at element e, element by element (a partial vector, or a row not aligned
// for vectors): out of line, so the vector path's register allocation does not carry it.
template <int kBytes>
__device__ __noinline__ uint32_t load_word_slow(const char* row, int32_t e, int32_t h, int32_t access) {
  constexpr int kPer = 4 / kBytes;
  uint32_t w = 0;
  for (int j = 0; j < kPer; ++j)
    if (e + j < h) w |= load_elem<kBytes>(row, e + j, access) << (8 * kBytes * j);
  return w;
}
template <int kBytes>
__device__ __noinline__ void store_word_slow(char* row, int32_t e, int32_t h, int32_t access, uint32_t w) {
  constexpr int kPer = 4 / kBytes;
  constexpr uint32_t kMask = kBytes == 4 ? 0xFFFFFFFFu : (1u << (8 * kBytes)) - 1;
  for (int j = 0; j < kPer; ++j)
    if (e + j < h) store_elem<kBytes>(row, e + j, (w >> (8 * kBytes * j)) & kMask, access);
}

// Loads elements e .. e+kN-1 of a row; elements at or past h read as 0.
// kFast: the caller guarantees a full, aligned vector.
template <int kBytes, int kN, bool kFast = false>
__device__ __forceinline__ void load_vec(const char* row, int32_t e, int32_t h, int32_t access,
                                         uint32_t w[Vec<kBytes, kN>::kWords]) {
  constexpr int kWords = Vec<kBytes, kN>::kWords;
  const char* p = row + e * kBytes;
  if (kFast || (access == kVectors && e + kN <= h)) {
    // Read-only path: every element is read once (an in-place residual by the thread that
    // writes it back, after the read).
    if (kWords == 1) {
      w[0] = FN_LOAD_RO(reinterpret_cast<const uint32_t*>(p));
    } else if (kWords == 2) {
      const uint2 q = FN_LOAD_RO(reinterpret_cast<const uint2*>(p));
      w[0] = q.x; w[1] = q.y;
    } else {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        const uint4 q = FN_LOAD_RO(reinterpret_cast<const uint4*>(p) + i);
        w[4 * i] = q.x; w[4 * i + 1] = q.y; w[4 * i + 2] = q.z; w[4 * i + 3] = q.w;
      }
    }
    return;
  }
  constexpr int kPer = Vec<kBytes, kN>::kPerWord;
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = load_word_slow<kBytes>(row, e + i * kPer, h, access);
}

template <int kBytes, int kN, bool kFast = false>
__device__ __forceinline__ void store_vec(char* row, int32_t e, int32_t h, int32_t access,
                                          const uint32_t w[Vec<kBytes, kN>::kWords]) {
  constexpr int kWords = Vec<kBytes, kN>::kWords;
  char* p = row + e * kBytes;
  if (kFast || (access == kVectors && e + kN <= h)) {
    if (kWords == 1) {
      FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(p), w[0]);
    } else if (kWords == 2) {
      FN_STORE_GLOBAL(reinterpret_cast<uint2*>(p), make_uint2(w[0], w[1]));
    } else {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i)
        FN_STORE_GLOBAL(reinterpret_cast<uint4*>(p) + i, make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]));
    }
    return;
  }
  constexpr int kPer = Vec<kBytes, kN>::kPerWord;
#pragma unroll
  for (int i = 0; i < kWords; ++i) store_word_slow<kBytes>(row, e + i * kPer, h, access, w[i]);
}

// Input dtypes: element j of a vector's words as f32, and f32 back to the dtype's bits
// (round to nearest even; operations write the positive NaN).
template <DType kIn>
struct InTraits;
template <>
struct InTraits<DType::kF32> {
  static constexpr int kBytes = 4;
  static __device__ __forceinline__ float get(const uint32_t* w, int j) { return math::float_of(w[j]); }
  static __device__ __forceinline__ uint32_t encode(float v) { return math::encode_f32<false>(v); }
};
template <>
struct InTraits<DType::kBF16> {
  static constexpr int kBytes = 2;
  static __device__ __forceinline__ float get(const uint32_t* w, int j) {
    return math::float_of(j % 2 == 0 ? w[j / 2] << 16 : w[j / 2] & 0xFFFF0000u);
  }
  static __device__ __forceinline__ uint32_t encode(float v) { return math::encode_bf16<false>(v); }
};
template <>
struct InTraits<DType::kF16> {
  static constexpr int kBytes = 2;
  static __device__ __forceinline__ float get(const uint32_t* w, int j) {
    const uint32_t hbits = j % 2 == 0 ? w[j / 2] & 0xFFFFu : w[j / 2] >> 16;
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
    // The hardware conversion is exact for every finite f16 and keeps Inf; a NaN stays a NaN
    // (its payload never reaches an output: operations write the positive NaN).
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(uint16_t(hbits)));
    return f;
#else
    return math::decode_f16(hbits);
#endif
  }
  static __device__ __forceinline__ uint32_t encode(float v) { return math::encode_f16<false>(v); }
};

// Two f32 values rounded to a 16-bit input dtype (bf16 or f16) in one word, `lo` in the low half:
// on sm_80+ one paired conversion (cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32: round to nearest even,
// subnormals kept, overflow to Inf, like the shared encoders), elsewhere the shared encoders. The
// hardware writes its own NaN (0x7FFF), not the operations' positive NaN: callers redo words with a
// NaN input by InTraits::encode. verify_encoders (plugin.cuh) proves the two equal for every pair
// of non-NaN inputs, each of the 2^32 f32 patterns in both halves.
template <DType kIn>
__device__ __forceinline__ uint32_t encode_pair_soft(float lo, float hi) {
  return InTraits<kIn>::encode(lo) | (InTraits<kIn>::encode(hi) << 16);
}
template <DType kIn>
__device__ __forceinline__ uint32_t round_pair(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIPCC__)
  uint32_t w;
  if (kIn == DType::kBF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
#else
  return encode_pair_soft<kIn>(lo, hi);
#endif
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

// Four codes, element i in byte i.
template <DType kOut>
__device__ __forceinline__ uint32_t soft_encode4(const float v[4]) {
  return SoftFormat<kOut>::encode(v[0]) | (SoftFormat<kOut>::encode(v[1]) << 8) |
         (SoftFormat<kOut>::encode(v[2]) << 16) | (SoftFormat<kOut>::encode(v[3]) << 24);
}

// Hardware FP8 conversion (sm_89+): cvt.rn.satfinite rounds to nearest even and saturates
// finite values and infinities exactly like the shared encoders, and writes 0x7F for every NaN,
// the operations' positive NaN; two values per instruction. verify_encoders (plugin.cuh) proves
// encode4 equal to the shared math over all 2^32 inputs on the device at hand (tests/gpu runs it).
template <DType kOut>
__device__ __forceinline__ uint32_t encode4(const float v[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(__HIPCC__)
  if (kOut == DType::k_f8e4m3fn || kOut == DType::k_f8e5m2) {
    uint16_t lo, hi;  // cvt puts its first source in the upper byte
    if (kOut == DType::k_f8e4m3fn) {
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(v[1]), "f"(v[0]));
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(v[3]), "f"(v[2]));
    } else {
      asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(v[1]), "f"(v[0]));
      asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(v[3]), "f"(v[2]));
    }
    return uint32_t(lo) | (uint32_t(hi) << 16);
  }
#endif
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  // int8: cvt.rni.sat rounds to nearest even, saturates to [-128, 127] and converts NaN to 0,
  // which is encode_int8 (also proven by verify_encoders).
  if (kOut == DType::kI8) {
    uint32_t w = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int32_t q;
      asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(q) : "f"(v[i]));
      w |= (uint32_t(q) & 0xFFu) << (8 * i);
    }
    return w;
  }
#endif
  return soft_encode4<kOut>(v);
}

// A scale is one store where its address is aligned for its size, else bytes (a scale tensor
// may sit at any alignment). `base` is the row's scale pointer (or, packed, its output row + H).
__device__ __forceinline__ void store_scale(const RmsnormQuantCall& c, char* base, int32_t group, uint32_t stored) {
  char* p = c.packed ? base : base + group * c.scale_col_stride;
  const int bytes = c.packed || c.scale_type == math::ScaleType::kF32 ? 4
                    : c.scale_type == math::ScaleType::kE8M0        ? 1
                                                                     : 2;
  if ((reinterpret_cast<uintptr_t>(p) & uintptr_t(bytes - 1)) == 0) {
    if (bytes == 4) FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(p), stored);
    else if (bytes == 2) FN_STORE_GLOBAL(reinterpret_cast<uint16_t*>(p), uint16_t(stored));
    else FN_STORE_GLOBAL(reinterpret_cast<uint8_t*>(p), uint8_t(stored));
    return;
  }
  for (int b = 0; b < bytes; ++b) reinterpret_cast<uint8_t*>(p)[b] = uint8_t(stored >> (8 * b));
}

// ---------------------------------------------------------------- reductions within a row
// A row's T threads are T consecutive lanes of the block (T a power of two); shfl_xor pairs
// lanes t and t^m, in the canonical pairwise order for sums.

// The unsigned maximum as a reduction's pairwise step (amax bits): order-free, so a whole warp's
// takes one redux instruction on sm_80+ instead of a butterfly of shuffles.
struct MaxU32 {
  __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; }
};

// v combined over a whole warp: the butterfly of shfl_xor (for sums, the canonical pairwise order).
template <int kWarp, class T, class Combine>
__device__ __forceinline__ T warp_reduce(T v, Combine combine) {
#pragma unroll
  for (int m = 1; m < kWarp; m *= 2) v = combine(v, FN_SHFL_XOR(v, m, kWarp));
  return v;
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIPCC__)
template <int kWarp>
__device__ __forceinline__ uint32_t warp_reduce(uint32_t v, MaxU32) {
  return __reduce_max_sync(0xFFFFFFFFu, v);
}
#endif

// Calls f(IntConstant<L>()) for the run-time lanes L, a power of two in [kMin, kMax].
template <int kMin, int kMax, class F>
__device__ __forceinline__ void with_lanes(int lanes, F f) {
  if constexpr (kMin < kMax) {
    if (lanes == kMin) f(IntConstant<kMin>());
    else with_lanes<2 * kMin, kMax>(lanes, f);
  } else {
    f(IntConstant<kMin>());
  }
}

// Whether row_reduce_finish combines a row's warp results in registers (combine_shared) or by a
// warp's butterfly.
#ifdef FN_GPU_LOCAL_COMBINE
constexpr bool kLocalCombine = FN_GPU_LOCAL_COMBINE;
#else
constexpr bool kLocalCombine = false;
#endif

// kN values at r (aligned to kN values, at most 16 bytes), combined pairwise in registers:
// (r0 . r1) . (r2 . r3) ..., the canonical tree.
template <int kN, class T, class Combine>
__device__ __forceinline__ T combine_shared(const T* r, Combine combine) {
  static_assert(sizeof(T) == 4 && kN >= 2, "4-byte values, at least 2");
  constexpr int kPer = kN < 4 ? kN : 4;
  struct alignas(4 * kPer) Pack {
    T v[kPer];
  };
  T v[kN];
#pragma unroll
  for (int i = 0; i < kN / kPer; ++i) {
    const Pack q = reinterpret_cast<const Pack*>(r)[i];
#pragma unroll
    for (int j = 0; j < kPer; ++j) v[kPer * i + j] = q.v[j];
  }
#pragma unroll
  for (int n = kN; n > 1; n /= 2)
#pragma unroll
    for (int j = 0; j < n / 2; ++j) v[j] = combine(v[2 * j], v[2 * j + 1]);
  return v[0];
}

// A row's reduction followed by its scalar formula (inv_rms, the scale): below the warp every
// lane reduces and evaluates it; above, warp results meet in shared memory `red`, the row's
// first warp combines them in the same pairwise order and its lane 0 evaluates the formula once
// for the row, and after a second barrier every thread reads the result from `out`. A caller
// alternates between two `red` and two `out` buffers from row to row: a buffer is written again
// only after barriers that every reader of its previous contents has passed. Combine(a, b) is
// the reduction's pairwise step, with combine(x, 0) == x for every x a row can produce (a maximum;
// sums of squares, which are never -0), since the warp results are combined by a full warp with 0
// past the row's warps; every thread of the block must call this. !kOnce: every warp of
// the row combines the warp results and evaluates the formula itself (one barrier instead of
// two, the formula once per warp).
template <int kWarp, bool kOnce, bool kLocal = kLocalCombine, class T, class Combine, class Finish>
__device__ __forceinline__ auto row_reduce_finish(T v, int t, int threads_per_row, int row_in_block, T* red,
                                                  Combine combine, Finish finish, decltype(finish(v))* out)
    -> decltype(finish(v)) {
  if (threads_per_row >= kWarp) {
    v = warp_reduce<kWarp>(v, combine);
  } else {
#pragma unroll
    for (int m = 1; m < kWarp; m *= 2)
      if (m < threads_per_row) v = combine(v, FN_SHFL_XOR(v, m, kWarp));
  }
  if (threads_per_row <= kWarp) return finish(v);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;  // kWarp: a power of two
  const int first = warp - t / kWarp;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (!kOnce || warp == first) {
    const int n = threads_per_row / kWarp;
    T p;
    if (kLocal && n <= 8) {
      // Every lane reads the row's n warp results (vector loads of one address: broadcasts) and
      // combines them in registers in the same pairwise tree: no shuffle latencies.
      with_lanes<2, 8>(n, [&](auto n_c) { p = combine_shared<decltype(n_c)::value>(red + first, combine); });
    } else {
      // Lanes past the row's n warps hold 0 and the levels past n combine with it: no conditions.
      p = warp_reduce<kWarp>(lane < n ? red[first + lane] : T(0), combine);
    }
    // Every warp evaluates it; the butterfly left the same bits in every lane (its pairwise
    // steps are commutative).
    if (!kOnce) return finish(p);
    if (lane == 0) out[row_in_block] = finish(p);
  }
  __syncthreads();
  return out[row_in_block];
}

// A row's address: one multiply for the common single leading dimension; the general index
// (64-bit divisions) out of line.
inline __device__ __noinline__ char* row_ptr_general(const LeadShape& lead, const RowView& v, int64_t row) {
  return row_ptr(lead, v, row);
}
template <bool kFast>
__device__ __forceinline__ char* row_at(const LeadShape& lead, const RowView& v, int64_t row) {
  return kFast || lead.ndim <= 1 ? v.data + row * v.strides[0] : row_ptr_general(lead, v, row);
}

// max over values of (bits & 0x7FFFFFFF), the exact amax of numerics.md.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIPCC__)
// sm_80+: one max.NaN with |y| per value (FMNMX.NAN, |R|). A NaN makes the maximum the canonical
// NaN, 0x7FFFFFFF, not the largest NaN's bits: dynamic_scale treats every value at or above Inf's
// bits alike, and the other values are ordered as floats exactly as their bits are.
struct AbsMax {
  float m = 0.0f;
  __device__ __forceinline__ void add(float y) {
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(m), "f"(fabsf(y)));
  }
  __device__ __forceinline__ uint32_t bits() const { return math::bits_of(m) & math::kF32AbsMask; }
};
#else
// Two integer maxima and no masking per value: as signed integers the bits of non-negative floats
// exceed those of negative ones, and among the negatives larger magnitudes have larger bits,
// signed or unsigned; as unsigned integers the negatives exceed the rest. So the signed maximum
// holds the largest non-negative value (or, with none, the largest-magnitude negative) and the
// unsigned maximum the largest-magnitude negative (or, with none, the largest non-negative): the
// larger of the two, masked, is the answer.
struct AbsMax {
  int32_t smax = INT32_MIN;
  uint32_t umax = 0;
  __device__ __forceinline__ void add(float y) {
    const uint32_t b = math::bits_of(y);
    smax = int32_t(b) > smax ? int32_t(b) : smax;
    umax = b > umax ? b : umax;
  }
  __device__ __forceinline__ uint32_t bits() const {
    const uint32_t a = uint32_t(smax) & math::kF32AbsMask, u = umax & math::kF32AbsMask;
    return a > u ? a : u;
  }
};
#endif

// Weight element j of a vector as f32.
__device__ __forceinline__ float weight_elem(DType w_type, const uint32_t* w, int j) {
  return w_type == DType::kF32    ? InTraits<DType::kF32>::get(w, j)
         : w_type == DType::kBF16 ? InTraits<DType::kBF16>::get(w, j)
                                  : InTraits<DType::kF16>::get(w, j);
}

// g = w + weight_offset for elements e .. e+kN-1 (past H: offset alone; callers zero y there).
template <int kN, bool kFast>
__device__ __forceinline__ void load_gamma(const RmsnormQuantCall& c, int32_t e, int32_t h, int32_t access, float g[kN]) {
  if (c.w_type == DType::kF32) {
    uint32_t ww[Vec<4, kN>::kWords];
    load_vec<4, kN, kFast>(c.weight, e, h, access, ww);
#pragma unroll
    for (int j = 0; j < kN; ++j) g[j] = math::add_rn(math::float_of(ww[j]), c.weight_offset);
  } else {
    uint32_t ww[Vec<2, kN>::kWords];
    load_vec<2, kN, kFast>(c.weight, e, h, access, ww);
#pragma unroll
    for (int j = 0; j < kN; ++j) g[j] = math::add_rn(weight_elem(c.w_type, ww, j), c.weight_offset);
  }
}

// kWords 32-bit words from weight-table slots (16 bytes each, `stride` slots apart), as a step's
// cp.async copy left them there.
template <int kWords>
__device__ __forceinline__ void read_slot_words(const float4* slot, int stride, uint32_t w[kWords]) {
  if constexpr (kWords >= 4) {
#pragma unroll
    for (int q = 0; q < kWords / 4; ++q) {
      const uint4 u = reinterpret_cast<const uint4*>(slot)[q * stride];
      w[4 * q] = u.x; w[4 * q + 1] = u.y; w[4 * q + 2] = u.z; w[4 * q + 3] = u.w;
    }
  } else {
    memcpy(w, slot, kWords * 4);
  }
}

// ---------------------------------------------------------------- the kernel

// Register budget: a block of up to 1024 threads (kVec 4) must fit 64 registers a thread; the
// kVec >= 8 kernels (at most 512 threads) may use FN_GPU_MAXNREG8.
#if defined(__HIPCC__)
#define FN_KERNEL_BOUNDS(kVec) __launch_bounds__(kMaxBlockThreads)
#else
#ifndef FN_GPU_MAXNREG8
#define FN_GPU_MAXNREG8 64  // measured best: 4 blocks of 256 (tests/scripts/gpu_variants.sh)
#endif
#define FN_KERNEL_BOUNDS(kVec) __maxnreg__((kVec) >= 8 ? FN_GPU_MAXNREG8 : 64)
#endif

// What a kernel is compiled for. kAll: the general kernel, every option decided at run time, any
// alignment, stride and step count. The fast kernels are made for one way of scaling (their
// code holds no other: a third to a fifth of the general kernel's, which is what decode calls
// wait for, and no per-row checks of the other modes), with every view vector-aligned, one
// leading dimension and a row of exactly kSteps whole steps (H = kSteps * P), so they have no
// element paths and no per-step conditions. The residual, the clamp and norm or quant only stay
// run-time choices in every kernel.
enum class Plan : int32_t {
  kAll = 0,
  kStatic = 1,  // one scale for the tensor
  kRow = 2,     // dynamic, one scale a row (per-row, or groups of at least H)
  kGroup = 3,   // dynamic, groups inside a step (G <= P)
};

// The step counts with fast kernels: 4 to 8 (H < 64 has fewer steps and takes the general kernel).
inline bool fast_steps(const RowShape& s) { return s.steps >= 4 && s.steps <= 8; }

// The vectors of a fast kernel of S steps: 8 elements for 4 steps and, with 16-bit inputs, for 5
// and 6 steps (40 or 48 elements a thread: such kernels compute y again where it is used instead
// of keeping it, and a row takes half the threads of 4-element vectors, whose 20 or 24 elements
// a thread left the per-row work dominant: measured at H 5120, 104.5 against 87 us); 4 elsewhere.
// tests/scripts/gpu_variants.sh measured 56 and 64 elements a thread slower (H 7168, 16384).
constexpr int fast_vec(DType in, int steps) { return steps <= 4 || (in != DType::kF32 && steps <= 6) ? 8 : 4; }

// The row shape of the fast kernels for H and the input dtype (fast_vec's vectors where
// fast_steps holds), or the general one; the caller falls back to row_shape(h) when fast_plan
// finds no fast kernel.
inline RowShape fast_row_shape(int64_t h, DType in) {
  const RowShape s = row_shape(h);
  return fast_steps(s) ? row_shape(h, fast_vec(in, s.steps)) : s;
}

// Groups inside a step take G / vec lanes, a power of two that must be at least the step count
// (the group path computes a warp's scales for all steps at once, one group per lane); the fast
// group kernel also wants a row of at least a warp (its lanes store their own group's scale).
inline bool step_groups_fit(int64_t group, const RowShape& s) {
  return group <= s.partials && group / s.vec >= s.steps && s.threads_per_row >= kGpuWarp;
}

// The fast kernel's plan for a call whose views allow one (vector-aligned, one leading
// dimension, H a whole number of steps) in row shape s, or kAll. Groups larger than a step but
// smaller than the row (H <= 4 G), or too small for the lanes rule above, take the general
// kernel. From the options and H alone (batch invariance).
inline Plan fast_plan(const RmsnormQuantCall& c, const RowShape& s) {
  if (!fast_steps(s) || c.h % s.partials != 0) return Plan::kAll;
  if (c.mode == FUSEDNORM_SCALE_STATIC) return Plan::kStatic;
  if (c.mode == FUSEDNORM_SCALE_DYNAMIC_ROW || c.group >= c.h) return Plan::kRow;
  return step_groups_fit(c.group, s) ? Plan::kGroup : Plan::kAll;
}

// Steps a thread holds in the kernel chosen (the weight table in shared memory has that many).
inline int kernel_steps(const RowShape& s, Plan plan) { return plan != Plan::kAll ? s.steps : kElemsPerThread / s.vec; }

// FN_GPU_TRACE (tuning harness only, tests/bench/gpu_variants.cu): block 0's thread 0 adds the
// clock64 cycles from kernel entry to each phase of its first row group to fn_trace[phase]
// (phases 1 to 11, FN_TRACE below), and globaltimer intervals between launches to
// fn_trace[20..22]; fn_trace[31] counts launches.
#ifdef FN_GPU_TRACE
__device__ unsigned long long fn_trace[32];
__device__ unsigned long long fn_trace_last_end;
__device__ __forceinline__ unsigned long long fn_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define FN_TRACE(k)                                                                          \
  do {                                                                                       \
    if (blockIdx.x == 0 && threadIdx.x == 0 && fn_first)                                     \
      atomicAdd(&fn_trace[k], (unsigned long long)(clock64() - fn_t0));                      \
  } while (0)
#else
#define FN_TRACE(k) \
  do {              \
  } while (0)
#endif

template <DType kIn, DType kOut, int kWarp, int kVec, int kSteps, Plan kPlan>
__global__ void FN_KERNEL_BOUNDS(kVec)
    rmsnorm_quant_kernel(FN_GRID_CONSTANT const RmsnormQuantCall c, const RowShape shape, const Accesses acc, const int32_t gamma_smem) {
  constexpr bool kFast = kPlan != Plan::kAll;
  // Who evaluates a row's formula after its block reduction (row_reduce_finish): measured best
  // (docs/performance.md), every warp for inv_rms in the per-row and static kernels and for the
  // scale in the per-row kernels, the row's first warp elsewhere (the group kernels: 1% slower at
  // 16384 x 8192 with every warp). The knobs
  // FN_GPU_INV_ONCE / FN_GPU_SCALE_ONCE (0 or 1) force one choice.
#ifdef FN_GPU_INV_ONCE
  constexpr bool kInvOnce = FN_GPU_INV_ONCE;
#else
  constexpr bool kInvOnce = kPlan != Plan::kRow && kPlan != Plan::kStatic;
#endif
#ifdef FN_GPU_SCALE_ONCE
  constexpr bool kScaleOnce = FN_GPU_SCALE_ONCE;
#else
  constexpr bool kScaleOnce = kPlan != Plan::kRow;
#endif
  // Where the fast kernels' latency-tuned copy (row_group below) waits for its weight table's
  // copies and converts it (table_finish): 0 at once, 1 after the residual, 2 after the sum of
  // squares' reduction (the loop: at once).
#ifdef FN_GPU_GAMMA_LATE
  constexpr int kGammaLate = FN_GPU_GAMMA_LATE;
#else
  constexpr int kGammaLate = 2;
#endif
  using In = InTraits<kIn>;
  using InVec = Vec<In::kBytes, kVec>;
  constexpr int kW = InVec::kWords;
#if defined(__HIPCC__)
  constexpr bool kGammaSmem = false;  // 64 KiB of LDS: the host decides per shape
#else
  constexpr bool kGammaSmem = true;   // >= 163 KiB of shared memory on sm_80 and sm_90
#endif
  constexpr int kWarps = kMaxBlockThreads / 32;
  __shared__ __align__(16) float red_sum[2][kWarps];  // combine_shared reads vectors
  __shared__ __align__(16) uint32_t red_max[2][kWarps];
  // Per-row results of the reductions (rows of more than a warp: at most kRowThreads / 64 a block).
  __shared__ float inv_of_row[2][kRowThreads / 32];
  __shared__ math::DynamicScale scale_of_row[2][kRowThreads / 32];
  // g = w + weight_offset, f32, for this thread's kSteps * kVec elements: each thread writes and
  // reads only its own slice (laid out [step][quad][thread] for conflict-free 16-byte access),
  // so no barrier guards it.
  extern __shared__ float4 gamma_tab[];

  const int T = shape.threads_per_row, P = shape.partials, R = shape.rows_per_block;
  const int S = kFast ? kSteps : shape.steps;
  // T, P and every group size below H are powers of two: shifts and masks, no divisions.
  const int t = threadIdx.x & (T - 1);
  const int rib = threadIdx.x >> (__ffs(T) - 1);
  const int32_t h = int32_t(c.h);  // <= 32768: offsets inside a row are 32-bit
  const int64_t groups = (c.lead.rows + R - 1) / R;
  const bool norm = c.norm == FUSEDNORM_NORM_RMS;
  // The way of scaling: the plan's, or (general kernel) the call's.
  const bool is_static = kFast ? kPlan == Plan::kStatic : c.mode == FUSEDNORM_SCALE_STATIC;
  const int32_t g = c.group >= h ? h : int32_t(c.group);
  const bool step_groups = kFast ? kPlan == Plan::kGroup : !is_static && g < h && g <= P;
  const int w_bytes = c.w_type == DType::kF32 ? 4 : 2;

  // Element offset of this thread's vector in step s. `tl` is t, laundered once a row (below) so
  // that the compiler derives the offsets inside the row loop instead of keeping them all live
  // across it (which spilled).
  int tl = t;
  auto elem0 = [&](int s) { return int32_t(s * P + kVec * tl); };

  // L2 warm-up of a row group's input (and residual) rows: the fast kernels' rows are contiguous.
  auto prefetch_rows = [&](int64_t grp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIPCC__)
    if (t != 0) return;  // one bulk prefetch a row (gpu_prefetch_l2_range): the others skip its arithmetic
#endif
    const int64_t row = grp * R + rib;
    if (!kFast || grp >= groups || row >= c.lead.rows) return;
    const uint32_t bytes = uint32_t(h) * In::kBytes;
    gpu_prefetch_l2_range(row_at<kFast>(c.lead, c.in, row), bytes, t, T);
    if (c.res.data != nullptr) gpu_prefetch_l2_range(row_at<kFast>(c.lead, c.res, row), bytes, t, T);
  };

  // Per-call constants, before the wait below (they read only the arguments).
  // For H a power of two, ss / H is ss * 2^-k (the same correctly rounded value, subnormal results
  // included): a multiply instead of a division on each row's critical path.
  const float len = math::length_f32(h);
  const float inv_len = (h & (h - 1)) == 0 ? math::float_of(uint32_t(127 - (__ffs(h) - 1)) << 23) : 0.0f;
  const bool clamp = c.qclamp < INFINITY;
  const float4* const gamma_mine = gamma_tab + threadIdx.x;  // this thread's table slots, blockDim.x apart
  // The table read through its 32-bit shared-window address, kept in a register (CUDA; not in the
  // group kernels, which have no register to spare for it: they spill).
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  constexpr bool kGammaAsm = kPlan != Plan::kGroup;
  const uint32_t gamma_sh = kGammaAsm ? gpu_shared_address(gamma_mine) : 0u;
#endif

  // Programmatic dependent launch (sm_90): this grid may start while the previous kernel of the
  // stream finishes. Until that kernel's memory is visible it only warms L2 with the block's
  // first rows and the weight (hints: no value is read), then it waits, and lets the next kernel
  // start its own launch at once.
#ifdef FN_GPU_TRACE
  const long long fn_t0 = clock64();
  const unsigned long long fn_g0 = fn_globaltimer();
  bool fn_first = true;
#endif
  prefetch_rows(blockIdx.x);
  if (kFast && norm && rib == 0) gpu_prefetch_l2_range(c.weight, uint32_t(h) * w_bytes, t, T);
  if (is_static && threadIdx.x == 0)
    gpu_prefetch_l2_range(reinterpret_cast<const char*>(c.static_scale), 4, 0, 1);
#ifndef FN_GPU_WARM_CONST
#define FN_GPU_WARM_CONST 1
#endif
#if FN_GPU_WARM_CONST >= 1 && defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  // Every constant-cache line of the arguments read before the wait (the never-taken store keeps
  // the reads): the first use of each after the wait would otherwise miss (decode -0.02 to
  // -0.1 us). Knob FN_GPU_WARM_CONST: 0 off, 2 also one discarded load of the first input row and
  // of the weight by thread 0 (the SM's TLB; measured no better).
  {
    const uint32_t* cw = reinterpret_cast<const uint32_t*>(&c);
    uint32_t warm = 0;
#pragma unroll
    for (int i = 0; i < int(sizeof(c) / 4); i += 16) warm ^= cw[i];
    warm ^= uint32_t(shape.vec) ^ uint32_t(acc.in) ^ uint32_t(gamma_smem);
    if (c.h < 0) *reinterpret_cast<volatile uint32_t*>(c.out.data) = warm;
    if (FN_GPU_WARM_CONST >= 2 && threadIdx.x == 0 && blockIdx.x < c.lead.rows) {
      uint32_t v0, v1;
      asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v0) : "l"(row_at<kFast>(c.lead, c.in, blockIdx.x)));
      asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v1) : "l"(c.weight));
    }
  }
#endif
  gpu_wait_for_previous_grid();
  gpu_allow_next_grid();
#ifdef FN_GPU_TRACE
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long g1 = fn_globaltimer(), last = fn_trace_last_end;
    if (last != 0) {
      atomicAdd(&fn_trace[20], fn_g0 - last);  // entry after the previous launch's end (wraps if before)
      atomicAdd(&fn_trace[21], g1 - last);     // past the wait after the previous launch's end
    }
  }
  FN_TRACE(1);
#endif

  float static_r = 0.0f;  // static scale: one multiplier for the whole call (first row)

  // One group of R rows, buffers `parity` of the reductions'. kFirst: 1 = the only group of its
  // block (every block has at most one: a short call, e.g. decode), 2 = any group of the loop
  // (the first one decided here). A fast kernel whose blocks have one group each runs the kFirst
  // = 1 copy of this body, tuned for latency: the weight table's copies converted after the sum
  // of squares is reduced (they land meanwhile) and inv_rms by every warp (one barrier). The loop
  // keeps the choices measured best at 16384 rows; both compute the same bytes (numerics.md).
  // FN_GPU_FIRST_TUNED (harness) sets how much of the tuning the copy gets: 0 none, 1 the table,
  // 2 (default) and inv_rms, 3 and the scale by every warp (decode -0.1 us, but the loop's
  // code, sharing one register allocation, measured 1-2% slower at H 7168 / 8192 / 16384).
  auto row_group = [&](const int64_t grp, const int parity, auto first_c) {
    constexpr int kFirst = decltype(first_c)::value;
    const bool first = kFirst == 2 ? grp == blockIdx.x : kFirst == 1;
#ifdef FN_GPU_FIRST_TUNED
    constexpr int kTuned = kFirst == 1 ? FN_GPU_FIRST_TUNED : 0;
#else
    constexpr int kTuned = kFirst == 1 ? 2 : 0;
#endif
    constexpr bool kInvOnceHere = kTuned >= 2 ? false : kInvOnce;
    constexpr bool kScaleOnceHere = kTuned >= 3 ? false : kScaleOnce;
    constexpr int kGammaLateHere = kTuned >= 1 ? kGammaLate : 0;
    // The latency-tuned copy combines a row's warp results in registers (combine_shared: no
    // shuffle chain after the barrier; the loop's code measured better with the butterfly).
#ifdef FN_GPU_LOCAL_FIRST
    constexpr bool kLocalHere = kFirst == 1 ? bool(FN_GPU_LOCAL_FIRST) : kLocalCombine;
#else
    constexpr bool kLocalHere = kFirst == 1 ? kTuned >= 1 : kLocalCombine;
#endif
    // The latency-tuned copy leaves the weight as copied (no later row reads the table) and
    // converts each step's words where y is made: no pass over the table between the reductions.
#ifdef FN_GPU_RAW_GAMMA
    constexpr bool kRawGamma = kFast && kTuned >= 1 && FN_GPU_RAW_GAMMA && kVec * kSteps <= kElemsPerThread;
#else
    constexpr bool kRawGamma = kFast && kTuned >= 1 && kVec * kSteps <= kElemsPerThread;
#endif
    const int64_t row = grp * R + rib;
    const bool active = row < c.lead.rows;  // inactive threads still join every barrier
    gpu_launder(tl);

    // The row as loaded (input-dtype words, 0 past H; with a residual, the rounded sum).
    uint32_t raw[kSteps][kW];
    const char* in = active ? row_at<kFast>(c.lead, c.in, row) : nullptr;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
#pragma unroll
      for (int i = 0; i < kW; ++i) raw[s][i] = 0;
      if (active && s < S) load_vec<In::kBytes, kVec, kFast>(in, elem0(s), h, acc.in, raw[s]);
    }

    FN_TRACE(2);
    // Once per block, after the first row's loads are on their way: the static multiplier and
    // the weight table.
    if (is_static && first) {
      uint32_t sbits;
      memcpy(&sbits, c.static_scale, 4);  // any alignment
      static_r = math::div_rn(1.0f, math::float_of(sbits));
    }
    // The weight table (first row group): slot q of step s is table entry
    // (s * (kVec / 4) + q) * blockDim.x + threadIdx.x. Addresses and offsets from laundered copies
    // of the thread's indices: derived from the row loop's, they would be hoisted out of it with
    // them and kept live across it (spills at 64 registers).
    const bool table_now = (kGammaSmem || gamma_smem) && norm && first;
    auto table_slot = [&] {
      int ti = threadIdx.x;
      gpu_launder(ti);
      return gamma_tab + ti;
    };
    if (table_now) {
      float4* slot = table_slot();
      const int slots = blockDim.x;
      int tw = t;
      gpu_launder(tw);
      if (kFast) {
        // Every step's weight vector is copied to its first slots without a register (the views
        // of a fast kernel are vector-aligned), then converted in place by table_finish: one
        // memory round trip for the whole table, not one a step (a decode call waits for it),
        // and no registers held across it. A vector of 16-bit weights fills half its slots'
        // bytes, f32 ones all.
        const char* w0 = c.weight + kVec * tw * (c.w_type == DType::kF32 ? 4 : 2);
        if (c.w_type == DType::kF32) {
#pragma unroll
          for (int s = 0; s < kSteps; ++s)
#pragma unroll
            for (int q = 0; q < kVec / 4; ++q)
              gpu_copy_async<16>(slot + (s * (kVec / 4) + q) * slots, w0 + (s * P + 4 * q) * 4);
        } else {
#pragma unroll
          for (int s = 0; s < kSteps; ++s) gpu_copy_async<kVec * 2>(slot + s * (kVec / 4) * slots, w0 + s * P * 2);
        }
      } else {
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          float g[kVec];
          if (s < S) load_gamma<kVec, kFast>(c, elem0(s), h, acc.w, g);
#pragma unroll
          for (int q = 0; q < kVec / 4; ++q)
            slot[(s * (kVec / 4) + q) * slots] =
                s < S ? make_float4(g[4 * q], g[4 * q + 1], g[4 * q + 2], g[4 * q + 3]) : make_float4(0, 0, 0, 0);
        }
      }
    }
    FN_TRACE(3);
    // The fast kernels' copies, once they have landed, converted in place to g = w + weight_offset.
    auto table_finish = [&] {
      if (!kFast || !table_now) return;
      gpu_copy_async_wait_all();
      if (kRawGamma) return;  // make_y converts the words where it reads them
      float4* slot = table_slot();
      const int slots = blockDim.x;
      const float off = c.weight_offset;
      // 16-bit weights: software-pipelined by one step, step s + 1's words read before step s's
      // slots are written (in the order written, each read would wait behind the previous step's
      // writes, which may alias for all the compiler knows); f32 ones step by step (their
      // pipeline's registers made the 48-element kernels spill). One loop per weight dtype.
      auto convert = [&](auto w_c) {
        constexpr DType kWt = decltype(w_c)::value;
        using W = InTraits<kWt>;
        constexpr int kWords = kVec * W::kBytes / 4;  // a step's words as copied
        auto read = [&](int s, uint32_t w[kWords]) { read_slot_words<kWords>(slot + s * (kVec / 4) * slots, slots, w); };
        if (kWt == DType::kF32) {
#pragma unroll
          for (int s = 0; s < kSteps; ++s) {
            uint32_t w[kWords];
            read(s, w);
#pragma unroll
            for (int q = 0; q < kVec / 4; ++q)
              slot[(s * (kVec / 4) + q) * slots] =
                  make_float4(math::add_rn(W::get(w, 4 * q), off), math::add_rn(W::get(w, 4 * q + 1), off),
                              math::add_rn(W::get(w, 4 * q + 2), off), math::add_rn(W::get(w, 4 * q + 3), off));
          }
          return;
        }
        uint32_t cur[kWords], next[kWords];
        read(0, cur);
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          if (s + 1 < kSteps) read(s + 1, next);
#pragma unroll
          for (int q = 0; q < kVec / 4; ++q)
            slot[(s * (kVec / 4) + q) * slots] =
                make_float4(math::add_rn(W::get(cur, 4 * q), off), math::add_rn(W::get(cur, 4 * q + 1), off),
                            math::add_rn(W::get(cur, 4 * q + 2), off), math::add_rn(W::get(cur, 4 * q + 3), off));
#pragma unroll
          for (int i = 0; i < kWords; ++i) cur[i] = next[i];
        }
      };
      if (c.w_type == DType::kF32) convert(DTypeConstant<DType::kF32>());
      else if (c.w_type == DType::kBF16) convert(DTypeConstant<DType::kBF16>());
      else convert(DTypeConstant<DType::kF16>());
      FN_TRACE(5);
    };
    if (kGammaLateHere == 0) table_finish();

    // The block's next rows, into L2 while this one is worked on, once this row's loads (and the
    // first row's weight) are on their way (not with a residual: measured 30% slower at
    // 16384 x 8192, 331 against 255 us).
    if (c.res.data == nullptr) prefetch_rows(grp + gridDim.x);

    // 1. Residual: x + res rounded to the input dtype, written back to res; x is that sum.
    if (c.res.data != nullptr && active) {
      char* res = row_at<kFast>(c.lead, c.res, row);
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        if (s >= S) continue;
        const int32_t e = elem0(s);
        uint32_t rw[kW];
        load_vec<In::kBytes, kVec, kFast>(res, e, h, acc.in, rw);
        uint32_t sum[kW];
        if constexpr (In::kBytes == 2) {
          // Paired conversions (round_pair); a vector with a NaN sum (rare) is rounded again by
          // the shared encoder. Past H both operands are 0 and so is the sum.
          float v[kVec];
          bool nan = false;
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            v[j] = math::add_rn(In::get(raw[s], j), In::get(rw, j));
            nan |= v[j] != v[j];
          }
#pragma unroll
          for (int i = 0; i < kW; ++i) sum[i] = round_pair<kIn>(v[2 * i], v[2 * i + 1]);
          if (nan) {
#pragma unroll
            for (int i = 0; i < kW; ++i) sum[i] = encode_pair_soft<kIn>(v[2 * i], v[2 * i + 1]);
          }
        } else {
#pragma unroll
          for (int i = 0; i < kW; ++i) sum[i] = 0;
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const uint32_t b = kFast || e + j < h ? In::encode(math::add_rn(In::get(raw[s], j), In::get(rw, j))) : 0u;
            sum[j / InVec::kPerWord] |= b << (8 * In::kBytes * (j % InVec::kPerWord));
          }
        }
        store_vec<In::kBytes, kVec, kFast>(res, e, h, acc.in, sum);
#pragma unroll
        for (int i = 0; i < kW; ++i) raw[s][i] = sum[i];
      }
    }

    FN_TRACE(4);
    if (kGammaLateHere == 1) table_finish();

    char* out = active ? row_at<kFast>(c.lead, c.out, row) : nullptr;
    char* scale_base = !active || is_static ? nullptr
                       : c.packed                              ? out + h
                                                               : row_at<kFast>(c.lead, c.scales, row);

    // 2. Sum of squares in the canonical order, inv_rms. Elements past H are 0 and add nothing.
    float inv = 1.0f;
    if (norm) {
      // Each partial starts at its first square: 0 + q is q for every q = x * x (+0, positive,
      // +Inf or NaN, and a NaN's payload reaches no output), one addition fewer a partial.
      float part[kVec];
#pragma unroll
      for (int s = 0; s < kSteps; ++s)
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float x = In::get(raw[s], j), q = math::mul_rn(x, x);
          part[j] = s == 0 ? q : math::add_rn(part[j], q);
        }
#pragma unroll
      for (int n = kVec; n > 1; n /= 2)
#pragma unroll
        for (int j = 0; j < n / 2; ++j) part[j] = math::add_rn(part[2 * j], part[2 * j + 1]);
      FN_TRACE(6);
      const float eps = c.eps;
      inv = row_reduce_finish<kWarp, kInvOnceHere, kLocalHere>(
          part[0], t, T, rib, red_sum[parity], [](float a, float b) { return math::add_rn(a, b); },
          [len, eps, inv_len](float ss) {
            return math::inv_rms_of_mean(inv_len != 0.0f ? math::mul_rn(ss, inv_len) : math::div_rn(ss, len), eps);
          },
          inv_of_row[parity]);
    }
    FN_TRACE(7);
    if (kGammaLateHere == 2) table_finish();

    // 3. y = (x * inv) * g of step s; 0 past H (and in steps past the row). Kernels of up to 32
    // elements a thread keep y in registers; those of more compute it again where it is used.
    // kNorm: normalization (IntConstant<1>), none (<0>) or the call's (<2>, decided here).
    // kWt: the weight from the converted table (IntConstant<0>), or from its slots' words as
    // copied (<1>, <2>, <3>: f32, bf16, f16 weights; kRawGamma).
    auto make_y = [&](int s, float v[kVec], auto norm_c, auto wt_c) {
      constexpr int kNorm = decltype(norm_c)::value;
      constexpr int kWt = decltype(wt_c)::value;
      if (s >= S) {  // uniform: a step past the row
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[j] = 0.0f;
        return;
      }
      const int32_t e = elem0(s);
      if (kNorm == 1 || (kNorm == 2 && norm)) {
        float g[kVec];
        if ((kGammaSmem || gamma_smem) && kWt != 0) {
          constexpr DType kD = kWt == 1 ? DType::kF32 : kWt == 2 ? DType::kBF16 : DType::kF16;
          using W = InTraits<kD>;
          constexpr int kWords = kVec * W::kBytes / 4;
          uint32_t w[kWords];
          read_slot_words<kWords>(gamma_mine + s * (kVec / 4) * blockDim.x, blockDim.x, w);
#pragma unroll
          for (int j = 0; j < kVec; ++j) g[j] = math::add_rn(W::get(w, j), c.weight_offset);
        } else if (kGammaSmem || gamma_smem) {
#pragma unroll
          for (int q = 0; q < kVec / 4; ++q) {
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
            const float4 f = kGammaAsm ? gpu_load_shared16(gamma_sh + uint32_t(s * (kVec / 4) + q) * blockDim.x * 16u)
                                       : gamma_mine[(s * (kVec / 4) + q) * blockDim.x];
#else
            const float4 f = gamma_mine[(s * (kVec / 4) + q) * blockDim.x];
#endif
            g[4 * q] = f.x; g[4 * q + 1] = f.y; g[4 * q + 2] = f.z; g[4 * q + 3] = f.w;
          }
        } else {
          load_gamma<kVec, kFast>(c, e, h, acc.w, g);
        }
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[j] = math::norm_apply(In::get(raw[s], j), inv, g[j]);
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[j] = In::get(raw[s], j);
      }
      if (!kFast && e + kVec > h) {
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          if (e + j >= h) v[j] = 0.0f;
      }
    };
    constexpr bool kKeepY = kVec * kSteps <= kElemsPerThread;
    float y_kept[kKeepY ? kSteps : 1][kVec];
    if (kKeepY) {  // one test of `norm` for the row, not one a step
      auto make_all = [&](auto norm_c, auto wt_c) {
#pragma unroll
        for (int s = 0; s < kSteps; ++s) make_y(s, y_kept[kKeepY ? s : 0], norm_c, wt_c);
      };
      if (!norm) make_all(IntConstant<0>(), IntConstant<0>());
      else if (!kRawGamma) make_all(IntConstant<1>(), IntConstant<0>());
      else if (c.w_type == DType::kBF16) make_all(IntConstant<1>(), IntConstant<2>());
      else if (c.w_type == DType::kF32) make_all(IntConstant<1>(), IntConstant<1>());
      else make_all(IntConstant<1>(), IntConstant<3>());
    }
    auto y_of = [&](int s, float v[kVec]) {
      if (kKeepY) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[j] = y_kept[kKeepY ? s : 0][j];
      } else {
        make_y(s, v, IntConstant<2>(), IntConstant<0>());  // (kRawGamma needs kKeepY)
      }
    };
    // max |y| of step s as bits: see AbsMax.
    auto unit_max = [&](int s, AbsMax m) {
      float v[kVec];
      y_of(s, v);
#pragma unroll
      for (int j = 0; j < kVec; ++j) m.add(v[j]);
      return m;
    };
    // 5. Encode and store a step's kVec codes (the clamp only where the caller set a qmax).
    // kClamp: clamp (IntConstant<1>), not (<0>), or as the call says (<2>, tested here).
    auto encode_store = [&](int s, float r, auto clamp_c) {
      constexpr int kClamp = decltype(clamp_c)::value;
      if (!active || s >= S) return;
      float q[kVec];
      y_of(s, q);
#pragma unroll
      for (int j = 0; j < kVec; ++j) q[j] = math::mul_rn(q[j], r);
      if (kClamp == 1 || (kClamp == 2 && clamp)) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) q[j] = math::clamp_sym(q[j], c.qclamp);
      }
      uint32_t codes[kVec / 4];
#pragma unroll
      for (int i = 0; i < kVec / 4; ++i) codes[i] = encode4<kOut>(q + 4 * i);
      store_vec<1, kVec, kFast>(out, elem0(s), h, acc.out, codes);
    };

    // Steps s0 .. s0 + n - 1, step s with multiplier r_of(s): one test of the clamp and of
    // `active` for them all (the general kernel, whose units may be several a row, tests the
    // clamp per step: its loop over units stays small enough to unroll).
    auto encode_steps = [&](int s0, int n, auto r_of) {
      if (!active) return;
      if constexpr (!kFast) {
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + n) encode_store(s, r_of(s), IntConstant<2>());
      } else if (clamp) {
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + n) encode_store(s, r_of(s), IntConstant<1>());
      } else {
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + n) encode_store(s, r_of(s), IntConstant<0>());
      }
    };

    // 4. Scales and codes: a unit is the tensor (static), a group within a step, or whole steps
    // (the row, or a group of G / P steps).
    if (is_static) {
      encode_steps(0, kSteps, [&](int) { return static_r; });
    } else if (step_groups) {
      // Groups inside a step: G / kVec adjacent lanes share one (every count below is a power of
      // two). The body is compiled per lane count, so its shuffles and shifts are constants.
      constexpr int kStepsPow2 = kSteps <= 4 ? 4 : 8;  // kSteps rounded up to a power of two
      auto groups_in_steps = [&](auto lanes_c) {
        constexpr int kLanes = decltype(lanes_c)::value, kLgLanes = ilog2(kLanes);
        const int lg = kLgLanes + ilog2(kVec);  // log2 G
        const int lane = threadIdx.x & (kWarp - 1);
        // The maxima of all the warp's groups of all steps in one transposed butterfly: a lane
        // starts with its N = kSteps rounded up to a power of two step maxima (0 past kSteps); at
        // level k it keeps the half of its values selected by lane bit k and swaps the other half
        // with lane ^ 2^k, so after log2 N levels it holds one value, of step
        // s = bitrev(lane mod N) (N - 1 shuffles instead of kSteps per level); the levels from
        // log2 N to log2 kLanes are plain. Lane (q << kLgLanes) | bitrev(s) then holds the
        // maximum of group q of step s (N <= kLanes: step_groups_fit), evaluates the scale
        // formula (two correctly rounded divisions) once for it, and shuffles carry the
        // multipliers back.
        constexpr int kN = kStepsPow2, kLgN = ilog2(kN);
        auto bitrev = [](int v) {
          int r = 0;
#pragma unroll
          for (int k = 0; k < kLgN; ++k) r |= ((v >> k) & 1) << (kLgN - 1 - k);
          return r;
        };
        uint32_t m[kN];
#pragma unroll
        for (int s = 0; s < kN; ++s) m[s] = s < kSteps ? unit_max(s, AbsMax()).bits() : 0u;
#pragma unroll
        for (int k = 0; k < kLgN; ++k) {
          const int half = kN >> (k + 1);
          const bool upper = (lane >> k) & 1;
#pragma unroll
          for (int i = 0; i < half; ++i) {
            const uint32_t keep = upper ? m[half + i] : m[i], give = upper ? m[i] : m[half + i];
            const uint32_t o = FN_SHFL_XOR(give, 1 << k, kWarp);
            m[i] = o > keep ? o : keep;
          }
        }
#pragma unroll
        for (int k = kLgN; k < kLgLanes; ++k) {
          const uint32_t o = FN_SHFL_XOR(m[0], 1 << k, kWarp);
          m[0] = o > m[0] ? o : m[0];
        }
        const math::DynamicScale ds = math::dynamic_scale(m[0], c.qmax, c.scale_ub, c.min_scale, c.scale_type);
        if (kFast) {
          // One lane of a group's holders stores its scale (a fast kernel's warp lies in one
          // row: fast_plan), one store a lane instead of one a step.
          const int s = bitrev(lane & (kN - 1)), q = lane >> kLgLanes;
          const int32_t e = s * P + kVec * ((t & ~(kWarp - 1)) + (q << kLgLanes));
          if (active && s < kSteps && (lane & (kLanes - 1) & ~(kN - 1)) == 0) store_scale(c, scale_base, e >> lg, ds.stored);
        }
        float r[kSteps];  // this thread's group's multiplier in each step
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          const int src = (lane & ~(kLanes - 1)) | bitrev(s);
          r[s] = FN_SHFL(ds.r, src, kWarp);
          if (!kFast) {
            const uint32_t stored = FN_SHFL(ds.stored, src, kWarp);
            const int32_t e = elem0(s);
            if (active && s < S && e < h && (t & (kLanes - 1)) == 0) store_scale(c, scale_base, e >> lg, stored);
          }
        }
        encode_steps(0, kSteps, [&](int s) { return r[s]; });
      };
      // G / kVec lanes: a power of two from kSteps (step_groups_fit) to 128 / kVec.
      constexpr int kMinLanes = kStepsPow2, kMaxLanes = 128 / kVec < kWarp ? 128 / kVec : kWarp;
      with_lanes<kMinLanes, kMaxLanes>(g >> ilog2(kVec), groups_in_steps);
    } else {
      // Steps a unit: the row, or G / P (a power of two) steps of it.
      const int per = kFast || g >= h ? kSteps : g >> (__ffs(P) - 1);
      uint32_t* red = red_max[parity];
      // Unrolled in the fast kernels (one unit, s0 = 0); a loop in the general kernel, whose
      // body (a reduction, the scale formula, the encoding) is too large to repeat kSteps times.
      constexpr int kUnitUnroll = kFast ? kSteps : 1;
#pragma unroll kUnitUnroll
      for (int s0 = 0; s0 < kSteps; s0 += 1) {
        if (per == kSteps ? s0 != 0 : (s0 & (per - 1)) != 0) continue;
        AbsMax am;
#pragma unroll
        for (int s = 0; s < kSteps; ++s)
          if (s >= s0 && s < s0 + per) am = unit_max(s, am);
        FN_TRACE(8);
        if (per != kSteps) __syncthreads();  // several units a row: `red` is reused at once
        const float qmax = c.qmax, scale_ub = c.scale_ub, min_scale = c.min_scale;
        const math::ScaleType scale_type = c.scale_type;
        const math::DynamicScale ds = row_reduce_finish<kWarp, kScaleOnceHere, kLocalHere>(
            am.bits(), t, T, rib, red, MaxU32(),
            [=](uint32_t m) { return math::dynamic_scale(m, qmax, scale_ub, min_scale, scale_type); },
            scale_of_row[parity]);
        FN_TRACE(9);
        if (active && t == 0 && s0 * P < h)
          store_scale(c, scale_base, kFast || g >= h ? 0 : (s0 * P) >> (__ffs(g) - 1), ds.stored);
        encode_steps(s0, per, [&](int) { return ds.r; });
      }
    }
    FN_TRACE(10);
#ifdef FN_GPU_TRACE
    fn_first = false;
#endif
  };
  auto all_groups = [&] {
    int parity = 0;
    for (int64_t grp = blockIdx.x; grp < groups; grp += gridDim.x, parity ^= 1) row_group(grp, parity, IntConstant<2>());
  };
#if defined(__HIPCC__)
  // HIP: no latency-tuned copy (never measured on AMD hardware, and it doubled clang's compile
  // time of the kernels, which CI pays on 2 cores).
  all_groups();
#else
  if (kFast && gridDim.x >= groups) {
    // One row group a block (short calls: decode): the latency-tuned copy.
    if (blockIdx.x < groups) row_group(blockIdx.x, 0, IntConstant<1>());
  } else {
    all_groups();
  }
#endif
#ifdef FN_GPU_TRACE
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long g2 = fn_globaltimer();
    atomicAdd(&fn_trace[22], g2 - fn_g0);
    atomicAdd(&fn_trace[11], (unsigned long long)(clock64() - fn_t0));
    atomicAdd(&fn_trace[31], 1ull);
    fn_trace_last_end = g2;
  }
#endif
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
    const uint32_t w = encode4<kOut>(v);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (((w >> (8 * k)) & 0xFFu) != SoftFormat<kOut>::encode(v[k])) {
        atomicAdd(bad, 1ull);
        atomicMin(first, uint32_t(base + i + k));
      }
  }
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

using VerifyKernel = void (*)(uint64_t, uint64_t, unsigned long long*, unsigned int*);

using KernelFn = void (*)(const RmsnormQuantCall, const RowShape, const Accesses, const int32_t);

// The fast kernels of one plan, by the row's exact step count (fast_steps(shape) must hold; the
// shape's vectors are fast_vec's).
template <DType kIn, DType kOut, Plan kPlan>
KernelFn rmsnorm_quant_kernel_fast(const RowShape& shape) {
  constexpr int kWarp = kGpuWarp;
  switch (shape.steps) {
    case 4: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 4), 4, kPlan>;
    case 5: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 5), 5, kPlan>;
    case 6: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 6), 6, kPlan>;
    case 7: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 7), 7, kPlan>;
    case 8: return &rmsnorm_quant_kernel<kIn, kOut, kWarp, fast_vec(kIn, 8), 8, kPlan>;
    default: return nullptr;
  }
}

// The kernel for a format pair, shape and plan: the general kernel (8- or 4-element vectors) for
// kAll, else the plan's fast kernel. rmsnorm_quant writes integer and 8-bit float codes only
// (FP4 is rmsnorm_fp4's), so no kernel is made for f4e2m1.
template <DType kIn, DType kOut>
KernelFn rmsnorm_quant_kernel_pick(const RowShape& shape, Plan plan) {
  constexpr int kWarp = kGpuWarp;
  if constexpr (kOut == DType::k_f4e2m1) {
    return nullptr;
  } else {
    switch (plan) {
      case Plan::kStatic: return rmsnorm_quant_kernel_fast<kIn, kOut, Plan::kStatic>(shape);
      case Plan::kRow: return rmsnorm_quant_kernel_fast<kIn, kOut, Plan::kRow>(shape);
      case Plan::kGroup: return rmsnorm_quant_kernel_fast<kIn, kOut, Plan::kGroup>(shape);
      default:
        return shape.vec == 8 ? &rmsnorm_quant_kernel<kIn, kOut, kWarp, 8, kElemsPerThread / 8, Plan::kAll>
                              : &rmsnorm_quant_kernel<kIn, kOut, kWarp, 4, kElemsPerThread / 4, Plan::kAll>;
    }
  }
}

// The kernel for an input dtype, output format, shape and plan (one translation unit per input
// dtype, so the instantiations compile in parallel; see backends/cuda/).
template <DType kIn>
KernelFn rmsnorm_quant_kernel_for(DType out, const RowShape& shape, Plan plan) {
  switch (out) {
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return rmsnorm_quant_kernel_pick<kIn, DType::k_##name>(shape, plan);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kI8: return rmsnorm_quant_kernel_pick<kIn, DType::kI8>(shape, plan);
    default: return nullptr;
  }
}

#define FN_INSTANTIATE_RMSNORM_QUANT(kIn) template KernelFn rmsnorm_quant_kernel_for<kIn>(DType, const RowShape&, Plan);

}  // namespace gpu
}  // namespace fusednorm
