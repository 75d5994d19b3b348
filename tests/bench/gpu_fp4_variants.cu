// Tuning harness for the GPU rmsnorm_fp4 kernels (not part of the library or the test suite):
// compiles backends/gpu/rmsnorm_fp4.cuh as given by -I (tests/scripts/gpu_fp4_variants.sh builds
// it once per variant: another source tree or -D settings), calls the plugin's entry point
// (plugin_rmsnorm_fp4: the kernel choice and launch of the library) on bf16 rows, times each case
// with CUDA events over buffer sets larger than L2, and prints a hash of each case's codes and
// scales, so that variants can be checked for identical bytes. Cases: FORMAT:ROWS:H[:res] with
// FORMAT nvfp4, nvfp4s (swizzled), mxfp4 or mxfp4s.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "backends/gpu/rmsnorm_fp4.cuh"
#include "tests/bench/gpu_harness.cuh"

using namespace fusednorm;
using namespace fusednorm::gpu;

static uint64_t fnv(const std::vector<unsigned char>& v, uint64_t h = 1469598103934665603ull) {
  for (unsigned char b : v) h = (h ^ b) * 1099511628211ull;
  return h;
}

int main(int argc, char** argv) {
  const int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  DeviceFacts facts;
  facts.major = prop.major;
  facts.multiprocessors = prop.multiProcessorCount;
  facts.max_smem_per_block = prop.sharedMemPerBlockOptin;
  g_devices = {facts};

  const double copy_gbs = copy_bandwidth_gbs();  // same run
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  const int reps = getenv("VARIANT_REPS") ? atoi(getenv("VARIANT_REPS")) : 15;
  for (int a = 1; a < argc; ++a) {
    char fmt[16] = {};
    long long rows = 0, h = 0;
    if (sscanf(argv[a], "%15[a-z0-9]:%lld:%lld", fmt, &rows, &h) != 3) {
      fprintf(stderr, "case %s: expected FORMAT:ROWS:H[:res]\n", argv[a]);
      return 2;
    }
    const bool res = strstr(argv[a], ":res") != nullptr;
    const bool nv = strncmp(fmt, "nv", 2) == 0, sw = fmt[strlen(fmt) - 1] == 's';
    const int64_t block = nv ? 16 : 32, kt = (h / block + 3) / 4, srows = (rows + 127) / 128 * 128;
    const size_t in_bytes = size_t(rows) * h * 2, out_bytes = size_t(rows) * h / 2;
    const size_t sc_bytes = sw ? size_t(srows) * kt * 4 : size_t(rows) * (h / block);
    const int sets = int(std::max<size_t>(2, (size_t(768) << 20) / ((res ? 3 : 1) * in_bytes + out_bytes + 1)));
    std::vector<char*> ins(sets), ress(sets, nullptr), outs(sets), scs(sets);
    char* w;
    float* gs;
    CK(cudaMalloc(&w, h * 2));
    fill_bf16<<<64, 256>>>((uint16_t*)w, h, 99);
    CK(cudaMalloc(&gs, 4));
    const float gsv = 448.0f * 6.0f / 8.0f;
    CK(cudaMemcpy(gs, &gsv, 4, cudaMemcpyHostToDevice));
    for (int i = 0; i < sets; ++i) {
      CK(cudaMalloc(&ins[i], in_bytes));
      CK(cudaMalloc(&outs[i], out_bytes));
      CK(cudaMalloc(&scs[i], sc_bytes));
      fill_bf16<<<1024, 256>>>((uint16_t*)ins[i], size_t(rows) * h, 7);
      if (res) {
        CK(cudaMalloc(&ress[i], in_bytes));
        fill_bf16<<<1024, 256>>>((uint16_t*)ress[i], size_t(rows) * h, 11);
      }
    }
    CK(cudaDeviceSynchronize());  // the fills ran on the legacy stream, the calls go to `st`
    RmsnormFp4Call c;
    c.lead.ndim = 1;
    c.lead.dims[0] = rows;
    c.lead.rows = rows;
    c.h = h;
    c.block = block;
    c.in_type = DType::kBF16;
    c.w_type = DType::kBF16;
    c.in.strides[0] = h * 2;
    c.res.strides[0] = h * 2;
    c.out.strides[0] = h / 2;
    c.weight = w;
    c.format = nv ? FUSEDNORM_FP4_NVFP4 : FUSEDNORM_FP4_MXFP4;
    c.swizzled = sw;
    c.eps = 1e-6f;
    c.global_scale = nv ? reinterpret_cast<const char*>(gs) : nullptr;
    c.scales.strides[0] = h / block;
    c.swizzle_tiles = kt;
    c.swizzle_rows = srows;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    char msg[256];
    auto launch = [&](int i) {
      c.in.data = ins[i];
      c.res.data = ress[i];
      c.out.data = outs[i];
      c.scales.data = scs[i];
      if (plugin_rmsnorm_fp4(&c, dev, st, msg, sizeof msg) != FUSEDNORM_SUCCESS) {
        fprintf(stderr, "%s: %s\n", argv[a], msg);
        exit(1);
      }
    };
    for (int i = 0; i < sets; ++i) launch(i);
    // The hash: set 0 from fresh inputs (the residual runs change their inputs).
    if (res) {
      fill_bf16<<<1024, 256>>>((uint16_t*)ins[0], size_t(rows) * h, 7);
      fill_bf16<<<1024, 256>>>((uint16_t*)ress[0], size_t(rows) * h, 11);
    }
    CK(cudaDeviceSynchronize());
    launch(0);
    CK(cudaStreamSynchronize(st));
    std::vector<unsigned char> ho(out_bytes), hs(sc_bytes);
    CK(cudaMemcpy(ho.data(), outs[0], out_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hs.data(), scs[0], sc_bytes, cudaMemcpyDeviceToHost));
    const uint64_t hash = fnv(hs, fnv(ho));
    std::vector<float> t(reps);
    for (int r = 0; r < reps; ++r) {  // groups of 10 calls, rotating over the sets
      CK(cudaEventRecord(e0, st));
      for (int k = 0; k < 10; ++k) launch((r * 10 + k) % sets);
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&t[r], e0, e1));
      t[r] /= 10;
    }
    std::sort(t.begin(), t.end());
    const double us = t[reps / 2] * 1e3;
    const double bytes = double(in_bytes) * (res ? 3 : 1) + out_bytes + sc_bytes + h * 2;
    printf("%-8s %6lld %6lld %3s %9.2f us  min %9.2f  %6.1f%% copy  hash %016llx\n", fmt, rows, h, res ? "res" : "-", us,
           t[0] * 1e3, 100.0 * bytes / (us * 1e-6) / 1e9 / copy_gbs, (unsigned long long)hash);
    for (int i = 0; i < sets; ++i) {
      CK(cudaFree(ins[i]));
      CK(cudaFree(outs[i]));
      CK(cudaFree(scs[i]));
      if (res) CK(cudaFree(ress[i]));
    }
    CK(cudaFree(w));
    CK(cudaFree(gs));
    CK(cudaStreamDestroy(st));
  }
  return 0;
}
