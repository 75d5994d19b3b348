// Host-only planning of a rmsnorm_quant launch on the GPU (docs/architecture.md, "GPU kernel"):
// the row shape from H, the access widths from the pointers, and the kernel's plan from the
// options. Plain C++ (no device code, no vendor header): included by the plugin, the launch code,
// the kernel table and the tuning harness. Nothing here depends on the row count (batch invariance).
#pragma once

#include <stdint.h>

#include <algorithm>

#include "backends/gpu/tuning.h"
#include "core/call.h"
#include "math/quant_math.h"

namespace fusednorm {
namespace gpu {

constexpr int kMaxBlockThreads = 1024;
constexpr int kMaxSteps = 8;

// A row's mapping onto threads. Thread t of a row owns the vec partial sums vec*t .. vec*t + vec-1
// of the canonical reduction (docs/numerics.md §2), i.e. elements s*P + vec*t + j for steps s < S.
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

// Every row of a view starts on an `align`-byte boundary.
inline bool rows_aligned(const LeadShape& lead, const RowView& v, int align) {
  if (reinterpret_cast<uintptr_t>(v.data) % align != 0) return false;
  for (int d = 0; d < lead.ndim; ++d)
    if (lead.dims[d] > 1 && v.strides[d] % align != 0) return false;
  return true;
}

// The widest access every row of a view allows: vectors of vec_bytes, whole elements, or bytes.
// (A row's vectors start at multiples of the vector length; a partial last vector goes element
// by element.)
inline int32_t access_for(const LeadShape& lead, const RowView& v, int elem_bytes, int vec_bytes) {
  if (v.data == nullptr) return kVectors;
  if (rows_aligned(lead, v, std::min(vec_bytes, 16))) return kVectors;
  return rows_aligned(lead, v, elem_bytes) ? kElements : kBytesOnly;
}

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

// Short calls (every row its own block: decode) of 16-bit rows of 5 steps (H 5120, 2560, 10240)
// with dynamic scales take 4-element vectors instead of fast_vec's 8: twice the threads a row (T
// 256 at H 5120), 20 elements a thread, whose y stay in registers (fast_vec's 40 compute y again
// where used). A decode row is one block of a few warps, each issuing its instructions one after
// another (Nsight Compute, 1 x 5120 per-row with 8-element vectors: 4 warps of about 1100
// instructions, 4.7 cycles an issued instruction). H200, 1 token at H 5120: per-row 2.35 -> 1.87
// us, group-128 2.63 -> 2.20, residual 3.03 -> 2.38 (docs/performance.md). Measured and not taken
// for 4 steps: H 2048 faster (per-row 1.67 -> 1.61 us), H 4096 and 8192 slower (8192: 2.00 ->
// 2.22 us; 512 threads a row). The same bytes (the canonical order does not depend on the vector
// length). CUDA only (the HIP build has no latency-tuned decode copy to run them).
constexpr int kDecodeVec4Steps = 5;
inline int decode_vec(DType in, int steps) { return in != DType::kF32 && steps == kDecodeVec4Steps ? 4 : fast_vec(in, steps); }
// The row shape of the fast kernels for H and the input dtype (fast_vec's vectors where
// fast_steps holds), or the general one; the caller falls back to row_shape(h) when fast_plan
// finds no fast kernel.
inline RowShape fast_row_shape(int64_t h, DType in) {
  const RowShape s = row_shape(h);
  return fast_steps(s) ? row_shape(h, fast_vec(in, s.steps)) : s;
}

// Groups inside a step take G / vec lanes, a power of two that must be at least the step count
// (the group path computes a warp's scales for all steps at once, one group per lane); the fast
// group kernel also wants a row of at least a warp of `warp` lanes (its lanes store their own
// group's scale).
inline bool step_groups_fit(int64_t group, const RowShape& s, int warp) {
  return group <= s.partials && group / s.vec >= s.steps && s.threads_per_row >= warp;
}

// The output formats with fast kernels: those inference runs on (f8e4m3fn, f8e5m2 and int8; the
// MI300's f8e4m3fnuz). f8e4m3 (IEEE-style, with infinities) and f8e5m2fnuz take the general
// kernel: the same bytes, in about 2.5x the time at 16384 rows and 4-5x in decode on an H200
// (docs/performance.md, known limits). Each format's fast kernels are
// 15 instantiations (3 plans x 5 step counts) an input dtype, the bulk of the GPU plugins' compile
// time (docs/testing.md).
constexpr bool fast_format(DType out) {
  return out == DType::k_f8e4m3fn || out == DType::k_f8e4m3fnuz || out == DType::k_f8e5m2 || out == DType::kI8;
}

// The fast kernel's plan for a call whose views allow one (vector-aligned, one leading
// dimension, H a whole number of steps) in row shape s, or kAll; `warp` is the device's warp
// (kGpuWarp). Groups larger than a step but smaller than the row (H <= 4 G), or too small for the
// lanes rule above, take the general kernel. From the options and H alone (batch invariance).
inline Plan fast_plan(const RmsnormQuantCall& c, const RowShape& s, int warp) {
  if (!fast_format(c.out_type) || !fast_steps(s) || c.h % s.partials != 0) return Plan::kAll;
  if (c.mode == FUSEDNORM_SCALE_STATIC) return Plan::kStatic;
  if (c.mode == FUSEDNORM_SCALE_DYNAMIC_ROW || c.group >= c.h) return Plan::kRow;
  return step_groups_fit(c.group, s, warp) ? Plan::kGroup : Plan::kAll;
}

// Division by a divisor fixed for a launch (d >= 1), without a divide instruction: the host
// computes m and l once; n / d = (umulhi(n, m) + n) >> l for every 32-bit n, with l = ceil(log2 d)
// and m = floor(2^32 (2^l - d) / d) + 1 (Granlund and Montgomery, "Division by invariant integers
// using multiplication", 1994, Theorem 4.2; tests/unit/math_test.cc checks it).
struct DivU32 {
  uint32_t m = 1;
  int32_t l = 0;
  static DivU32 of(uint32_t d) {
    DivU32 r;
    while ((uint64_t(1) << r.l) < d) ++r.l;
    r.m = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << r.l) - d)) / d + 1);
    return r;
  }
  FN_HD uint32_t div(uint32_t n) const {
    return uint32_t(((uint64_t(n) * m >> 32) + n) >> l);
  }
};

// Steps a thread holds in the kernel chosen (the weight table in shared memory has that many).
inline int kernel_steps(const RowShape& s, Plan plan) { return plan != Plan::kAll ? s.steps : kElemsPerThread / s.vec; }

}  // namespace gpu
}  // namespace fusednorm
