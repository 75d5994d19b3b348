// Compiled twice: as CUDA and as HIP. Device-side memory access of the rmsnorm_quant kernel:
// element, vector and scale loads and stores for every alignment a view may have, the input
// dtypes' element decoding (InTraits), the weight, the weight table's slots, and row addresses.
#pragma once

#include <stdint.h>

#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/plan.h"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

// log2 of a power of two, at compile time.
__host__ __device__ constexpr int ilog2(int v) { return v <= 1 ? 0 : 1 + ilog2(v / 2); }
// Compile-time values as types: the arguments that select a copy of a generic lambda's code.
template <int N>
struct IntConstant {
  static constexpr int value = N;
};
template <DType D>
struct DTypeConstant {
  static constexpr DType value = D;
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
// kFast: the caller guarantees a full, aligned vector. kStream (with kFast): data read once by a
// kernel that touches nothing twice, loaded with the streaming hint (evict first).
template <int kBytes, int kN, bool kFast = false, bool kStream = false>
__device__ __forceinline__ void load_vec(const char* row, int32_t e, int32_t h, int32_t access,
                                         uint32_t w[Vec<kBytes, kN>::kWords]) {
  constexpr int kWords = Vec<kBytes, kN>::kWords;
  const char* p = row + e * kBytes;
  if (kFast || (access == kVectors && e + kN <= h)) {
    // Read-only path: every element is read once (an in-place residual by the thread that
    // writes it back, after the read).
    if (kWords == 1) {
      w[0] = kStream ? FN_LOAD_STREAM(reinterpret_cast<const uint32_t*>(p)) : FN_LOAD_RO(reinterpret_cast<const uint32_t*>(p));
    } else if (kWords == 2) {
      const uint2 q = kStream ? FN_LOAD_STREAM(reinterpret_cast<const uint2*>(p)) : FN_LOAD_RO(reinterpret_cast<const uint2*>(p));
      w[0] = q.x; w[1] = q.y;
    } else {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        const uint4 q = kStream ? FN_LOAD_STREAM(reinterpret_cast<const uint4*>(p) + i)
                                : FN_LOAD_RO(reinterpret_cast<const uint4*>(p) + i);
        w[4 * i] = q.x; w[4 * i + 1] = q.y; w[4 * i + 2] = q.z; w[4 * i + 3] = q.w;
      }
    }
    return;
  }
  constexpr int kPer = Vec<kBytes, kN>::kPerWord;
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = load_word_slow<kBytes>(row, e + i * kPer, h, access);
}

// kStream (with kFast): stored with the streaming hint (evict first), for outputs nothing reads
// back during the kernel.
template <int kBytes, int kN, bool kFast = false, bool kStream = false>
__device__ __forceinline__ void store_vec(char* row, int32_t e, int32_t h, int32_t access,
                                          const uint32_t w[Vec<kBytes, kN>::kWords]) {
  constexpr int kWords = Vec<kBytes, kN>::kWords;
  char* p = row + e * kBytes;
  if (kFast || (access == kVectors && e + kN <= h)) {
    if (kWords == 1) {
      if (kStream) FN_STORE_STREAM(reinterpret_cast<uint32_t*>(p), w[0]);
      else FN_STORE_GLOBAL(reinterpret_cast<uint32_t*>(p), w[0]);
    } else if (kWords == 2) {
      if (kStream) FN_STORE_STREAM(reinterpret_cast<uint2*>(p), make_uint2(w[0], w[1]));
      else FN_STORE_GLOBAL(reinterpret_cast<uint2*>(p), make_uint2(w[0], w[1]));
    } else {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        const uint4 q = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
        if (kStream) FN_STORE_STREAM(reinterpret_cast<uint4*>(p) + i, q);
        else FN_STORE_GLOBAL(reinterpret_cast<uint4*>(p) + i, q);
      }
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
#if FN_CUDA_ARCH > 0 || defined(__HIPCC__)  // device code: CUDA's PTX, HIP's fpext
    // The hardware conversion is exact for every finite f16 and keeps Inf; a NaN stays a NaN
    // (its payload never reaches an output: operations write the positive NaN). On HIP it also
    // spares clang's code generation the shared decoder's subnormal path in every kernel.
    return gpu_f16_to_f32(uint16_t(hbits));
#else
    return math::decode_f16(hbits);
#endif
  }
  static __device__ __forceinline__ uint32_t encode(float v) { return math::encode_f16<false>(v); }
};

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


// A row's address: one multiply for the common single leading dimension; the general index
// (64-bit divisions) out of line.
inline __device__ __noinline__ char* row_ptr_general(const LeadShape& lead, const RowView& v, int64_t row) {
  return row_ptr(lead, v, row);
}
template <bool kFast>
__device__ __forceinline__ char* row_at(const LeadShape& lead, const RowView& v, int64_t row) {
  return kFast || lead.ndim <= 1 ? v.data + row * v.strides[0] : row_ptr_general(lead, v, row);
}


// Weight element j of a vector as f32.
__device__ __forceinline__ float weight_elem(DType w_type, const uint32_t* w, int j) {
  return w_type == DType::kF32    ? InTraits<DType::kF32>::get(w, j)
         : w_type == DType::kBF16 ? InTraits<DType::kBF16>::get(w, j)
                                  : InTraits<DType::kF16>::get(w, j);
}

// g = w + weight_offset for elements e .. e+kN-1 (past H: offset alone; callers zero y there).
template <int kN, bool kFast>
__device__ __forceinline__ void load_gamma(DType w_type, const char* weight, float weight_offset, int32_t e, int32_t h,
                                           int32_t access, float g[kN]) {
  if (w_type == DType::kF32) {
    uint32_t ww[Vec<4, kN>::kWords];
    load_vec<4, kN, kFast>(weight, e, h, access, ww);
#pragma unroll
    for (int j = 0; j < kN; ++j) g[j] = math::add_rn(math::float_of(ww[j]), weight_offset);
  } else {
    uint32_t ww[Vec<2, kN>::kWords];
    load_vec<2, kN, kFast>(weight, e, h, access, ww);
#pragma unroll
    for (int j = 0; j < kN; ++j) g[j] = math::add_rn(weight_elem(w_type, ww, j), weight_offset);
  }
}
template <int kN, bool kFast>
__device__ __forceinline__ void load_gamma(const RmsnormQuantCall& c, int32_t e, int32_t h, int32_t access, float g[kN]) {
  load_gamma<kN, kFast>(c.w_type, c.weight, c.weight_offset, e, h, access, g);
}

// Warms in L2 the 128-byte lines that a thread's vector at element e of a row x starts (and, with
// with_w, of the weights w; gpu_warm_line: hints, no value read, so they may be issued before
// gpu_wait_for_previous_grid). The short-call kernels of qk_rmsnorm and rmsnorm_fp4. At 16 rows
// of 4096 + 512 bf16 on an H200: qk fused 2.14 -> 1.83 us, stats 1.38 -> 1.17, apply 1.61 -> 1.42
// (docs/performance.md). The weights' flag is a bool, not a null w: passing `norm ? w : nullptr`
// made rmsnorm_fp4's short kernel 0.04-0.07 us slower (H200, row-major scales).
template <int kInBytes>
__device__ __forceinline__ void warm_vec_lines(bool active, const char* x, int32_t e, bool with_w, const char* w,
                                               DType w_type) {
  if (!active) return;
  gpu_warm_line(x, int64_t(e) * kInBytes);
  if (with_w) gpu_warm_line(w, int64_t(e) * (w_type == DType::kF32 ? 4 : 2));
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

}  // namespace gpu
}  // namespace fusednorm
