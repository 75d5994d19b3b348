// fusednorm-bench: the CUDA device (--device cuda:N). Built only when CMake finds CUDA
// (FUSEDNORM_BENCH_CUDA); links the CUDA runtime. The library's CUDA backend (the plugin
// libfusednorm_cuda.so, with its own static copy of the runtime) runs on the same device's
// primary context and takes this device's stream, so buffers, streams, events and graphs made
// here are valid there.
//
// All work goes to one non-blocking stream created here: uploads and downloads are
// cudaMemcpyAsync + cudaStreamSynchronize on it, fills cudaMemsetAsync, the copy baseline a
// device-to-device cudaMemcpyAsync. Timed regions are bracketed by two CUDA events on the stream
// (device time, no host clock); capture() records the calls of a timed region into a CUDA graph.
#include <stdio.h>

#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "bench_device.h"

namespace fusednorm {
namespace bench {
namespace {

std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// Throws on a failed runtime call, naming it (the benchmark reports the case, or the run, as
// failed).
void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + " failed: " + cuda_error_text(e));
}

class CudaGraph final : public Replay {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  void launch() override { check_cuda(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch"); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

class CudaDevice final : public Device {
 public:
  // Everything that can fail is done here; nullptr and *error on failure.
  static std::unique_ptr<Device> open(int index, std::string* error) {
    const std::string spec = "--device cuda:" + std::to_string(index) + ": ";
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      *error = spec + "the CUDA runtime finds no usable device (" + cuda_error_text(e) + ")";
      return nullptr;
    }
    if (index >= count) {
      *error = spec + "no such device: the CUDA runtime sees " + std::to_string(count) + " device(s)";
      return nullptr;
    }
    // The library must serve CUDA tensors (its plugin loaded, the driver usable).
    fusednorm_backend_info info{};
    info.struct_size = sizeof info;
    if (fusednorm_query_backend(kDLCUDA, &info) != FUSEDNORM_SUCCESS || !info.available) {
      *error = spec + "the library's CUDA backend is unavailable: " + (info.detail[0] ? info.detail : fusednorm_last_error()) +
               " (build the plugin too: ninja -C <build> fusednorm_cuda; it is loaded from beside libfusednorm.so or "
               "from $FUSEDNORM_PLUGIN_DIR)";
      return nullptr;
    }
    std::unique_ptr<CudaDevice> d(new CudaDevice(index));
    e = cudaSetDevice(index);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&d->prop_, index);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->stream_, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreate(&d->ev_start_);
    if (e == cudaSuccess) e = cudaEventCreate(&d->ev_stop_);
    if (e != cudaSuccess) {
      *error = spec + "setting up the device failed: " + cuda_error_text(e);
      return nullptr;
    }
    // The device name: the library's own description of device 0 ("NVIDIA H200, compute
    // capability 9.0, ..."), the runtime's for other devices.
    const std::string desc = info.detail;
    d->model_ = index == 0 && !desc.empty() ? desc.substr(0, desc.find(',')) : std::string(d->prop_.name);
    d->backend_detail_ = index == 0 ? desc : std::string(d->prop_.name);
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    d->versions_ = "driver " + std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10) + ", bench runtime " +
                   std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10);
    return d;
  }

  ~CudaDevice() override {
    if (ev_stop_) cudaEventDestroy(ev_stop_);
    if (ev_start_) cudaEventDestroy(ev_start_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda:" + std::to_string(index_); }
  std::string label() const override { return name() + " (" + model_ + ")"; }
  DLDevice dl_device() const override { return DLDevice{kDLCUDA, index_}; }
  void* stream() const override { return stream_; }

  void* alloc(size_t bytes) override {
    use();
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);  // 256-byte aligned
    if (e != cudaSuccess || p == nullptr) {
      (void)cudaGetLastError();  // out of memory is not sticky: clear it
      throw std::bad_alloc();
    }
    return p;
  }
  void release(void* p, size_t) override {
    use();
    cudaFree(p);
  }
  void* host_view(void*) const override { return nullptr; }
  void upload(void* dst, const void* src, size_t bytes) override {
    use();
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (upload)");
    synchronize();
  }
  void download(void* dst, const void* src, size_t bytes) override {
    use();
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (download)");
    synchronize();
  }
  void fill_bytes(void* p, int value, size_t bytes) override {
    use();
    check_cuda(cudaMemsetAsync(p, value, bytes, stream_), "cudaMemsetAsync");
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    use();
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync (copy)");
  }
  void synchronize() override { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  // Device time between two events on the stream.
  void start_timer() override {
    use();
    check_cuda(cudaEventRecord(ev_start_, stream_), "cudaEventRecord");
  }
  double stop_timer() override {
    check_cuda(cudaEventRecord(ev_stop_, stream_), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(ev_stop_), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, ev_start_, ev_stop_), "cudaEventElapsedTime");
    return double(ms) * 1e-3;
  }
  // Events resolve ~0.5 us: samples of >= 1 ms keep that below 0.1%.
  double min_sample_s() const override { return 1e-3; }
  size_t cache_bytes() const override { return size_t(prop_.l2CacheSize); }

  // Stream capture (thread-local mode: the calls may query the runtime) into a graph,
  // instantiated and uploaded, so that the first replay costs what the others do.
  std::unique_ptr<Replay> capture(const std::function<void()>& record, std::string* error) override {
    use();
    cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
      *error = "cudaStreamBeginCapture failed: " + cuda_error_text(e);
      return nullptr;
    }
    std::string thrown;
    try {
      record();
    } catch (const std::exception& x) {
      thrown = x.what();
    }
    cudaGraph_t graph = nullptr;
    e = cudaStreamEndCapture(stream_, &graph);  // always ends the capture, also after a throw
    if (!thrown.empty() || e != cudaSuccess || graph == nullptr) {
      if (graph) cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      *error = thrown.empty() ? "cudaStreamEndCapture failed: " + cuda_error_text(e) : "capturing: " + thrown;
      return nullptr;
    }
    cudaGraphExec_t exec = nullptr;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      *error = "cudaGraphInstantiate failed: " + cuda_error_text(e);
      return nullptr;
    }
    std::unique_ptr<Replay> r(new CudaGraph(exec, stream_));
    e = cudaGraphUpload(exec, stream_);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) {
      *error = "cudaGraphUpload failed: " + cuda_error_text(e);
      return nullptr;
    }
    return r;
  }

  std::string detail() const override {
    char b[160];
    snprintf(b, sizeof b, "; L2 %.0f MiB; %s; timing with CUDA events on a stream of the bench",
             double(prop_.l2CacheSize) / double(1 << 20), versions_.c_str());
    return backend_detail_ + b;
  }

 private:
  explicit CudaDevice(int index) : index_(index) {}
  // The runtime's current device is per host thread: make ours current before each use.
  void use() const { check_cuda(cudaSetDevice(index_), "cudaSetDevice"); }

  int index_;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ev_start_ = nullptr, ev_stop_ = nullptr;
  std::string model_, backend_detail_, versions_;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int index, std::string* error) { return CudaDevice::open(index, error); }

}  // namespace bench
}  // namespace fusednorm
