// Tensor-parallel QK-norm with NCCL (docs/tensor_parallel.md): each rank holds a slice of the
// attention heads of q and k (an uneven split by default) as views of its own fused QKV
// projection, and runs, on its own stream,
//     fusednorm_qk_rmsnorm_stats -> ncclAllReduce(sum) -> fusednorm_qk_rmsnorm_apply,
// captured into a CUDA graph and replayed. Every rank also computes the single-GPU fused result
// of the whole rows on its device and compares its slice with it: outputs byte-identical where
// the all-reduced sums equal the single-GPU sums bit for bit, else within one bf16 ulp (f32: the
// bound of docs/numerics.md §5). Exit status 0 when every rank passes.
//
// One process driving every GPU (ncclCommInitAll, then one thread per GPU):
//   fusednorm-qk-tp-nccl --gpus 4 [--q-split 5,13,9,5] [--k-split 2,1,4,1]
// One process per GPU (ncclCommInitRank; rank 0 writes the NCCL id to the file, the others wait
// for it):
//   fusednorm-qk-tp-nccl --nranks 4 --rank R --id-file /tmp/qk.id [--device D]
// Other options: --rows M (2048), --q-heads 32, --k-heads 8, --head-dim 128, --dtype bf16|f32,
// --iters N (graph replays timed, 100), --seed S. Without a CUDA device it prints FUSEDNORM_SKIP.
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fusednorm/fusednorm.h"

namespace {

#define CHECK_CUDA(x) check_cuda((x), #x, __LINE__)
#define CHECK_NCCL(x) check_nccl((x), #x, __LINE__)
#define CHECK_FN(x) check_fn((x), #x, __LINE__)

void check_cuda(cudaError_t e, const char* what, int line) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "line %d: %s: %s\n", line, what, cudaGetErrorString(e));
  exit(2);
}
void check_nccl(ncclResult_t r, const char* what, int line) {
  if (r == ncclSuccess) return;
  fprintf(stderr, "line %d: %s: %s\n", line, what, ncclGetErrorString(r));
  exit(2);
}
void check_fn(fusednorm_status s, const char* what, int line) {
  if (s == FUSEDNORM_SUCCESS) return;
  fprintf(stderr, "line %d: %s: %s: %s\n", line, what, fusednorm_status_string(s), fusednorm_last_error());
  exit(2);
}

struct Options {
  int64_t rows = 2048, q_heads = 32, k_heads = 8, head_dim = 128;
  bool f32 = false;
  int gpus = 1;          // single process: ranks = GPUs 0 .. gpus-1
  int nranks = 0;        // one process per GPU: ranks in all
  int rank = -1, device = -1;
  std::string id_file;
  std::vector<int64_t> q_split, k_split;
  int iters = 100;
  uint64_t seed = 1;
};

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    v.push_back(strtoll(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    auto next = [&] { ++i; return v; };
    if (a == "--rows") o.rows = atoll(next());
    else if (a == "--q-heads") o.q_heads = atoll(next());
    else if (a == "--k-heads") o.k_heads = atoll(next());
    else if (a == "--head-dim") o.head_dim = atoll(next());
    else if (a == "--dtype") o.f32 = std::string(next()) == "f32";
    else if (a == "--gpus") o.gpus = atoi(next());
    else if (a == "--nranks") o.nranks = atoi(next());
    else if (a == "--rank") o.rank = atoi(next());
    else if (a == "--device") o.device = atoi(next());
    else if (a == "--id-file") o.id_file = next();
    else if (a == "--q-split") o.q_split = parse_list(next());
    else if (a == "--k-split") o.k_split = parse_list(next());
    else if (a == "--iters") o.iters = atoi(next());
    else if (a == "--seed") o.seed = strtoull(next(), nullptr, 10);
    else {
      fprintf(stderr, "unknown option %s (see the comment at the top of examples/nccl/qk_rmsnorm_tp.cc)\n", a.c_str());
      exit(2);
    }
  }
  return o;
}

// heads over R ranks, uneven: an even split, then one head moved from the last rank to the first
// where the last keeps at least one (R = 1: all).
std::vector<int64_t> uneven_split(int64_t heads, int R) {
  std::vector<int64_t> s(size_t(R), heads / R);
  for (int r = 0; r < heads % R; ++r) ++s[size_t(r)];
  if (R > 1 && s.back() > 1) {
    --s.back();
    ++s.front();
  }
  return s;
}

// The whole problem on the host, generated from the seed (the same on every rank): qkv [rows,
// (Hq + 2 Hk) D] and the weights, as bytes of the dtype (converted by fusednorm_cast on the CPU).
struct Problem {
  Options o;
  int64_t nq, nk, width;  // elements: q, k, a row of qkv
  int bytes;
  std::vector<char> qkv, qw, kw;
};

DLTensor host_tensor(void* data, DLDataType t, int64_t* shape, int ndim) {
  DLTensor d{};
  d.data = data;
  d.device = DLDevice{kDLCPU, 0};
  d.ndim = ndim;
  d.dtype = t;
  d.shape = shape;
  return d;
}

DLDataType dtype_of(bool f32) { return f32 ? DLDataType{kDLFloat, 32, 1} : DLDataType{kDLBfloat, 16, 1}; }

std::vector<char> to_dtype(const std::vector<float>& v, bool f32) {
  std::vector<char> out(v.size() * (f32 ? 4 : 2));
  int64_t n = int64_t(v.size());
  DLTensor src = host_tensor(const_cast<float*>(v.data()), DLDataType{kDLFloat, 32, 1}, &n, 1);
  DLTensor dst = host_tensor(out.data(), dtype_of(f32), &n, 1);
  CHECK_FN(fusednorm_cast(&src, &dst, nullptr, nullptr));
  return out;
}

Problem make_problem(const Options& o, uint64_t seed) {
  Problem p;
  p.o = o;
  p.nq = o.q_heads * o.head_dim;
  p.nk = o.k_heads * o.head_dim;
  p.width = p.nq + 2 * p.nk;
  p.bytes = o.f32 ? 4 : 2;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> x(-3.0f, 3.0f), w(0.5f, 1.5f);
  std::uniform_int_distribution<int> e(-3, 3);
  std::vector<float> qkv(size_t(o.rows * p.width)), qw(size_t(p.nq)), kw(size_t(p.nk));
  float scale = 1.0f;
  for (int64_t i = 0; i < o.rows * p.width; ++i) {
    if (i % o.head_dim == 0) scale = std::ldexp(1.0f, e(rng));  // heads of different magnitudes
    qkv[size_t(i)] = x(rng) * scale;
  }
  for (auto& v : qw) v = w(rng);
  for (auto& v : kw) v = w(rng);
  p.qkv = to_dtype(qkv, o.f32);
  p.qw = to_dtype(qw, o.f32);
  p.kw = to_dtype(kw, o.f32);
  return p;
}

// A device tensor [rows, cols] with a row stride of `ld` elements.
struct DevTensor {
  DLTensor dl{};
  int64_t shape[2] = {0, 0}, strides[2] = {0, 1};
  void set(void* data, int device, DLDataType t, int64_t rows, int64_t cols, int64_t ld) {
    shape[0] = rows;
    shape[1] = cols;
    strides[0] = ld;
    dl.data = data;
    dl.device = DLDevice{kDLCUDA, device};
    dl.ndim = rows < 0 ? 1 : 2;
    dl.dtype = t;
    dl.shape = rows < 0 ? shape + 1 : shape;
    dl.strides = rows < 0 ? strides + 1 : strides;
  }
};

struct Rank {
  int rank = 0, device = 0;
  int64_t q0 = 0, nq = 0, k0 = 0, nk = 0;  // this rank's columns of q and of k
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  char *qkv = nullptr, *qw = nullptr, *kw = nullptr, *q_out = nullptr, *k_out = nullptr;
  float* stats = nullptr;
  // The single-GPU reference on this device: whole rows.
  char *full_qkv = nullptr, *full_qw = nullptr, *full_kw = nullptr, *full_q = nullptr, *full_k = nullptr;
  float* full_stats = nullptr;
  DevTensor q, k, wq, wk, oq, ok, st, fq, fk, fwq, fwk, foq, fok, fst;
  cudaGraphExec_t graph = nullptr;
};

char* dev_alloc(size_t n) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(n, 1)));
  return static_cast<char*>(p);
}

// Allocates the rank's buffers on its device and builds its views.
void setup(Rank& r, const Problem& p) {
  CHECK_CUDA(cudaSetDevice(r.device));
  CHECK_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  const int64_t M = p.o.rows, B = p.bytes, w = r.nq + 2 * r.nk;  // the rank's QKV row: its q, k, v heads
  const DLDataType t = dtype_of(p.o.f32);
  r.qkv = dev_alloc(size_t(M * w * B));
  r.qw = dev_alloc(size_t(r.nq * B));
  r.kw = dev_alloc(size_t(r.nk * B));
  r.q_out = dev_alloc(size_t(M * r.nq * B));
  r.k_out = dev_alloc(size_t(M * r.nk * B));
  r.stats = reinterpret_cast<float*>(dev_alloc(size_t(M * 2 * 4)));
  r.full_qkv = dev_alloc(size_t(M * p.width * B));
  r.full_qw = dev_alloc(size_t(p.nq * B));
  r.full_kw = dev_alloc(size_t(p.nk * B));
  r.full_q = dev_alloc(size_t(M * p.nq * B));
  r.full_k = dev_alloc(size_t(M * p.nk * B));
  r.full_stats = reinterpret_cast<float*>(dev_alloc(size_t(M * 2 * 4)));
  const DLDataType f32{kDLFloat, 32, 1};
  r.q.set(r.qkv, r.device, t, M, r.nq, w);
  r.k.set(r.qkv + r.nq * B, r.device, t, M, r.nk, w);
  r.wq.set(r.qw, r.device, t, -1, r.nq, 1);
  r.wk.set(r.kw, r.device, t, -1, r.nk, 1);
  r.oq.set(r.q_out, r.device, t, M, r.nq, r.nq);
  r.ok.set(r.k_out, r.device, t, M, r.nk, r.nk);
  r.st.set(r.stats, r.device, f32, M, 2, 2);
  r.fq.set(r.full_qkv, r.device, t, M, p.nq, p.width);
  r.fk.set(r.full_qkv + p.nq * B, r.device, t, M, p.nk, p.width);
  r.fwq.set(r.full_qw, r.device, t, -1, p.nq, 1);
  r.fwk.set(r.full_kw, r.device, t, -1, p.nk, 1);
  r.foq.set(r.full_q, r.device, t, M, p.nq, p.nq);
  r.fok.set(r.full_k, r.device, t, M, p.nk, p.nk);
  r.fst.set(r.full_stats, r.device, f32, M, 2, 2);
}

// Copies the problem's data to the rank (its slice of q, k, v heads and weights; the whole rows
// for the reference) and computes the single-GPU reference (fused, and the sums of squares).
void upload(Rank& r, const Problem& p) {
  CHECK_CUDA(cudaSetDevice(r.device));
  const int64_t M = p.o.rows, B = p.bytes, w = r.nq + 2 * r.nk;
  std::vector<char> mine(size_t(M * w * B));
  for (int64_t m = 0; m < M; ++m) {
    const char* row = p.qkv.data() + m * p.width * B;
    char* dst = mine.data() + m * w * B;
    memcpy(dst, row + r.q0 * B, size_t(r.nq * B));                               // q heads
    memcpy(dst + r.nq * B, row + (p.nq + r.k0) * B, size_t(r.nk * B));            // k heads
    memcpy(dst + (r.nq + r.nk) * B, row + (p.nq + p.nk + r.k0) * B, size_t(r.nk * B));  // v heads
  }
  CHECK_CUDA(cudaMemcpyAsync(r.qkv, mine.data(), mine.size(), cudaMemcpyHostToDevice, r.stream));
  CHECK_CUDA(cudaMemcpyAsync(r.qw, p.qw.data() + r.q0 * B, size_t(r.nq * B), cudaMemcpyHostToDevice, r.stream));
  CHECK_CUDA(cudaMemcpyAsync(r.kw, p.kw.data() + r.k0 * B, size_t(r.nk * B), cudaMemcpyHostToDevice, r.stream));
  CHECK_CUDA(cudaMemcpyAsync(r.full_qkv, p.qkv.data(), p.qkv.size(), cudaMemcpyHostToDevice, r.stream));
  CHECK_CUDA(cudaMemcpyAsync(r.full_qw, p.qw.data(), p.qw.size(), cudaMemcpyHostToDevice, r.stream));
  CHECK_CUDA(cudaMemcpyAsync(r.full_kw, p.kw.data(), p.kw.size(), cudaMemcpyHostToDevice, r.stream));
  CHECK_FN(fusednorm_qk_rmsnorm(&r.fq.dl, &r.fk.dl, &r.fwq.dl, &r.fwk.dl, &r.foq.dl, &r.fok.dl, nullptr, nullptr,
                                r.stream));
  CHECK_FN(fusednorm_qk_rmsnorm_stats(&r.fq.dl, &r.fk.dl, &r.fst.dl, nullptr, r.stream));
  CHECK_CUDA(cudaStreamSynchronize(r.stream));
}

// The tensor-parallel step of one rank, on its stream: stats, the all-reduce of the sums, apply.
void enqueue_tp(Rank& r, const Problem& p) {
  fusednorm_qk_rmsnorm_options o;
  fusednorm_qk_rmsnorm_options_init(&o);
  o.stats_kind = FUSEDNORM_QK_STATS_SUMS;
  o.q_global_width = p.nq;
  o.k_global_width = p.nk;
  CHECK_FN(fusednorm_qk_rmsnorm_stats(&r.q.dl, &r.k.dl, &r.st.dl, nullptr, r.stream));
  CHECK_NCCL(ncclAllReduce(r.stats, r.stats, size_t(p.o.rows * 2), ncclFloat, ncclSum, r.comm, r.stream));
  CHECK_FN(fusednorm_qk_rmsnorm_apply(&r.q.dl, &r.k.dl, &r.st.dl, &r.wq.dl, &r.wk.dl, &r.oq.dl, &r.ok.dl, nullptr, &o,
                                       r.stream));
}

// Value of element i of a row of the dtype, and its ordinal (monotonic in value; -0 == +0).
double value_of(const char* row, int64_t i, bool f32) {
  uint32_t u = 0;
  if (f32) memcpy(&u, row + 4 * i, 4);
  else { uint16_t h; memcpy(&h, row + 2 * i, 2); u = uint32_t(h) << 16; }
  float f;
  memcpy(&f, &u, 4);
  return f;
}
int64_t ordinal_of(const char* row, int64_t i, bool f32) {
  // Sign-magnitude codes as integers: adjacent values of the dtype are one apart.
  if (f32) {
    uint32_t u = 0;
    memcpy(&u, row + 4 * i, 4);
    const int64_t mag = int64_t(u & 0x7FFFFFFFu);
    return u & 0x80000000u ? -mag : mag;
  }
  uint16_t h = 0;
  memcpy(&h, row + 2 * i, 2);
  const int64_t mag = int64_t(h & 0x7FFFu);
  return h & 0x8000u ? -mag : mag;
}

// Compares the rank's outputs with its slice of the single-GPU result (see the top comment).
bool verify(Rank& r, const Problem& p, const char* when) {
  CHECK_CUDA(cudaSetDevice(r.device));
  const int64_t M = p.o.rows, B = p.bytes;
  std::vector<float> st(size_t(M * 2)), fst(size_t(M * 2));
  std::vector<char> oq(size_t(M * r.nq * B)), ok(size_t(M * r.nk * B)), fq(size_t(M * p.nq * B)),
      fk(size_t(M * p.nk * B));
  CHECK_CUDA(cudaMemcpy(st.data(), r.stats, st.size() * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(fst.data(), r.full_stats, fst.size() * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(oq.data(), r.q_out, oq.size(), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(ok.data(), r.k_out, ok.size(), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(fq.data(), r.full_q, fq.size(), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(fk.data(), r.full_k, fk.size(), cudaMemcpyDeviceToHost));
  int64_t same = 0, broken = 0, beyond = 0, max_dist = 0;
  double max_rel = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int j = 0; j < 2; ++j) {
      const bool identical = memcmp(&st[size_t(m * 2 + j)], &fst[size_t(m * 2 + j)], 4) == 0;
      same += identical;
      const int64_t n = j ? r.nk : r.nq, full_n = j ? p.nk : p.nq, c0 = j ? r.k0 : r.q0;
      const char* mine = (j ? ok : oq).data() + m * n * B;
      const char* ref = (j ? fk : fq).data() + (m * full_n + c0) * B;
      if (identical && memcmp(mine, ref, size_t(n * B)) != 0) ++broken;
      const double delta = std::fabs(double(st[size_t(m * 2 + j)]) - fst[size_t(m * 2 + j)]) / fst[size_t(m * 2 + j)];
      for (int64_t i = 0; i < n; ++i) {
        const double y1 = value_of(ref, i, p.o.f32), y2 = value_of(mine, i, p.o.f32);
        const int64_t dist = std::llabs(ordinal_of(ref, i, p.o.f32) - ordinal_of(mine, i, p.o.f32));
        max_dist = std::max(max_dist, dist);
        if (y1 != 0) max_rel = std::max(max_rel, std::fabs(y2 - y1) / std::fabs(y1));
        const bool ok_elem = p.o.f32 ? std::fabs(y2 - y1) <= std::fabs(y1) * (delta / 2 + 16 * std::ldexp(1.0, -24)) +
                                                                 std::ldexp(1.0, -148)
                                     : dist <= 1;
        beyond += !ok_elem;
      }
    }
  const bool pass = broken == 0 && beyond == 0;
  printf("rank %d (device %d, %s): q heads [%lld, %lld), k heads [%lld, %lld): sums bit-identical to the single-GPU "
         "sums in %lld of %lld (row, side); rows with identical sums but other bytes: %lld; elements beyond %s: %lld; "
         "largest code distance %lld, relative difference %.3g: %s\n",
         r.rank, r.device, when, (long long)(r.q0 / p.o.head_dim), (long long)((r.q0 + r.nq) / p.o.head_dim),
         (long long)(r.k0 / p.o.head_dim), (long long)((r.k0 + r.nk) / p.o.head_dim), (long long)same,
         (long long)(2 * M), (long long)broken, p.o.f32 ? "the f32 bound" : "one ulp", (long long)beyond,
         (long long)max_dist, max_rel, pass ? "PASS" : "FAIL");
  return pass;
}


// Captures what `enqueue` puts on the stream (thread-local capture mode) into a graph.
template <class F>
cudaGraphExec_t capture(cudaStream_t stream, F enqueue) {
  cudaGraph_t g;
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CHECK_CUDA(cudaStreamEndCapture(stream, &g));
  CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
  CHECK_CUDA(cudaGraphDestroy(g));
  return exec;
}

// Microseconds per replay of the graph over `iters` replays after one warm-up, timed with events.
double time_graph(cudaGraphExec_t graph, cudaStream_t stream, int iters) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaGraphLaunch(graph, stream));  // warm-up
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int it = 0; it < iters; ++it) CHECK_CUDA(cudaGraphLaunch(graph, stream));
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / std::max(iters, 1);
}

// Everything one rank does, on the calling thread (one thread per GPU: NCCL's multi-thread mode,
// which graph capture of NCCL calls wants; capture mode thread-local): the reference, the eager
// step, the captured graph replayed and timed, new inputs. True when every check passed.
bool run_rank(Rank& r, const Options& o) {
  CHECK_CUDA(cudaSetDevice(r.device));
  Problem p = make_problem(o, o.seed);
  setup(r, p);
  upload(r, p);
  enqueue_tp(r, p);  // eager
  CHECK_CUDA(cudaStreamSynchronize(r.stream));
  bool pass = verify(r, p, "eager");

  r.graph = capture(r.stream, [&] { enqueue_tp(r, p); });
  printf("rank %d: graph of stats -> all-reduce -> apply: %.2f us per replay (%d replays)\n", r.rank,
         time_graph(r.graph, r.stream, o.iters), o.iters);
  if (r.rank == 0) {
    // The comparison: the single-GPU fused call on the whole rows (every head) on this device.
    cudaGraphExec_t fused = capture(r.stream, [&] {
      CHECK_FN(fusednorm_qk_rmsnorm(&r.fq.dl, &r.fk.dl, &r.fwq.dl, &r.fwk.dl, &r.foq.dl, &r.fok.dl, nullptr, nullptr,
                                    r.stream));
    });
    printf("rank 0: graph of the single-GPU fused call (all heads): %.2f us per replay (%d replays)\n",
           time_graph(fused, r.stream, o.iters), o.iters);
    cudaGraphExecDestroy(fused);
  }
  pass = verify(r, p, "graph replays") && pass;

  // New activations into the same buffers: the captured graph computes them.
  p = make_problem(o, o.seed + 1);
  upload(r, p);
  CHECK_CUDA(cudaGraphLaunch(r.graph, r.stream));
  CHECK_CUDA(cudaStreamSynchronize(r.stream));
  pass = verify(r, p, "graph replay, new inputs") && pass;

  cudaGraphExecDestroy(r.graph);
  ncclCommDestroy(r.comm);
  for (void* b : {static_cast<void*>(r.qkv), static_cast<void*>(r.qw), static_cast<void*>(r.kw),
                  static_cast<void*>(r.q_out), static_cast<void*>(r.k_out), static_cast<void*>(r.stats),
                  static_cast<void*>(r.full_qkv), static_cast<void*>(r.full_qw), static_cast<void*>(r.full_kw),
                  static_cast<void*>(r.full_q), static_cast<void*>(r.full_k), static_cast<void*>(r.full_stats)})
    cudaFree(b);
  cudaStreamDestroy(r.stream);
  return pass;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("FUSEDNORM_SKIP: no CUDA device\n");
    return 0;
  }
  const bool per_process = o.nranks > 0;
  const int R = per_process ? o.nranks : o.gpus;
  if (!per_process && R > count) {
    printf("FUSEDNORM_SKIP: --gpus %d but %d CUDA device(s)\n", R, count);
    return 0;
  }
  if (o.q_split.empty()) o.q_split = uneven_split(o.q_heads, R);
  if (o.k_split.empty()) o.k_split = uneven_split(o.k_heads, R);
  int64_t sq = 0, sk = 0;
  for (auto v : o.q_split) sq += v;
  for (auto v : o.k_split) sk += v;
  if (int(o.q_split.size()) != R || int(o.k_split.size()) != R || sq != o.q_heads || sk != o.k_heads) {
    fprintf(stderr, "--q-split / --k-split: %d entries each, summing to --q-heads %lld / --k-heads %lld\n", R,
            (long long)o.q_heads, (long long)o.k_heads);
    return 2;
  }
  // This process's ranks.
  std::vector<Rank> ranks;
  int64_t q0 = 0, k0 = 0;
  for (int r = 0; r < R; ++r) {
    Rank rk;
    rk.rank = r;
    rk.q0 = q0;
    rk.k0 = k0;
    rk.nq = o.q_split[size_t(r)] * o.head_dim;
    rk.nk = o.k_split[size_t(r)] * o.head_dim;
    q0 += rk.nq;
    k0 += rk.nk;
    if (per_process && r != o.rank) continue;
    rk.device = per_process ? (o.device >= 0 ? o.device : r % count) : r;
    ranks.push_back(rk);
  }
  if (ranks.empty()) {
    fprintf(stderr, "--rank must be in [0, %d)\n", R);
    return 2;
  }
  if (per_process) {
    ncclUniqueId id;
    if (o.id_file.empty()) {
      fprintf(stderr, "--nranks needs --id-file (rank 0 writes the NCCL id there)\n");
      return 2;
    }
    if (o.rank == 0) {
      CHECK_NCCL(ncclGetUniqueId(&id));
      const std::string tmp = o.id_file + ".tmp";
      FILE* f = fopen(tmp.c_str(), "wb");
      if (f == nullptr || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp.c_str(), o.id_file.c_str()))
        return fprintf(stderr, "cannot write %s\n", o.id_file.c_str()), 2;
    } else {
      FILE* f = nullptr;
      for (int waited = 0; (f = fopen(o.id_file.c_str(), "rb")) == nullptr && waited < 600; ++waited)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (f == nullptr || fread(&id, sizeof id, 1, f) != 1) return fprintf(stderr, "no NCCL id in %s\n", o.id_file.c_str()), 2;
      fclose(f);
    }
    CHECK_CUDA(cudaSetDevice(ranks[0].device));
    CHECK_NCCL(ncclCommInitRank(&ranks[0].comm, R, id, o.rank));
  } else {
    std::vector<ncclComm_t> comms(static_cast<size_t>(R));
    std::vector<int> devs(static_cast<size_t>(R));
    for (int r = 0; r < R; ++r) devs[size_t(r)] = r;
    CHECK_NCCL(ncclCommInitAll(comms.data(), R, devs.data()));
    for (int r = 0; r < R; ++r) ranks[size_t(r)].comm = comms[size_t(r)];
  }
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  printf("qk_rmsnorm TP: %d rank(s), %s, rows %lld, q %lld heads, k %lld heads, head_dim %lld, %s, NCCL %d\n", R,
         per_process ? "one process per GPU" : "one process for all GPUs", (long long)o.rows, (long long)o.q_heads,
         (long long)o.k_heads, (long long)o.head_dim, o.f32 ? "f32" : "bf16", nccl_version);

  // One thread per rank of this process (NCCL's multi-thread mode: each thread its GPU).
  std::vector<int> ok(ranks.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) threads.emplace_back([&, i] { ok[i] = run_rank(ranks[i], o); });
  for (auto& t : threads) t.join();
  const bool pass = std::all_of(ok.begin(), ok.end(), [](int v) { return v != 0; });
  printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
