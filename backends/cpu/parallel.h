// How the CPU backend spreads a call over oneTBB's threads: by rows only (a row is always
// computed by one thread, whole), in the caller's arena, so the thread count never changes a byte;
// and the cache size the row passes plan for.
#pragma once

#include <stdint.h>
#include <unistd.h>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "hwy/cache_control.h"

#include <algorithm>
#include <atomic>

namespace fusednorm {

// Rows per task for a light per-row cost (cast): enough elements that a task outweighs its
// scheduling.
inline int64_t grain_rows(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)); }

// Rows per block for the operations (one Highway dispatch per block): blocks of >= 64Ki elements
// (a block costs a dispatch and a task, and its first row misses the prefetch), but at least ~4
// blocks per thread when the rows allow it.
inline int64_t block_rows(int64_t rows, int64_t cols) {
  const int64_t want = std::max<int64_t>(1, 65536 / std::max<int64_t>(cols, 1));
  const int64_t threads = std::max<int64_t>(1, tbb::this_task_arena::max_concurrency());
  const int64_t cap = std::max<int64_t>(1, rows / (4 * threads));
  return std::min(want, cap);
}

// Bytes of a core's L1 data cache (sysconf; 32 KiB where the system does not say), asked once.
inline int64_t l1_data_bytes() {
  static const int64_t bytes = [] {
    const long b = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return b >= 4096 ? int64_t(b) : int64_t(32) << 10;
  }();
  return bytes;
}

// A number unique per call (never 0): a thread caches per-call data (gamma') keyed by it.
inline uint64_t next_call_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Whether a call writes its outputs with streaming (non-temporal) stores: when they outgrow what
// its threads' private caches hold (kStreamBytesPerThread each). Such outputs reach memory before
// a consumer could read them from cache, and a streaming store writes a line without reading it
// first (a plain store's read for ownership is a third of the traffic of an operation with 2-byte
// inputs and outputs). Smaller outputs stay in cache for the next operation. Never changes a byte.
constexpr int64_t kStreamBytesPerThread = int64_t(2) << 20;
inline bool stream_outputs(int64_t out_bytes) {
  const int64_t threads = std::max<int64_t>(1, tbb::this_task_arena::max_concurrency());
  return out_bytes >= threads * kStreamBytesPerThread;
}

// f(r0, r1) for row blocks [r0, r1) covering [0, rows), in parallel. Each block ends with a store
// fence, so that its streaming stores (stream_outputs) are ordered before the block's completion
// is published to the caller's thread.
template <class F>
void parallel_rows(int64_t rows, int64_t grain, const F& f) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, grain), [&](const tbb::blocked_range<int64_t>& r) {
    f(r.begin(), r.end());
    hwy::FlushStream();
  });
}

}  // namespace fusednorm
