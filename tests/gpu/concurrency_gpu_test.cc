// Many host threads x many streams calling at once on a GPU (kDLCUDA): 8 threads, each with its
// own 2 to 4 non-blocking streams created by the thread, each enqueueing many rmsnorm_quant calls
// (its own shapes, dtypes, scale modes, residual on and off, packed scales, strided and
// misaligned rows; H values that share kernels across threads with different shared-memory
// needs) and cast calls, released together by a start latch. No GPU call is made before the
// latch, so the threads race on the plugin's first launches too. After synchronizing its streams
// every thread downloads every output allocation (guards included) and compares it byte for byte
// with the CPU backend's result for the same inputs, computed before the threads start. Invalid
// calls naming the thread (options->eps = -(t+1)) check that fusednorm_last_error() stays
// per-thread on the GPU path as well. Without a GPU the case prints FUSEDNORM_SKIP.
//
// Catch2's assertions are not thread-safe: threads collect failures as strings; the main thread
// asserts after joining.
#include <cuda_runtime.h>
#include <math.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/device_mirror.h"
#include "common/rmsnorm_case.h"
#include "common/test_tensor.h"
#include "common/threads.h"
#include "fusednorm/fusednorm.h"

namespace fusednorm {
namespace test {
namespace {

constexpr int kThreads = 8;
constexpr int kJobsPerThread = 6;
constexpr int kInstances = 3;  // copies of each job, spread over the thread's streams
constexpr int kRepeats = 4;    // enqueues of a call without residual (idempotent) on its stream

bool gpu_available() { return cuda_backend_available(); }

std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

// One rmsnorm_quant call on the GPU: its host tensors (overwritten by the download) and their
// device copies, allocated and uploaded on the main thread (where REQUIRE is allowed).
struct RqInstance {
  std::unique_ptr<CaseTensors> host;
  std::unique_ptr<DeviceCase> dev;
  CaseTensors* expected = nullptr;  // the CPU backend's result (shared, read only)
  const std::unique_ptr<DeviceMirror>& residual;
  explicit RqInstance(const CaseTensors& base, CaseTensors& cpu)
      : host(base.clone_inputs()), dev(std::make_unique<DeviceCase>(*host)), expected(&cpu), residual(dev->residual) {
    REQUIRE(dev->error() == cudaSuccess);
  }
  fusednorm_status enqueue(cudaStream_t stream, const fusednorm_rmsnorm_quant_options& o) { return dev->enqueue(stream, o); }
  cudaError_t download() { return dev->download(); }
};

// One cast call on the GPU (the CUDA backend may not offer cast: then UNSUPPORTED, dst untouched).
struct CastInstance {
  std::unique_ptr<HostTensor> src, dst, expected;
  std::unique_ptr<DeviceMirror> dsrc, ddst;
  CastInstance(DType from, DType to, std::vector<int64_t> shape, int64_t pad, std::mt19937_64& rng) {
    src = std::make_unique<HostTensor>(from, shape, pad);
    std::normal_distribution<float> nd(0.0f, 4.0f);
    for (int64_t r = 0; r < src->rows(); ++r)
      for (int64_t c = 0; c < src->cols(); ++c) src->set(r, c, nd(rng));
    dst = std::make_unique<HostTensor>(to, shape, pad);
    expected = std::make_unique<HostTensor>(to, shape, pad);
    REQUIRE(fusednorm_cast(src->dl(), expected->dl(), nullptr, nullptr) == FUSEDNORM_SUCCESS);  // CPU backend
    dsrc = std::make_unique<DeviceMirror>(*src);
    ddst = std::make_unique<DeviceMirror>(*dst);
    REQUIRE(dsrc->error() == cudaSuccess);
    REQUIRE(ddst->error() == cudaSuccess);
  }
};

// Thread t's calls: its own input dtype and output format, scale modes, residual, layouts and H.
// H values of one kernel (same dtypes, mode and vector shape) recur across threads with different
// weight tables (32768, 16384, 2048), so the launches' shared-memory opt-in is raced on.
CaseSpec thread_spec(int t, int k) {
  const DType outs[] = {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::k_f8e5m2,
                        DType::kI8,        DType::k_f8e4m3,     DType::k_f8e5m2fnuz};
  const DType scale_types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kE8M0};
  const int64_t hs[] = {4096, 7168, 333, 8192, 1001, 128, 5120, 24576, 97, 2048};
  CaseSpec s;
  s.in = kTestIns[size_t(t % 3)];
  s.w = kTestIns[size_t((t + k) % 3)];
  s.out = outs[size_t((t + k) % 6)];
  s.scale = scale_types[size_t((t + 2 * k) % 4)];
  s.residual = (t + k) % 2 == 1;
  s.norm = (t * kJobsPerThread + k) % 9 != 4;
  s.weight_offset = k == 3 ? 1.0f : 0.0f;
  s.h = hs[size_t((t * 3 + k) % 10)];
  switch (k) {
    case 0: s.mode = FUSEDNORM_SCALE_STATIC; break;
    case 1: s.mode = FUSEDNORM_SCALE_DYNAMIC_ROW; break;
    case 2:
      s.mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
      s.placement = FUSEDNORM_SCALES_PACKED_ROW_END;
      break;
    case 3:
    case 4:
      s.mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
      s.group = k == 3 ? 32 : (t % 2 ? 64 : 128);
      s.col_major_scales = t % 2 == 0;
      s.h = std::max<int64_t>(s.group, s.h / s.group * s.group);
      break;
    default:  // the shared-kernel family: f16 -> e5m2, per-row scales, H by thread
      s.in = s.w = DType::kF16;
      s.out = DType::k_f8e5m2;
      s.scale = DType::kF32;
      s.mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
      s.residual = false;
      s.norm = true;
      s.h = t % 3 == 0 ? 32768 : t % 3 == 1 ? 16384 : 2048;
  }
  const std::vector<int64_t> leads[] = {{1}, {7}, {2, 9}, {64}, {37}, {}};
  s.lead = leads[size_t((t + 5 * k) % 6)];
  if (s.lead.empty()) s.col_major_scales = false;
  s.row_pad = (t + k) % 4 == 2 ? 3 : 0;
  s.misalign = (t + k) % 5 == 3 ? 2 : 0;
  return s;
}

struct ThreadResult : ThreadLog {
  int64_t compared = 0, enqueued = 0;
};

struct ThreadWork {
  std::vector<std::unique_ptr<RqInstance>> rq;
  std::vector<std::unique_ptr<CastInstance>> casts;
};

template <class Wait>
void run_thread(int t, ThreadWork& w, Wait wait, ThreadResult& r) {
  const std::string me = "thread " + std::to_string(t) + ": ";
  // Own streams, created by this thread.
  const int nstreams = 2 + t % 3;
  std::vector<cudaStream_t> streams;
  cudaError_t e = cudaSetDevice(0);
  for (int i = 0; i < nstreams && e == cudaSuccess; ++i) {
    cudaStream_t s;
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess) streams.push_back(s);
  }
  wait();
  if (e != cudaSuccess) {
    r.fail(me + "stream creation: " + cuda_text(e));
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
    return;
  }

  const std::string token = "options->eps = " + std::to_string(-(t + 1)) + ":";
  int calls = 0;
  for (int rep = 0; rep < kRepeats; ++rep) {
    for (size_t i = 0; i < w.rq.size(); ++i) {
      RqInstance& inst = *w.rq[i];
      if (rep > 0 && inst.residual) continue;  // residual is in/out: one call only
      // The copies of a job on different streams; a call repeated on the same one (ordered).
      cudaStream_t stream = streams[i % streams.size()];
      const auto o = inst.host->spec.options();
      const fusednorm_status st = inst.enqueue(stream, o);
      ++r.enqueued;
      if (st != FUSEDNORM_SUCCESS)
        r.fail(me + inst.host->spec.describe() + ": " + fusednorm_status_string(st) + ": " + fusednorm_last_error());
      if (++calls % 5 == 0) {
        // Invalid on the GPU path: rejected before any launch, the message names this thread.
        auto bad = o;
        bad.eps = -float(t + 1);
        const fusednorm_status bst = inst.enqueue(stream, bad);
        const std::string msg = fusednorm_last_error();
        if (bst != FUSEDNORM_INVALID_ARGUMENT || msg.find(token) == std::string::npos)
          r.fail(me + "invalid call returned " + fusednorm_status_string(bst) + " with \"" + msg + "\"");
        for (int u = 0; u < kThreads; ++u)
          if (u != t && msg.find("options->eps = " + std::to_string(-(u + 1)) + ":") != std::string::npos)
            r.fail(me + "last error names thread " + std::to_string(u) + ": \"" + msg + "\"");
      }
    }
    if (rep == 0)
      for (size_t i = 0; i < w.casts.size(); ++i) {
        CastInstance& c = *w.casts[i];
        const fusednorm_status st =
            fusednorm_cast(c.dsrc->dl(), c.ddst->dl(), nullptr, streams[i % streams.size()]);
        if (st != FUSEDNORM_SUCCESS && st != FUSEDNORM_UNSUPPORTED)
          r.fail(me + "cast returned " + fusednorm_status_string(st) + ": " + fusednorm_last_error());
        if (st == FUSEDNORM_UNSUPPORTED) c.expected->storage().assign(c.expected->storage().size(), 0xA5);
      }
  }
  for (cudaStream_t s : streams)
    if ((e = cudaStreamSynchronize(s)) != cudaSuccess) r.fail(me + "cudaStreamSynchronize: " + cuda_text(e));

  for (auto& inst : w.rq) {
    if ((e = inst->download()) != cudaSuccess) {
      r.fail(me + "download: " + cuda_text(e));
      continue;
    }
    const std::string d = compare_outputs(*inst->host, *inst->expected);
    ++r.compared;
    if (!d.empty()) r.fail(me + inst->host->spec.describe() + ": " + d);
  }
  for (auto& c : w.casts) {
    if ((e = c->ddst->download()) != cudaSuccess) {
      r.fail(me + "cast download: " + cuda_text(e));
      continue;
    }
    ++r.compared;
    // Cast: equal to the CPU backend; UNSUPPORTED: dst untouched (all poison).
    if (c->dst->storage() != c->expected->storage()) r.fail(me + "cast dst differs from the CPU backend's");
  }
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
}

TEST_CASE("gpu concurrency: many host threads x many streams equal the CPU backend", "[gpu][concurrency]") {
  if (!gpu_available()) return;
  std::mt19937_64 rng(77);

  // Inputs, expected bytes (CPU backend) and device buffers, before any GPU call.
  std::vector<std::unique_ptr<CaseTensors>> bases, cpus;
  std::vector<ThreadWork> work(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kJobsPerThread; ++k) {
      const CaseSpec s = thread_spec(t, k);
      auto base = std::make_unique<CaseTensors>(s);
      base->fill_random(rng);
      auto cpu = base->clone_inputs();
      INFO(s.describe());
      REQUIRE(cpu->run_library() == FUSEDNORM_SUCCESS);
      for (int i = 0; i < kInstances; ++i) work[size_t(t)].rq.push_back(std::make_unique<RqInstance>(*base, *cpu));
      bases.push_back(std::move(base));
      cpus.push_back(std::move(cpu));
    }
    const std::vector<int64_t> cast_shape = t % 2 ? std::vector<int64_t>{3, 5, 96} : std::vector<int64_t>{256};
    work[size_t(t)].casts.push_back(
        std::make_unique<CastInstance>(kTestIns[size_t(t % 3)], kTestOuts[size_t(t % 6)], cast_shape, t % 2 ? 4 : 0, rng));
  }

  std::vector<ThreadResult> results(kThreads);
  run_threads_together(kThreads, results,
                       [&](int t, auto wait) { run_thread(t, work[size_t(t)], wait, results[size_t(t)]); });

  int64_t failures = 0, compared = 0, enqueued = 0;
  const std::string all = all_failures(results, &failures);
  for (const auto& r : results) {
    compared += r.compared;
    enqueued += r.enqueued;
  }
  printf("gpu concurrency: %d threads: %lld rmsnorm_quant calls enqueued, %lld outputs compared\n", kThreads,
         (long long)enqueued, (long long)compared);
  INFO(all);
  CHECK(failures == 0);
  CHECK(compared == int64_t(kThreads) * (kJobsPerThread * kInstances + 1));
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
