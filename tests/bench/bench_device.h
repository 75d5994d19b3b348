// fusednorm-bench: where the benchmark's tensors live. Everything device-specific (allocation,
// host<->device copies, synchronization before reading the host clock, the copy-bandwidth
// baseline) sits behind the small Device interface below; the benchmark never touches device
// memory any other way. The C API picks the backend from DLTensor.device, so a GPU path is one
// more Device implementation (cudaMalloc / cudaMemcpy / cudaStreamSynchronize / a device-to-device
// cudaMemcpyAsync as the baseline) plus a line in make_device().
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <algorithm>
#include <memory>
#include <new>
#include <string>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace bench {

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  virtual DLDevice dl_device() const = 0;
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
  // Waits for all work queued on stream(); the benchmark reads the host clock after it.
  virtual void synchronize() = 0;
  // One line about the device ("Highway target AVX3, 2 oneTBB threads").
  virtual std::string detail() const = 0;
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

// "cpu" (or "cpu:0") -> the host. Other devices: nullptr and *error says why.
inline std::unique_ptr<Device> make_device(const std::string& spec, int threads, std::string* error) {
  if (spec == "cpu" || spec == "cpu:0") return std::make_unique<CpuDevice>(threads);
  std::string kind = spec.substr(0, spec.find(':'));
  if (kind == "cuda" || kind == "gpu" || kind == "rocm" || kind == "hip") {
    const int32_t type = (kind == "rocm" || kind == "hip") ? kDLROCM : kDLCUDA;
    fusednorm_backend_info info{};
    info.struct_size = sizeof info;
    std::string lib = "?";
    if (fusednorm_query_backend(type, &info) == FUSEDNORM_SUCCESS)
      lib = std::string(info.available ? "available" : "unavailable") + (info.detail[0] ? ": " : "") + info.detail;
    *error = "--device " + spec +
             ": fusednorm-bench has no GPU device path yet (allocation, copies and timing; see "
             "tests/bench/bench_device.h); only --device cpu runs. The library's " +
             (type == kDLCUDA ? std::string("CUDA") : std::string("HIP")) + " backend: " + lib;
    return nullptr;
  }
  *error = "--device " + spec + ": unknown device (expected cpu; cuda:N / rocm:N are not supported yet)";
  return nullptr;
}

}  // namespace bench
}  // namespace fusednorm
