// A CUDA device copy of a HostTensor's whole allocation (guard bytes and poison included), so that
// writes outside the tensor are caught after the download. Errors are returned, never asserted
// (Catch2's assertions are not thread-safe): check error() after construction.
#pragma once

#include <cuda_runtime.h>
#include <stdio.h>

#include <memory>

#include "common/rmsnorm_case.h"
#include "common/test_tensor.h"

namespace fusednorm {
namespace test {

// True when the CUDA backend has a device; else prints FUSEDNORM_SKIP with the backend's reason
// (ctest reports the test as skipped). The backend's description is printed once a process.
inline bool cuda_backend_available() {
  fusednorm_backend_info info{};
  info.struct_size = sizeof info;
  if (fusednorm_query_backend(kDLCUDA, &info) != FUSEDNORM_SUCCESS || !info.available) {
    printf("FUSEDNORM_SKIP: no CUDA device: %s\n", info.detail);
    return false;
  }
  static bool said = false;
  if (!said) printf("CUDA backend: %s\n", info.detail);
  said = true;
  return true;
}

class DeviceMirror {
 public:
  explicit DeviceMirror(HostTensor& h) : host_(&h) {
    const auto& st = h.storage();
    error_ = cudaMalloc(&base_, st.size());
    if (error_ == cudaSuccess) error_ = upload();
    dl_ = *h.dl();
    dl_.data = static_cast<char*>(base_) + (h.data_begin() - st.data());
    dl_.device = DLDevice{kDLCUDA, 0};
  }
  ~DeviceMirror() { cudaFree(base_); }
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;
  cudaError_t error() const { return error_; }
  // cudaMemcpy from pageable memory returns once the bytes are staged, before their DMA to the
  // device has finished (CUDA's "API synchronization behavior"): ordered before later work of the
  // legacy default stream only. The tests' non-blocking streams (graph replays, the concurrency
  // test) are not ordered after it, so the upload waits for the legacy stream.
  cudaError_t upload() {
    const cudaError_t e = cudaMemcpy(base_, host_->storage().data(), host_->storage().size(), cudaMemcpyHostToDevice);
    return e == cudaSuccess ? cudaStreamSynchronize(cudaStreamLegacy) : e;
  }
  cudaError_t download() {
    if (error_ != cudaSuccess) return error_;
    return cudaMemcpy(host_->storage().data(), base_, host_->storage().size(), cudaMemcpyDeviceToHost);
  }
  DLTensor* dl() { return &dl_; }

 private:
  HostTensor* host_;
  void* base_ = nullptr;
  cudaError_t error_ = cudaSuccess;
  DLTensor dl_{};
};

// An rmsnorm_quant case's tensors mirrored on the GPU (errors returned, as above).
struct DeviceCase {
  CaseTensors& host;
  std::unique_ptr<DeviceMirror> input, residual, weight, output, scales;
  explicit DeviceCase(CaseTensors& h) : host(h) {
    input = std::make_unique<DeviceMirror>(*h.input);
    if (h.residual) residual = std::make_unique<DeviceMirror>(*h.residual);
    weight = std::make_unique<DeviceMirror>(*h.weight);
    output = std::make_unique<DeviceMirror>(*h.output);
    if (h.scales) scales = std::make_unique<DeviceMirror>(*h.scales);
  }
  // The first allocation or upload error of the mirrors.
  cudaError_t error() const {
    for (const auto* m : {&input, &residual, &weight, &output, &scales})
      if (*m && (*m)->error() != cudaSuccess) return (*m)->error();
    return cudaSuccess;
  }
  fusednorm_status enqueue(cudaStream_t stream, const fusednorm_rmsnorm_quant_options& o) {
    return fusednorm_rmsnorm_quant(input->dl(), residual ? residual->dl() : nullptr,
                                   host.spec.norm ? weight->dl() : nullptr, output->dl(),
                                   scales ? scales->dl() : nullptr, &o, stream);
  }
  fusednorm_status enqueue(cudaStream_t stream = nullptr) { return enqueue(stream, host.spec.options()); }
  // Copies the written tensors back into the host case.
  cudaError_t download() {
    cudaError_t e = output->download();
    if (e == cudaSuccess && residual) e = residual->download();
    if (e == cudaSuccess && scales) e = scales->download();
    return e;
  }
};

// One call captured as a CUDA graph on a stream of its own, ready to replay (errors returned:
// check error, then status, the call's own result during capture).
struct CapturedCall {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  fusednorm_status status = FUSEDNORM_SUCCESS;
  cudaError_t error = cudaSuccess;
  template <class Enqueue>  // fusednorm_status(cudaStream_t)
  explicit CapturedCall(Enqueue enqueue) {
    error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (error == cudaSuccess) error = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (error != cudaSuccess) return;
    status = enqueue(stream);
    error = cudaStreamEndCapture(stream, &graph);
    if (error == cudaSuccess) error = cudaGraphInstantiate(&exec, graph, 0);
  }
  ~CapturedCall() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (stream) cudaStreamDestroy(stream);
  }
  CapturedCall(const CapturedCall&) = delete;
  CapturedCall& operator=(const CapturedCall&) = delete;
  // Launches the graph and waits for it.
  cudaError_t replay() {
    const cudaError_t e = cudaGraphLaunch(exec, stream);
    return e == cudaSuccess ? cudaStreamSynchronize(stream) : e;
  }
};

}  // namespace test
}  // namespace fusednorm
