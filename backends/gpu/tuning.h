// The GPU kernel's tuning constants (docs/architecture.md, "GPU kernel"): numbers chosen by
// measurement, not by correctness; no row's bytes depend on them (docs/numerics.md). Plain C++,
// no vendor header. tests/scripts/gpu_variants.sh builds the tuning harness with other values
// ("kName=VALUE" rewrites the line `constexpr int kName = ...;` of a copy of this file).
#pragma once

namespace fusednorm {
namespace gpu {

// Threads of a block when rows are shorter (R rows of T threads): 256, four blocks an SM at 64
// registers a thread; measured at H 2048 to 8192 (docs/performance.md).
constexpr int kRowThreads = 256;

// Elements a thread keeps in registers in the general kernel (kVec * kSteps): 32, the most that
// fits 64 registers a thread without spills in blocks of up to 1024 threads.
constexpr int kElemsPerThread = 32;

// Register cap of the 8-element-vector kernels (the others: 64, which their 1024-thread blocks
// need): 64, four blocks of 256 threads an SM; measured best with tests/scripts/gpu_variants.sh.
constexpr int kMaxNReg8 = 64;

}  // namespace gpu
}  // namespace fusednorm
