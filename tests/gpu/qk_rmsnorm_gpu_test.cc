// qk_rmsnorm on a GPU (kDLCUDA) through the public API, byte for byte against the CPU backend on
// the same inputs: stats, apply and fused for Modular's shapes, the per-head shapes, odd widths,
// strided, misaligned and in-place views, rank 3, special values; batch invariance (the same rows
// at batch 1 ... 16384); CUDA-graph capture of stats -> apply and of the fused form, replayed with
// new inputs. Without a GPU every case prints FUSEDNORM_SKIP (ctest reports it as skipped).
#include <cuda_runtime.h>
#include <math.h>

#include <array>

#include <catch2/catch.hpp>

#include "common/device_mirror.h"
#include "common/qk_case.h"

namespace fusednorm {
namespace test {
namespace {

#define CUDA_OK(expr) REQUIRE((expr) == cudaSuccess)

constexpr QkKind kKinds[] = {QkKind::kStats, QkKind::kApply, QkKind::kFused};
const char* kind_name(QkKind k) { return k == QkKind::kStats ? "stats" : k == QkKind::kApply ? "apply" : "fused"; }

// A qk case's tensors mirrored on the GPU (in place: the outputs are q's and k's mirrors).
struct QkDevice {
  QkTensors& host;
  std::unique_ptr<DeviceMirror> q, k, qw, kw, qo, ko, stats, scales;
  explicit QkDevice(QkTensors& h) : host(h) {
    q = std::make_unique<DeviceMirror>(*h.q);
    k = std::make_unique<DeviceMirror>(*h.k);
    qw = std::make_unique<DeviceMirror>(*h.qw);
    kw = std::make_unique<DeviceMirror>(*h.kw);
    if (h.qo) qo = std::make_unique<DeviceMirror>(*h.qo);
    if (h.ko) ko = std::make_unique<DeviceMirror>(*h.ko);
    stats = std::make_unique<DeviceMirror>(*h.stats);
    if (h.scales) scales = std::make_unique<DeviceMirror>(*h.scales);
  }
  cudaError_t error() const {
    for (const auto* m : {&q, &k, &qw, &kw, &qo, &ko, &stats, &scales})
      if (*m && (*m)->error() != cudaSuccess) return (*m)->error();
    return cudaSuccess;
  }
  DLTensor* q_out() { return qo ? qo->dl() : q->dl(); }
  DLTensor* k_out() { return ko ? ko->dl() : k->dl(); }
  DLTensor* out_scales() { return scales ? scales->dl() : nullptr; }
  fusednorm_status enqueue(QkKind kind, cudaStream_t stream = nullptr) {
    const fusednorm_qk_rmsnorm_options o = host.spec.options();
    switch (kind) {
      case QkKind::kStats: return fusednorm_qk_rmsnorm_stats(q->dl(), k->dl(), stats->dl(), &o, stream);
      case QkKind::kApply:
        return fusednorm_qk_rmsnorm_apply(q->dl(), k->dl(), stats->dl(), qw->dl(), kw->dl(), q_out(), k_out(),
                                          out_scales(), &o, stream);
      default:
        return fusednorm_qk_rmsnorm(q->dl(), k->dl(), qw->dl(), kw->dl(), q_out(), k_out(), out_scales(), &o, stream);
    }
  }
  cudaError_t upload_inputs() {
    cudaError_t e = q->upload();
    if (e == cudaSuccess) e = k->upload();
    if (e == cudaSuccess) e = stats->upload();
    return e;
  }
  cudaError_t download() {
    cudaError_t e = cudaSuccess;
    for (auto* m : {&q, &k, &qo, &ko, &stats})
      if (*m && e == cudaSuccess) e = (*m)->download();
    return e;
  }
};

// `kind` on the CPU backend and on the GPU from the same inputs; every allocation compared.
void check_gpu(QkTensors& base, QkKind kind) {
  INFO(base.spec.describe() << " kind=" << kind_name(kind));
  auto cpu = base.clone();
  REQUIRE(cpu->run(kind) == FUSEDNORM_SUCCESS);
  auto gpu_host = base.clone();
  QkDevice gpu(*gpu_host);
  CUDA_OK(gpu.error());
  const fusednorm_status st = gpu.enqueue(kind);
  INFO(fusednorm_last_error());
  REQUIRE(st == FUSEDNORM_SUCCESS);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(gpu.download());
  REQUIRE(gpu_host->compare(*cpu) == "");
}

void check_all(const QkSpec& s, std::mt19937_64& rng) {
  QkTensors t(s);
  t.fill_random(rng);
  t.fill_stats();
  for (QkKind kind : kKinds)
    if (kind == QkKind::kFused || s.head_dim == 0) check_gpu(t, kind);
}

TEST_CASE("gpu qk_rmsnorm: Modular's shapes, stats/apply/fused, f32/f16/bf16", "[gpu][qk_rmsnorm]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(19);
  for (DType in : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const auto& sh : kModularQkShapes) check_all(QkSpec::of({sh[0]}, sh[1], sh[2], 0, in), rng);
    check_all(QkSpec::of({3}, 16384, 32768, 0, in), rng);  // 8 steps of 4096: re-read past the registers'
  }
}

TEST_CASE("gpu qk_rmsnorm: per-head mode (q 32 heads, k 8 heads, head_dim 64, 128, 256)", "[gpu][qk_rmsnorm]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(20);
  for (int64_t d : {64, 128, 256})
    for (DType in : {DType::kF32, DType::kBF16, DType::kF16})
      for (DType w : {DType::kF32, in}) {
        QkSpec s = QkSpec::of({37}, 32 * d, 8 * d, d, in, w);
        s.weight_offset = w == DType::kF32 ? 0.0f : 1.0f;
        check_all(s, rng);
      }
}

TEST_CASE("gpu qk_rmsnorm: odd widths and heads, strided and misaligned views, rank 3, in place",
          "[gpu][qk_rmsnorm]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(21);
  for (const auto& w : kOddQkWidths)
    for (int variant = 0; variant < 4; ++variant) {
      QkSpec s = layout_qk_spec(w[0], w[1], variant);
      check_all(s, rng);
      if (w[2] != 0) {
        s.head_dim = w[2];
        check_all(s, rng);
      }
    }
}

TEST_CASE("gpu qk_rmsnorm: FP8 outputs (f8e4m3fn, f8e4m3fnuz) with static scales", "[gpu][qk_rmsnorm]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(28);
  for (DType out : {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz})
    for (DType in : {DType::kF32, DType::kBF16, DType::kF16})
      for (const auto& w : {std::array<int64_t, 3>{4096, 512, 128}, std::array<int64_t, 3>{1536, 257, 0},
                            std::array<int64_t, 3>{17, 34, 0}})
        for (int layout = 0; layout < 2; ++layout) {
          QkSpec s = QkSpec::of({37}, w[0], w[1], 0, in);
          s.out = out;
          s.q_scale = 0.02f;
          s.k_scale = 0.01f;  // some codes saturate
          s.row_pad = layout ? 3 : 0;
          s.misalign = layout ? 1 : 0;  // the scales misaligned too
          check_all(s, rng);
          if (w[2]) {
            s.head_dim = w[2];
            check_all(s, rng);
          }
        }
}

// Multipliers 1 / s of 2^127 (q: the encoders' prescale cannot be folded into it, encode.cuh
// prescale_rcp) and just below (k: folded), with f32 weights below 600 * 2^-128 so that y * r
// spans the codes, saturation included.
TEST_CASE("gpu qk_rmsnorm: FP8 multipliers at and below 2^127", "[gpu][qk_rmsnorm]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(127);
  std::uniform_real_distribution<float> u(-600.0f, 600.0f);
  for (DType out : {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz}) {
    QkSpec s = QkSpec::of({9}, 4096, 512, 0, DType::kBF16, DType::kF32);
    s.out = out;
    s.q_scale = 0x1p-127f;
    s.k_scale = 0x1.8p-127f;
    QkTensors t(s);
    t.fill_random(rng);
    t.fill_stats();
    for (HostTensor* w : {t.qw.get(), t.kw.get()})
      for (int64_t i = 0; i < w->cols(); ++i) w->set(0, i, i % 61 == 0 ? 0.0f : u(rng) * 0x1p-128f);
    for (QkKind kind : kKinds)
      if (kind != QkKind::kStats) check_gpu(t, kind);
  }
}

TEST_CASE("gpu qk_rmsnorm: special values", "[gpu][qk_rmsnorm]") {
  if (!cuda_backend_available()) return;
  for (DType in : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t head : {int64_t(0), int64_t(16)}) {
      QkTensors t(special_qk_spec(in, head));
      fill_special_qk(t);
      for (QkKind kind : kKinds)
        if (kind == QkKind::kFused || head == 0) check_gpu(t, kind);
    }
}

// The same rows give the same bytes whatever the batch (and so the grid) around them.
TEST_CASE("gpu qk_rmsnorm: the same rows give the same bytes at batch 1, 7, 128, 4096, 16384",
          "[gpu][qk_rmsnorm]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(24);
  for (int64_t head : {int64_t(0), int64_t(128)}) {
    const QkSpec big = QkSpec::of({16384}, 4096, 512, head);
    QkTensors all(big);
    all.fill_random(rng);
    QkDevice dall(all);
    CUDA_OK(dall.error());
    REQUIRE(dall.enqueue(QkKind::kFused) == FUSEDNORM_SUCCESS);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(dall.download());
    for (int64_t batch : {1, 7, 128, 4096}) {
      QkSpec s = big;
      s.lead = {batch};
      QkTensors part(s);
      const int64_t first = (batch * 7919) % (16384 - batch + 1);  // rows [first, first + batch)
      for (int64_t r = 0; r < batch; ++r) {
        memcpy(part.q->row(r), all.q->row(first + r), size_t(s.nq * 2));
        memcpy(part.k->row(r), all.k->row(first + r), size_t(s.nk * 2));
      }
      part.qw->copy_from(*all.qw);
      part.kw->copy_from(*all.kw);
      QkDevice dpart(part);
      CUDA_OK(dpart.error());
      REQUIRE(dpart.enqueue(QkKind::kFused) == FUSEDNORM_SUCCESS);
      CUDA_OK(cudaDeviceSynchronize());
      CUDA_OK(dpart.download());
      INFO("head_dim " << head << " batch " << batch << " rows from " << first);
      for (int64_t r = 0; r < batch; ++r) {
        REQUIRE(memcmp(part.qo->row(r), all.qo->row(first + r), size_t(s.nq * 2)) == 0);
        REQUIRE(memcmp(part.ko->row(r), all.ko->row(first + r), size_t(s.nk * 2)) == 0);
      }
    }
  }
}

// stats -> apply (the TP recipe with R = 1: the all-reduce of one rank is the identity) and the
// fused form captured once in a CUDA graph, replayed with new q and k; each replay equals the CPU
// backend, and stats -> apply equals fused.
TEST_CASE("gpu qk_rmsnorm: CUDA graph capture and replay with new inputs", "[gpu][qk_rmsnorm][graph]") {
  if (!cuda_backend_available()) return;
  std::mt19937_64 rng(26);
  for (int64_t rows : {16, 2048}) {
    const QkSpec s = QkSpec::of({rows}, 4096, 512);
    QkTensors split(s), fused(s);
    split.fill_random(rng);
    fused.q->copy_from(*split.q);
    fused.k->copy_from(*split.k);
    fused.qw->copy_from(*split.qw);
    fused.kw->copy_from(*split.kw);
    QkDevice dsplit(split), dfused(fused);
    CUDA_OK(dsplit.error());
    CUDA_OK(dfused.error());
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const fusednorm_status s1 = dsplit.enqueue(QkKind::kStats, stream);
    const fusednorm_status s2 = dsplit.enqueue(QkKind::kApply, stream);
    const fusednorm_status s3 = dfused.enqueue(QkKind::kFused, stream);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    INFO(fusednorm_last_error());
    REQUIRE(s1 == FUSEDNORM_SUCCESS);
    REQUIRE(s2 == FUSEDNORM_SUCCESS);
    REQUIRE(s3 == FUSEDNORM_SUCCESS);
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 3; ++replay) {
      split.fill_random(rng);  // new activations and weights: the graph reads them at each replay
      for (auto [to, from] : {std::pair{fused.q.get(), split.q.get()}, {fused.k.get(), split.k.get()},
                              {fused.qw.get(), split.qw.get()}, {fused.kw.get(), split.kw.get()}})
        to->copy_from(*from);
      for (QkDevice* d : {&dsplit, &dfused}) {
        CUDA_OK(d->upload_inputs());
        CUDA_OK(d->qw->upload());
        CUDA_OK(d->kw->upload());
      }
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      CUDA_OK(dsplit.download());
      CUDA_OK(dfused.download());
      INFO("rows " << rows << " replay " << replay);
      auto cpu = split.clone();
      REQUIRE(cpu->run(QkKind::kStats) == FUSEDNORM_SUCCESS);
      REQUIRE(cpu->run(QkKind::kApply) == FUSEDNORM_SUCCESS);
      REQUIRE(split.compare(*cpu) == "");
      auto cpu_fused = fused.clone();
      REQUIRE(cpu_fused->run(QkKind::kFused) == FUSEDNORM_SUCCESS);
      REQUIRE(fused.compare(*cpu_fused) == "");
      // R = 1: stats -> apply is the fused form, byte for byte.
      REQUIRE(memcmp(fused.qo->data_begin(), split.qo->data_begin(), fused.qo->data_bytes()) == 0);
      REQUIRE(memcmp(fused.ko->data_begin(), split.ko->data_begin(), fused.ko->data_bytes()) == 0);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
