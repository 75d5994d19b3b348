// rmsnorm_quant on a GPU (kDLCUDA) through the public API, byte for byte against the CPU backend
// on the same fresh random inputs: every option combination, every H of the list, strided and
// misaligned rows, special rows, batch invariance, one call of more than 2^31 elements, and
// CUDA-graph capture and replay with new input data. Without a GPU every case prints
// FUSEDNORM_SKIP (ctest reports it as skipped).
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>

#include <catch2/catch.hpp>

#include "common/device_mirror.h"
#include "common/rmsnorm_case.h"
#include "core/plugin_abi.h"
#include "core/validate.h"

namespace fusednorm {
namespace test {
namespace {

#define CUDA_OK(expr) REQUIRE((expr) == cudaSuccess)

bool gpu_available() { return cuda_backend_available(); }

using GpuCase = DeviceCase;

// Runs the case on the CPU backend and on the GPU; compares every output byte.
void check_gpu_case(CaseTensors& base, const std::string& seed_note) {
  auto cpu = base.clone_inputs();
  REQUIRE(cpu->run_library() == FUSEDNORM_SUCCESS);
  auto gpu_host = base.clone_inputs();
  GpuCase gpu(*gpu_host);
  CUDA_OK(gpu.error());
  INFO(base.spec.describe() << " " << seed_note);
  const fusednorm_status st = gpu.enqueue();
  INFO(fusednorm_last_error());
  REQUIRE(st == FUSEDNORM_SUCCESS);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(gpu.download());
  REQUIRE(compare_outputs(*gpu_host, *cpu) == "");
}

const auto& kHs = kTestHs;
const auto& kIns = kTestIns;
const auto& kOuts = kTestOuts;

TEST_CASE("gpu rmsnorm_quant: equals the CPU backend for every option combination and every H",
          "[gpu][rmsnorm_quant]") {
  if (!gpu_available()) return;
  const uint64_t seed = Catch::rngSeed() ? Catch::rngSeed() : uint64_t(time(nullptr));
  std::mt19937_64 rng(seed);
  for_each_option_combination(rng, {2, 3}, {5}, [&](const CaseSpec& s) {
    CaseTensors t(s);
    t.fill_random(rng);
    check_gpu_case(t, "seed=" + std::to_string(seed));
  });
  // Every H with every main mode, input dtype, and aligned vs strided/misaligned rows.
  // Group sizes 32 and 128: groups of 4 to 32 lanes with 8- and 4-element vectors.
  struct Scaling {
    int mode;
    int64_t group;
  };
  const Scaling scalings[] = {{FUSEDNORM_SCALE_STATIC, 32},
                              {FUSEDNORM_SCALE_DYNAMIC_ROW, 32},
                              {FUSEDNORM_SCALE_DYNAMIC_GROUP, 32},
                              {FUSEDNORM_SCALE_DYNAMIC_GROUP, 128}};
  for (int64_t h : kHs)
    for (const Scaling& sc : scalings)
      for (DType in : kIns)
        for (int layout = 0; layout < 2; ++layout) {
          CaseSpec s;
          s.in = s.w = in;
          s.mode = sc.mode;
          s.group = sc.group;
          if (s.mode == FUSEDNORM_SCALE_DYNAMIC_GROUP && h % s.group != 0) continue;
          s.h = h;
          s.lead = {37};
          s.residual = s.mode == FUSEDNORM_SCALE_DYNAMIC_ROW;
          s.row_pad = layout ? 3 : 0;
          s.misalign = layout ? 2 : 0;
          CaseTensors t(s);
          t.fill_random(rng);
          check_gpu_case(t, "seed=" + std::to_string(seed));
        }
}

// One kernel serves several H with different shared-memory needs (the weight table grows with the
// block): a smaller H after a larger one must not lower the kernel's shared-memory opt-in below
// what the larger one, called again, needs (launch.cuh). Run alone (a Catch filter), these are the
// process's first calls of the kernel; the order is that of the failure this guards against
// (H 32768, then 16384, then 32768: "invalid argument" on the third launch).
TEST_CASE("gpu rmsnorm_quant: a larger H again after a smaller one of the same kernel", "[gpu][rmsnorm_quant]") {
  if (!gpu_available()) return;
  std::mt19937_64 rng(7);
  for (int64_t h : {32768, 16384, 2048, 32768, 16384}) {
    CaseSpec s;
    s.in = s.w = DType::kF16;
    s.out = DType::k_f8e5m2;
    s.mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
    s.h = h;
    s.lead = {5};
    CaseTensors t(s);
    t.fill_random(rng);
    check_gpu_case(t, "h=" + std::to_string(h));
  }
}

TEST_CASE("gpu rmsnorm_quant: special rows", "[gpu][rmsnorm_quant]") {
  if (!gpu_available()) return;
  for (DType in : kIns)
    for (DType out : kOuts)
      for (int variant = 0; variant < kSpecialVariants; ++variant) {
        CaseTensors t(special_spec(in, out, variant));
        fill_special_rows(t);
        check_gpu_case(t, "special rows");
      }
}

// Multipliers r = 1 / s of 2^127 and above (an f32 subnormal scale), where the kernels cannot fold
// the encoders' prescale into r (2r overflows; encode.cuh prescale_rcp) and multiply twice:
// static scales 2^-127 (r = 2^127) and 1.5 * 2^-127 (r just below it: folded), and per-row
// scales held at min_scale = 2^-127 (values up to 2^-125, so that amax / qmax stays below it),
// on quant-only f32 rows, zeros of both signs among them; static codes up to 512 (saturation).
TEST_CASE("gpu rmsnorm_quant: multipliers at and above 2^127", "[gpu][rmsnorm_quant]") {
  if (!gpu_available()) return;
  std::mt19937_64 rng(127);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (DType out : kOuts)
    for (int variant = 0; variant < 3; ++variant) {
      CaseSpec s;
      s.in = s.w = DType::kF32;
      s.out = out;
      s.norm = false;
      s.h = 4096;
      s.lead = {6};
      s.mode = variant < 2 ? FUSEDNORM_SCALE_STATIC : FUSEDNORM_SCALE_DYNAMIC_ROW;
      s.static_scale = variant == 0 ? 0x1p-127f : 0x1.8p-127f;
      s.min_scale = variant == 2 ? 0x1p-127f : 0.0f;
      CaseTensors t(s);
      for (int64_t r = 0; r < 6; ++r)
        for (int64_t i = 0; i < s.h; ++i)
          t.input->set(r, i, i % 97 == 0 ? (i % 2 ? -0.0f : 0.0f) : u(rng) * (variant < 2 ? 0x1p-118f : 0x1p-125f));
      INFO("variant " << variant);
      check_gpu_case(t, "large multipliers");
    }
}

TEST_CASE("gpu rmsnorm_quant: the same rows give the same bytes at batch 1, 7, 128, 4096, 16384",
          "[gpu][rmsnorm_quant]") {
  if (!gpu_available()) return;
  std::mt19937_64 rng(99);
  for (int64_t h : {int64_t(333), int64_t(4096)}) {
    CaseSpec big;
    big.h = h;
    big.lead = {16384};
    big.mode = h % 128 == 0 ? FUSEDNORM_SCALE_DYNAMIC_GROUP : FUSEDNORM_SCALE_DYNAMIC_ROW;
    CaseTensors all(big);
    all.fill_random(rng);
    auto gpu_host = all.clone_inputs();
    GpuCase gpu(*gpu_host);
    CUDA_OK(gpu.error());
    REQUIRE(gpu.enqueue() == FUSEDNORM_SUCCESS);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(gpu.download());
    for (int64_t batch : {1, 7, 128, 4096}) {
      CaseSpec s = big;
      s.lead = {batch};
      CaseTensors part(s);
      const size_t in_row = size_t(h) * 2;
      for (int64_t r = 0; r < batch; ++r) memcpy(part.input->row(r), all.input->row(r), in_row);
      part.weight->copy_from(*all.weight);
      auto ph = part.clone_inputs();
      GpuCase pg(*ph);
      CUDA_OK(pg.error());
      REQUIRE(pg.enqueue() == FUSEDNORM_SUCCESS);
      CUDA_OK(cudaDeviceSynchronize());
      CUDA_OK(pg.download());
      INFO("h=" << h << " batch=" << batch);
      for (int64_t r = 0; r < batch; ++r) {
        REQUIRE(memcmp(ph->output->row(r), gpu_host->output->row(r), size_t(h)) == 0);
        REQUIRE(memcmp(ph->scales->row(r), gpu_host->scales->row(r), size_t(s.groups() * 4)) == 0);
      }
    }
  }
}

TEST_CASE("gpu rmsnorm_quant: one call over more than 2^31 elements", "[gpu][rmsnorm_quant][large]") {
  if (!gpu_available()) return;
  CaseSpec s;
  s.h = 8192;
  s.lead = {(int64_t(1) << 31) / 8192 + 3};  // 2^31 + 3 * 8192 elements
  s.in = s.w = DType::kBF16;
  CaseTensors t(s);
  std::mt19937_64 rng(5);
  // Fill quickly: a repeating random row pattern with a per-row twist.
  std::vector<uint16_t> pattern(size_t(s.h) * 7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : pattern) v = uint16_t(math::encode_bf16(nd(rng)));
  for (int64_t r = 0; r < t.input->rows(); ++r) {
    uint16_t* row = reinterpret_cast<uint16_t*>(t.input->row(r));
    memcpy(row, pattern.data() + size_t(r % 7) * size_t(s.h), size_t(s.h) * 2);
    row[r % s.h] = uint16_t(math::encode_bf16(float(r % 1000) - 500.0f));
  }
  for (int64_t i = 0; i < s.h; ++i) t.weight->set(0, i, 1.0f + 0.001f * float(i % 100));
  check_gpu_case(t, "large");
}

TEST_CASE("gpu rmsnorm_quant: CUDA graph capture and replay with new inputs", "[gpu][rmsnorm_quant][graph]") {
  if (!gpu_available()) return;
  std::mt19937_64 rng(21);
  for (int mode : {FUSEDNORM_SCALE_STATIC, FUSEDNORM_SCALE_DYNAMIC_ROW, FUSEDNORM_SCALE_DYNAMIC_GROUP}) {
    CaseSpec s;
    s.h = 4096;
    s.lead = {8};
    s.mode = mode;
    s.residual = mode == FUSEDNORM_SCALE_DYNAMIC_ROW;
    CaseTensors t(s);
    t.fill_random(rng);
    auto gpu_host = t.clone_inputs();
    GpuCase gpu(*gpu_host);
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
      // New input data in the same buffers, then replay.
      CaseTensors fresh(s);
      fresh.fill_random(rng);
      fresh.weight->copy_from(*t.weight);
      gpu_host->input->copy_from(*fresh.input);
      CUDA_OK(gpu.input->upload());
      if (fresh.residual) {
        gpu_host->residual->copy_from(*fresh.residual);
        CUDA_OK(gpu.residual->upload());
      }
      if (mode == FUSEDNORM_SCALE_STATIC) {
        gpu_host->scales->set(0, 0, 0.01f * float(round + 1));  // a new static scale, same pointer
        fresh.scales->set(0, 0, 0.01f * float(round + 1));
        CUDA_OK(gpu.scales->upload());
      }
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      CUDA_OK(gpu.download());
      REQUIRE(fresh.run_library() == FUSEDNORM_SUCCESS);
      INFO("mode " << mode << " round " << round);
      REQUIRE(compare_outputs(*gpu_host, fresh) == "");
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// The kernels may use hardware FP8, int8 and paired bf16/f16 conversions (the residual's sums);
// the plugin's own exhaustive check proves them equal to the shared math for all 2^32 inputs on
// this device.
TEST_CASE("gpu encoders: the kernels' encoders equal the shared math for all 2^32 inputs", "[gpu][exhaustive]") {
  if (!gpu_available()) return;
  Dl_info info;
  REQUIRE(dladdr(reinterpret_cast<void*>(&fusednorm_version), &info) != 0);
  std::string dir = info.dli_fname;
  dir = dir.substr(0, dir.rfind('/') + 1);
  void* handle = dlopen((dir + "libfusednorm_cuda.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  INFO(dlerror());
  REQUIRE(handle != nullptr);
  auto entry = reinterpret_cast<fusednorm_plugin_entry_fn>(dlsym(handle, "fusednorm_plugin_entry_cuda"));
  REQUIRE(entry != nullptr);
  char msg[512] = "";
  const fusednorm_status st = entry()->verify_encoders(0, msg, sizeof msg);
  INFO(msg);
  REQUIRE(st == FUSEDNORM_SUCCESS);
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
