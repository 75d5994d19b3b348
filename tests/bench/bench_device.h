// fusednorm-bench: where the benchmark's tensors live. Everything device-specific (allocation,
// host<->device copies, synchronization, the clock of timed regions, graph replay, the
// copy-bandwidth baseline) sits behind the small Device interface below; the benchmark never
// touches device memory any other way. The C API picks the backend from DLTensor.device, so a GPU
// is one more Device implementation: CudaDevice (bench_cuda.cc, built when CMake finds CUDA and
// defines FUSEDNORM_BENCH_CUDA) plus a line in make_device().
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <new>
#include <string>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace bench {

// Last-level cache size in bytes (0 if unknown): sysfs (the largest cache of cpu0), else sysconf
// (which some virtual machines report wrongly).
inline size_t llc_bytes() {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    FILE* f = fopen(path, "r");
    if (!f) break;
    unsigned long long v = 0;
    char unit = 0;
    if (fscanf(f, "%llu%c", &v, &unit) >= 1) {
      if (unit == 'K') v <<= 10;
      else if (unit == 'M') v <<= 20;
      best = std::max(best, size_t(v));
    }
    fclose(f);
  }
  if (best) return best;
  long v = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (v <= 0) v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return v > 0 ? size_t(v) : 0;
}

// Work queued on a device's stream, recorded once and replayed as a unit (a CUDA graph).
class Replay {
 public:
  virtual ~Replay() = default;
  // Queues one replay on the device's stream.
  virtual void launch() = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  // For reports: name() and what it is ("cuda:0 (NVIDIA H200)").
  virtual std::string label() const { return name(); }
  virtual DLDevice dl_device() const = 0;
  bool is_host() const { return dl_device().device_type == kDLCPU; }
  // The stream passed to the C API (CPU: ignored, NULL).
  virtual void* stream() const { return nullptr; }
  // At least 64-byte aligned; throws std::bad_alloc.
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p, size_t bytes) = 0;
  // A host pointer to device memory p, or nullptr when the host cannot address it.
  virtual void* host_view(void* p) const = 0;
  virtual void upload(void* dst, const void* src_host, size_t bytes) = 0;
  virtual void download(void* dst_host, const void* src, size_t bytes) = 0;
  virtual void fill_bytes(void* p, int value, size_t bytes) = 0;
  // Device-to-device copy spread over the whole device: the bandwidth baseline.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // Waits for all work queued on stream().
  virtual void synchronize() = 0;
  // A timed region: start_timer() marks its start on stream(), stop_timer() its end, waits for
  // it and returns the seconds between. Default: the host clock after synchronize() (the CPU,
  // where a call returns when its work is done); a GPU times on the device (events).
  virtual void start_timer() {
    synchronize();
    timer_start_ = host_seconds();
  }
  virtual double stop_timer() {
    synchronize();
    return host_seconds() - timer_start_;
  }
  // How long a timed sample should last at least (the timer's resolution and the cost of
  // starting a sample stay below ~1%).
  virtual double min_sample_s() const { return 100e-6; }
  // The cache that small shapes must not be timed from (CPU: last level; GPU: L2); 0: unknown.
  virtual size_t cache_bytes() const = 0;
  // Records the work `record` queues on stream() (nothing runs) into a Replay. nullptr, with
  // *error saying why, where the device cannot (the CPU) or capture failed.
  virtual std::unique_ptr<Replay> capture(const std::function<void()>& record, std::string* error) {
    (void)record;
    *error = name() + " has no graph replay";
    return nullptr;
  }
  // One line about the device ("Highway target AVX3, 2 oneTBB threads").
  virtual std::string detail() const = 0;

 protected:
  static double host_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

 private:
  double timer_start_ = 0;
};

// An owning device allocation.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& dev, size_t bytes) : dev_(&dev), bytes_(bytes) {
    if (bytes_ > 0) p_ = dev.alloc(bytes_);
  }
  Buffer(Buffer&& o) noexcept : dev_(o.dev_), p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; o.bytes_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      dev_ = o.dev_; p_ = o.p_; bytes_ = o.bytes_;
      o.p_ = nullptr; o.bytes_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }
  void reset() {
    if (p_) dev_->release(p_, bytes_);
    p_ = nullptr;
    bytes_ = 0;
  }
  char* data() const { return static_cast<char*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  Device* dev_ = nullptr;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// The host: memory from posix_memalign (2 MiB aligned and MADV_HUGEPAGE for large buffers, the
// same for the kernels' buffers and the copy baseline), parallel memset/memcpy with oneTBB in the
// caller's arena, and nothing to synchronize (the C call returns when the work is done).
class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int threads) : threads_(threads) {}
  std::string name() const override { return "cpu"; }
  DLDevice dl_device() const override { return DLDevice{kDLCPU, 0}; }
  void* alloc(size_t bytes) override {
    const size_t kHuge = size_t(2) << 20;
    const size_t align = bytes >= kHuge ? kHuge : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = nullptr;
    if (posix_memalign(&p, align, rounded) != 0 || p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (bytes >= kHuge) madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
  }
  void release(void* p, size_t) override { free(p); }
  void* host_view(void* p) const override { return p; }
  void upload(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void fill_bytes(void* p, int value, size_t bytes) override {
    chunked(bytes, [&](size_t b, size_t e) { memset(static_cast<char*>(p) + b, value, e - b); });
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    chunked(bytes, [&](size_t b, size_t e) {
      memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, e - b);
    });
  }
  void synchronize() override {}
  size_t cache_bytes() const override { return llc_bytes(); }
  std::string detail() const override {
    return std::string("Highway target ") + fusednorm_cpu_target() + ", " + std::to_string(threads_) +
           " oneTBB thread" + (threads_ == 1 ? "" : "s");
  }

 private:
  // Small copies on the calling thread; large ones cut into 1 MiB chunks handed out statically
  // (each thread streams one contiguous part, as a tuned memcpy would).
  template <class F>
  static void chunked(size_t bytes, F&& f) {
    const size_t kChunk = size_t(1) << 20;
    if (bytes <= 4 * kChunk) {
      if (bytes) f(0, bytes);
      return;
    }
    const size_t n = (bytes + kChunk - 1) / kChunk;
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, n),
        [&](const tbb::blocked_range<size_t>& r) {
          f(r.begin() * kChunk, std::min(bytes, r.end() * kChunk));
        },
        tbb::static_partitioner());
  }
  int threads_;
};

#ifdef FUSEDNORM_BENCH_CUDA
// bench_cuda.cc: CUDA device `index` through the CUDA runtime, or nullptr and *error says why
// (no driver or device, or the library's CUDA backend is unavailable).
std::unique_ptr<Device> make_cuda_device(int index, std::string* error);
#endif

// "cpu" (or "cpu:0") -> the host; "cuda[:N]" -> CUDA device N where built with CUDA. Other
// devices: nullptr and *error says why.
inline std::unique_ptr<Device> make_device(const std::string& spec, int threads, std::string* error) {
  if (spec == "cpu" || spec == "cpu:0") return std::make_unique<CpuDevice>(threads);
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (kind == "cuda" || kind == "gpu" || kind == "rocm" || kind == "hip") {
    const int32_t type = (kind == "rocm" || kind == "hip") ? kDLROCM : kDLCUDA;
    int index = 0;
    if (colon != std::string::npos) {
      const std::string n = spec.substr(colon + 1);
      char* end = nullptr;
      const long v = strtol(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || v < 0 || v > 1023) {
        *error = "--device " + spec + ": bad device index '" + n + "' (expected " + kind + ":N, N >= 0)";
        return nullptr;
      }
      index = int(v);
    }
#ifdef FUSEDNORM_BENCH_CUDA
    if (type == kDLCUDA) return make_cuda_device(index, error);
#else
    (void)index;  // a CUDA device's index; without CUDA the message below says why there is none
#endif
    fusednorm_backend_info info{};
    info.struct_size = sizeof info;
    std::string lib = "?";
    if (fusednorm_query_backend(type, &info) == FUSEDNORM_SUCCESS)
      lib = std::string(info.available ? "available" : "unavailable") + (info.detail[0] ? ": " : "") + info.detail;
    *error = "--device " + spec + ": " +
             (type == kDLCUDA ? std::string("this fusednorm-bench was built without CUDA (CMake found no nvcc, "
                                            "FUSEDNORM_WITH_CUDA off); rebuild with the CUDA toolkit to time on the GPU")
                              : std::string("fusednorm-bench has no HIP device path yet (see tests/bench/bench_device.h)")) +
             "; only --device cpu runs. The library's " + (type == kDLCUDA ? "CUDA" : "HIP") + " backend: " + lib;
    return nullptr;
  }
  *error = "--device " + spec + ": unknown device (expected cpu or cuda:N)";
  return nullptr;
}

}  // namespace bench
}  // namespace fusednorm
