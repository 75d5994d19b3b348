// Compiled twice: as CUDA and as HIP. The host side of a rmsnorm_quant launch, shared by the
// plugin (plugin.cuh) and the tuning harness (tests/bench/gpu_variants.cu): the persistent grid's
// size from the occupancy query, and the launch itself.
#pragma once

#include <algorithm>
#include <mutex>
#include <vector>

#include "backends/gpu/gpu_runtime.h"
#include "backends/gpu/kernel_table.cuh"
#include "backends/gpu/plan.h"

namespace fusednorm {
namespace gpu {

// What the launches need to know of each device, read once at init.
struct DeviceFacts {
  int major = 0;  // compute capability
  int multiprocessors = 0;
  size_t max_smem_per_block = 0;  // with the opt-in attribute
};

// Resident blocks per multiprocessor of a kernel (any operation's) at a block shape, asked once
// per shape (the query is host work, not a stream operation, so graph capture is unaffected).
struct Residency {
  const void* fn;
  int device;
  unsigned threads;
  size_t smem;
  int blocks_per_sm;
};

template <class Fn>
inline gpuError_t blocks_per_sm(Fn fn, int device, unsigned threads, size_t smem, int* out) {
  static std::mutex mu;
  static std::vector<Residency> known;
  const void* key = reinterpret_cast<const void*>(fn);
  std::lock_guard<std::mutex> lock(mu);
  for (const Residency& r : known)
    if (r.fn == key && r.device == device && r.threads == threads && r.smem == smem) {
      *out = r.blocks_per_sm;
      return gpuSuccess;
    }
  // Dynamic shared memory past the default 48 KiB (static included) needs the kernel's opt-in,
  // a maximum: raised to the largest size asked so far, never lowered (an earlier shape of the
  // same kernel may still need more).
  size_t allowed = 0;
  for (const Residency& r : known)
    if (r.fn == key && r.device == device) allowed = std::max(allowed, r.smem);
  gpuError_t e = gpuSuccess;
  if (smem > allowed) e = gpuFuncSetAttribute(fn, gpuFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  int n = 0;
  if (e == gpuSuccess) e = gpuOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, int(threads), smem);
  if (e != gpuSuccess) return e;
  n = std::max(n, 1);
  known.push_back(Residency{key, device, threads, smem, n});
  *out = n;
  return gpuSuccess;
}

// Launches fn(args...) on the caller's stream; on sm_90 and later with programmatic stream
// serialization, so the launch overlaps the end of the previous kernel (the kernel waits for its
// memory: gpu_wait_for_previous_grid). Any operation's kernel.
template <class Fn, class... Args>
inline gpuError_t launch_pdl(Fn fn, const DeviceFacts& dev, unsigned blocks, unsigned threads, size_t smem,
                             gpuStream_t stream, const Args&... args) {
#if !defined(__HIPCC__)
  if (dev.major >= 9) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attr;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, fn, args...);
  }
#endif
  fn<<<dim3(blocks), dim3(threads), smem, stream>>>(args...);
  return gpuSuccess;
}

inline gpuError_t launch_kernel(KernelFn fn, const DeviceFacts& dev, unsigned blocks, unsigned threads, size_t smem,
                                gpuStream_t stream, const RmsnormQuantCall& c, const RowShape& shape,
                                const Accesses& acc, int32_t gamma_smem) {
  return launch_pdl(fn, dev, blocks, threads, smem, stream, c, shape, acc, gamma_smem);
}

// One call: as many blocks as the rows need, at most as many as can be resident at once (each
// walks over its share of the rows); `smem` bytes of dynamic shared memory a block (the weight
// table: proportional to the block's threads). A call whose rows all fit in one round of blocks
// of a single row (at least a warp: rows shorter than a warp share one) is launched that way
// (short calls, decode: no block waits at its barriers for rows past the call's, and a call's rows
// spread over more multiprocessors); the others in `shape`'s blocks of R rows. The kernel and
// every row's arithmetic are the same either way. The grid size goes to *grid where asked.
inline gpuError_t launch_rmsnorm_quant(KernelFn fn, const DeviceFacts& dev, int device, gpuStream_t stream,
                                       const RmsnormQuantCall& c, RowShape shape, const Accesses& acc,
                                       size_t smem, int32_t gamma_smem, int64_t* grid = nullptr) {
  int per_sm = 1;
  const int r1 = shape.threads_per_row >= kGpuWarp ? 1 : kGpuWarp / shape.threads_per_row;
  if (shape.rows_per_block > r1) {
    const unsigned threads1 = unsigned(r1 * shape.threads_per_row);
    const size_t smem1 = smem / size_t(shape.rows_per_block) * size_t(r1);
    const gpuError_t e = blocks_per_sm(fn, device, threads1, smem1, &per_sm);
    if (e != gpuSuccess) return e;
    if ((c.lead.rows + r1 - 1) / r1 <= int64_t(per_sm) * dev.multiprocessors) {
      shape.rows_per_block = r1;
      smem = smem1;
    }
  }
  const unsigned threads = unsigned(shape.rows_per_block * shape.threads_per_row);
  const gpuError_t e = blocks_per_sm(fn, device, threads, smem, &per_sm);
  if (e != gpuSuccess) return e;
  const int64_t groups = (c.lead.rows + shape.rows_per_block - 1) / shape.rows_per_block;
  const int64_t blocks = std::min<int64_t>(groups, int64_t(per_sm) * dev.multiprocessors);
  if (grid != nullptr) *grid = blocks;
  return launch_kernel(fn, dev, unsigned(blocks), threads, smem, stream, c, shape, acc, gamma_smem);
}

}  // namespace gpu
}  // namespace fusednorm
