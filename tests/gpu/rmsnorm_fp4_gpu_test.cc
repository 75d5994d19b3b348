// rmsnorm_fp4 and dequantize_fp4 on a GPU (kDLCUDA) through the public API, byte for byte against
// the CPU backend on the same inputs: every format, layout and option, every H of the list,
// special rows, batch invariance (1, 7, 4096, 16384 rows), CUDA-graph capture and replay with new
// inputs and a new global scale. Without a GPU every case prints FUSEDNORM_SKIP.
#include <cuda_runtime.h>
#include <math.h>

#include <catch2/catch.hpp>

#include "common/device_mirror.h"
#include "common/fp4_case.h"

namespace fusednorm {
namespace test {
namespace {

#define CUDA_OK(expr) REQUIRE((expr) == cudaSuccess)

// An rmsnorm_fp4 case mirrored on the GPU.
struct Fp4Device {
  Fp4Tensors& host;
  std::unique_ptr<DeviceMirror> input, residual, weight, output, scales, gs;
  explicit Fp4Device(Fp4Tensors& h) : host(h) {
    input = std::make_unique<DeviceMirror>(*h.input);
    if (h.residual) residual = std::make_unique<DeviceMirror>(*h.residual);
    weight = std::make_unique<DeviceMirror>(*h.weight);
    output = std::make_unique<DeviceMirror>(*h.output);
    scales = std::make_unique<DeviceMirror>(*h.scales);
    gs = std::make_unique<DeviceMirror>(*h.gs);
  }
  cudaError_t error() const {
    for (const auto* m : {&input, &residual, &weight, &output, &scales, &gs})
      if (*m && (*m)->error() != cudaSuccess) return (*m)->error();
    return cudaSuccess;
  }
  fusednorm_status enqueue(cudaStream_t stream = nullptr) {
    const Fp4Spec& s = host.spec;
    const auto o = s.options();
    DLTensor* out = output->dl();
    DLTensor* sc = scales->dl();
    ByteView out_u8(out), sc_u8(sc);
    if (s.uint8_views) {
      out = &out_u8.dl;
      sc = &sc_u8.dl;
    }
    return fusednorm_rmsnorm_fp4(input->dl(), residual ? residual->dl() : nullptr, s.norm ? weight->dl() : nullptr,
                                 out, sc, s.global_scale ? gs->dl() : nullptr, &o, stream);
  }
  cudaError_t download() {
    cudaError_t e = output->download();
    if (e == cudaSuccess) e = scales->download();
    if (e == cudaSuccess && residual) e = residual->download();
    return e;
  }
};

void check_gpu_fp4(Fp4Tensors& base) {
  auto cpu = base.clone_inputs();
  REQUIRE(cpu->run_library() == FUSEDNORM_SUCCESS);
  auto gpu_host = base.clone_inputs();
  Fp4Device gpu(*gpu_host);
  CUDA_OK(gpu.error());
  INFO(base.spec.describe());
  const fusednorm_status st = gpu.enqueue();
  INFO(fusednorm_last_error());
  REQUIRE(st == FUSEDNORM_SUCCESS);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(gpu.download());
  REQUIRE(compare_fp4(*gpu_host, *cpu) == "");
}

constexpr int64_t kGpuFp4Hs[] = {16, 32, 48, 64, 96, 144, 160, 224, 2048, 4096, 5120, 7168, 8192, 16384, 24576, 32768};

TEST_CASE("gpu rmsnorm_fp4: equals the CPU backend for every format, layout, option and H", "[gpu][rmsnorm_fp4]") {
  if (!cuda_backend_available()) return;
  const uint64_t seed = Catch::rngSeed() ? Catch::rngSeed() : uint64_t(time(nullptr));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> coin(0, 1), kind(0, 3);
  for (int64_t h : kGpuFp4Hs)
    for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4})
      for (DType in : {DType::kF32, DType::kF16, DType::kBF16})
        for (int flags = 0; flags < 8; ++flags) {
          Fp4Spec s;
          s.format = format;
          if (h % s.block() != 0) continue;
          s.in = in;
          s.w = coin(rng) ? in : DType::kF32;
          s.h = h;
          s.swizzled = flags & 1;
          s.residual = flags & 2;
          s.norm = !(flags & 4) || coin(rng);
          s.global_scale = format == FUSEDNORM_FP4_NVFP4 && coin(rng);
          s.gs = s.global_scale ? 300.0f + 100.0f * float(coin(rng)) : 1.0f;
          s.uint8_views = coin(rng);
          s.weight_offset = coin(rng) ? 1.0f : 0.0f;
          // 9 rows: the short-call kernels where the views allow them (S blocks a row, or with a
          // residual a block a row); 37: those of a block a row, or for H of 4 steps and more the
          // fast and wide kernels; 300 (more than an H200's 132 multiprocessors): the fast and wide
          // kernels.
          s.lead = s.swizzled && coin(rng) ? std::vector<int64_t>{2, 67}
                                           : std::vector<int64_t>{coin(rng) ? 300 : coin(rng) ? 37 : 9};
          s.row_pad = coin(rng) ? 32 : 0;
          s.misalign = coin(rng) ? 2 : 0;
          Fp4Tensors t(s);
          t.fill_random(rng, kind(rng));
          check_gpu_fp4(t);
        }
}

TEST_CASE("gpu rmsnorm_fp4: special rows", "[gpu][rmsnorm_fp4]") {
  if (!cuda_backend_available()) return;
  for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4})
    for (DType in : {DType::kF32, DType::kBF16, DType::kF16})
      for (bool norm : {true, false}) {
        Fp4Spec s;
        s.format = format;
        s.in = in;
        s.norm = norm;
        s.h = 2048;
        s.lead = {6};
        Fp4Tensors t(s);
        std::mt19937_64 rng(3);
        t.fill_random(rng);
        for (int64_t i = 0; i < s.h; ++i) {
          t.input->set(0, i, 0.0f);
          t.input->set(1, i, i == 5 ? 3e38f : 1.0f);
          t.input->set(2, i, ldexpf(float(i % 7) - 3.0f, -140));
          t.input->set(3, i, i == 40 ? NAN : 0.25f);
          t.input->set(4, i, i == 20 ? -INFINITY : 0.25f);
          t.input->set(5, i, i % 2 ? 1e19f : -1e19f);  // squares overflow (f32)
        }
        check_gpu_fp4(t);
      }
}

TEST_CASE("gpu rmsnorm_fp4: the same rows give the same bytes at batch 1, 7, 4096, 16384", "[gpu][rmsnorm_fp4]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(99);
  for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4}) {
    Fp4Spec big;
    big.format = format;
    big.h = 4096;
    big.lead = {16384};
    big.global_scale = format == FUSEDNORM_FP4_NVFP4;
    big.gs = 480.0f;
    Fp4Tensors all(big);
    all.fill_random(rng);
    auto gpu_all = all.clone_inputs();
    Fp4Device g(*gpu_all);
    CUDA_OK(g.error());
    REQUIRE(g.enqueue() == FUSEDNORM_SUCCESS);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(g.download());
    for (int64_t batch : {1, 7, 4096}) {
      Fp4Spec s = big;
      s.lead = {batch};
      Fp4Tensors part(s);
      for (int64_t r = 0; r < batch; ++r) memcpy(part.input->row(r), all.input->row(r), size_t(s.h) * 2);
      part.weight->copy_from(*all.weight);
      Fp4Device pg(part);
      CUDA_OK(pg.error());
      REQUIRE(pg.enqueue() == FUSEDNORM_SUCCESS);
      CUDA_OK(cudaDeviceSynchronize());
      CUDA_OK(pg.download());
      INFO("format " << format << " batch " << batch);
      for (int64_t r = 0; r < batch; ++r) {
        REQUIRE(memcmp(part.output->row(r), gpu_all->output->row(r), size_t(s.h / 2)) == 0);
        REQUIRE(memcmp(part.scales->row(r), gpu_all->scales->row(r), size_t(s.h / s.block())) == 0);
      }
    }
  }
}

TEST_CASE("gpu rmsnorm_fp4: CUDA graph capture and replay with new inputs and global scale",
          "[gpu][rmsnorm_fp4][graph]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(21);
  for (bool swizzled : {false, true}) {
    Fp4Spec s;
    s.h = 4096;
    s.lead = {8};
    s.residual = true;
    s.swizzled = swizzled;
    s.global_scale = true;
    s.gs = 448.0f;
    Fp4Tensors t(s);
    t.fill_random(rng);
    auto gpu_host = t.clone_inputs();
    Fp4Device gpu(*gpu_host);
    CUDA_OK(gpu.error());
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const fusednorm_status st = gpu.enqueue(stream);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    REQUIRE(st == FUSEDNORM_SUCCESS);
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int round = 0; round < 3; ++round) {
      Fp4Spec fs = s;
      fs.gs = 100.0f * float(round + 2);
      Fp4Tensors fresh(fs);
      fresh.fill_random(rng);
      fresh.weight->copy_from(*t.weight);
      gpu_host->input->copy_from(*fresh.input);
      gpu_host->residual->copy_from(*fresh.residual);
      gpu_host->gs->set(0, 0, fs.gs);  // a new global scale in the same device scalar
      CUDA_OK(gpu.input->upload());
      CUDA_OK(gpu.residual->upload());
      CUDA_OK(gpu.gs->upload());
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      CUDA_OK(gpu.download());
      REQUIRE(fresh.run_library() == FUSEDNORM_SUCCESS);
      INFO("swizzled " << swizzled << " round " << round);
      REQUIRE(compare_fp4(*gpu_host, fresh) == "");
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

TEST_CASE("gpu dequantize_fp4: equals the CPU backend", "[gpu][rmsnorm_fp4]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(9);
  for (int format : {FUSEDNORM_FP4_NVFP4, FUSEDNORM_FP4_MXFP4})
    for (bool swizzled : {false, true})
      for (DType out : {DType::kF32, DType::kF16, DType::kBF16}) {
        Fp4Spec s;
        s.format = format;
        s.swizzled = swizzled;
        s.global_scale = format == FUSEDNORM_FP4_NVFP4;
        s.gs = 37.5f;
        s.h = 2048;
        s.lead = {130};
        Fp4Tensors t(s);
        t.fill_random(rng, 2);
        REQUIRE(t.run_library() == FUSEDNORM_SUCCESS);
        std::vector<int64_t> shape = s.lead;
        shape.push_back(s.h);
        HostTensor cpu(out, shape), gpu_out(out, shape);
        const auto o = s.dequant_options();
        REQUIRE(fusednorm_dequantize_fp4(t.output->dl(), t.scales->dl(), s.global_scale ? t.gs->dl() : nullptr,
                                         cpu.dl(), &o, nullptr) == FUSEDNORM_SUCCESS);
        DeviceMirror q(*t.output), sc(*t.scales), gs(*t.gs), y(gpu_out);
        CUDA_OK(q.error());
        CUDA_OK(y.error());
        const fusednorm_status st =
            fusednorm_dequantize_fp4(q.dl(), sc.dl(), s.global_scale ? gs.dl() : nullptr, y.dl(), &o, nullptr);
        INFO(s.describe() << " out " << dtype_name(out) << ": " << fusednorm_last_error());
        REQUIRE(st == FUSEDNORM_SUCCESS);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(y.download());
        REQUIRE(first_difference("dequantized", gpu_out, cpu) == "");
      }
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
