// fusednorm-bench: the tensors of a call, and timing: adaptive reps of single calls, graph replay
// on a GPU, and the copy bandwidth the results are related to. Included by fusednorm_bench.cc only.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench_device.h"
#include "bench_util.h"
#include "core/dtype.h"
#include "core/elements.h"
#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace bench {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
// GPU, --timing auto: inputs below this are timed by graph replay (every shape of <= 128 tokens).
constexpr double kGraphBelowBytes = 16.0 * kMiB;

// ---------------------------------------------------------------- tensors

inline DLTensor tensor(void* data, DLDevice dev, DType t, int ndim, int64_t* shape) {
  DLTensor x{};
  x.data = data;
  x.device = dev;
  x.ndim = ndim;
  x.dtype = dl_from_dtype(t);
  x.shape = shape;
  x.strides = nullptr;
  x.byte_offset = 0;
  return x;
}

// The five tensors of one rmsnorm_quant call over `rows` rows of H, with the shapes they point to
// (hence not copyable). `sc` is the static scale [1] or the scales [rows, ns].
struct CallTensors {
  int64_t shp[2], wshp[1], sshp[2], one[1] = {1};
  DLTensor in, res, w, out, sc;
  CallTensors(DLDevice d, DType in_t, DType out_t, int64_t rows, int64_t h, int64_t ns, bool static_scale, void* x,
              void* r, void* wt, void* q, void* scales)
      : shp{rows, h}, wshp{h}, sshp{rows, ns} {
    in = tensor(x, d, in_t, 2, shp);
    res = tensor(r, d, in_t, 2, shp);
    w = tensor(wt, d, in_t, 1, wshp);
    out = tensor(q, d, out_t, 2, shp);
    sc = static_scale ? tensor(scales, d, DType::kF32, 1, one) : tensor(scales, d, DType::kF32, 2, sshp);
  }
  CallTensors(const CallTensors&) = delete;
  CallTensors& operator=(const CallTensors&) = delete;
};

inline size_t round64(size_t b) { return (b + 63) / 64 * 64; }
inline int elem_bytes(DType t) { return dtype_bits(t) / 8; }

// The largest finite value of an output format (for a sensible static scale).
inline float format_max(DType t) {
  switch (t) {
#define FN_MINIFLOAT(name, dl, e, m, bias, max_code, ...) \
  case DType::k_##name: return decode(t, max_code);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    default: return 127.0f;  // int8
  }
}

// ---------------------------------------------------------------- timing

struct Timing {
  double sec = 0;     // median seconds per call
  double min_sec = 0; // fastest sample, seconds per call
  int samples = 0;    // timed samples
  long inner = 0;     // calls per sample
};

// call() runs one call (on the next buffer set). Warm-up, then samples of `inner` calls each
// (inner >= 1, so that a sample lasts >= dev.min_sample_s() and the timer is negligible); median
// per call. Samples are timed by the device (host clock on the CPU, events on a GPU).
// prior_s: seconds of a call just made on the same buffers (0: none); a long one (>= 50 ms) is
// warm-up enough.
template <class Call>
Timing time_calls(Device& dev, Call&& call, double target_s, int fixed_reps, int min_reps, double prior_s = 0) {
  Timing t;
  double est = prior_s;
  if (prior_s < 0.05) {
    const double warm_s = std::max(0.005, 0.1 * target_s);
    const double t0 = now_s();
    double el = 0, timed = 0;
    long n = 0;
    do {
      dev.start_timer();
      call();
      timed += dev.stop_timer();
      ++n;
      el = now_s() - t0;
    } while (el < warm_s || (n < 2 && el < 0.05));
    est = std::max(1e-8, timed / double(n));
  }
  t.inner = std::max(1L, long(std::ceil(dev.min_sample_s() / est)));
  if (fixed_reps > 0) t.samples = fixed_reps;
  else t.samples = int(std::min(5000.0, std::max(double(min_reps), std::round(target_s / (double(t.inner) * est)))));
  // GPU, several calls a sample: one untimed call first, so the stream is busy when the start
  // event is recorded and the first timed call already waits behind it (else the sample would
  // time the host's launch latency of that call too).
  const bool lead_in = !dev.is_host() && t.inner > 1;
  std::vector<double> s(size_t(t.samples));
  for (int i = 0; i < t.samples; ++i) {
    if (lead_in) call();
    dev.start_timer();
    for (long k = 0; k < t.inner; ++k) call();
    s[size_t(i)] = dev.stop_timer() / double(t.inner);
  }
  t.sec = median(s);
  t.min_sec = *std::min_element(s.begin(), s.end());
  return t;
}

// GPU, small shapes: a stream launch costs as much as the kernel, so time replays of a graph
// holding `k` consecutive calls (each call takes the next buffer set: with k = the number of sets
// one replay walks all of them, so the cache holds none from the replay before) and divide by k.
// false and *error when the device cannot capture the calls.
template <class Call>
bool time_graph(Device& dev, Call&& call, size_t k, double target_s, int fixed_reps, int min_reps, Timing* t,
                std::string* error) {
  std::unique_ptr<Replay> graph = dev.capture(
      [&] {
        for (size_t i = 0; i < k; ++i) call();
      },
      error);
  if (!graph) return false;
  *t = time_calls(dev, [&] { graph->launch(); }, target_s, fixed_reps, min_reps);
  t->sec /= double(k);
  t->min_sec /= double(k);
  t->inner *= long(k);  // calls per sample
  return true;
}

// Copy bandwidth: warm-up, then the median of reps; bytes read + bytes written per second.
inline double copy_gbps(Device& dev, size_t bytes, int reps, double* ms) {
  Buffer src(dev, bytes), dst(dev, bytes);
  dev.fill_bytes(src.data(), 0x5A, bytes);
  dev.fill_bytes(dst.data(), 0, bytes);
  dev.copy(dst.data(), src.data(), bytes);
  dev.synchronize();
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    if (!dev.is_host()) dev.copy(dst.data(), src.data(), bytes);  // lead-in, as in time_calls
    dev.start_timer();
    dev.copy(dst.data(), src.data(), bytes);
    s.push_back(dev.stop_timer());
  }
  const double m = median(s);
  *ms = m * 1e3;
  return 2.0 * double(bytes) / m / 1e9;
}

}  // namespace bench
}  // namespace fusednorm
