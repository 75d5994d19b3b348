// Many threads calling every operation at once (CPU backend): 12 threads (more than the cores),
// each with its own mix of fusednorm_cast and fusednorm_rmsnorm_quant calls (every scale mode,
// residual on and off, packed scales, f32/f16/bf16 inputs, FP8 and int8 outputs, every scale
// dtype, rank 1 to rank 3 shapes, strided and misaligned rows), released together by a start
// latch and looping. Several threads read the same input tensors at once; each writes only its
// own outputs. Every successful call's bytes (guards included) equal the scalar reference's,
// computed single-threaded before the threads start.
//
// Between the valid calls each thread makes invalid calls whose messages carry its own index
// (options->eps = -(t+1), options->group_size = 1000+t, a cast dst shape [2000+t, ...]), and
// checks that fusednorm_last_error() on this thread holds its own message right after the call
// and, unchanged, after later successful calls — never another thread's.
//
// Catch2's assertions are not thread-safe: each thread collects its failures as strings; the
// main thread asserts after joining. FUSEDNORM_CONCURRENCY_ITERS sets the iterations (default 16);
// FUSEDNORM_CONCURRENCY_TBB_THREADS oneTBB's parallelism (see tbb_threads() for ThreadSanitizer).
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <tbb/global_control.h>

#include "common/rmsnorm_case.h"
#include "common/test_tensor.h"
#include "common/threads.h"
#include "fusednorm/fusednorm.h"
#include "reference/reference.h"

namespace fusednorm {
namespace test {
namespace {

constexpr int kThreads = 12;

int iterations() {
  const char* s = getenv("FUSEDNORM_CONCURRENCY_ITERS");
  const int n = s ? atoi(s) : 0;
  return n > 0 ? n : 16;
}

#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#else
constexpr bool kTsan = false;
#endif

// oneTBB's parallelism for the run: FUSEDNORM_CONCURRENCY_TBB_THREADS=N caps it at N; 0 leaves
// oneTBB's default. Unset: the default, except under ThreadSanitizer, where it is 1. Debian's
// libtbb is not instrumented, so TSan cannot see the synchronization of a task handed to a
// worker thread and reports every access of a worker to the call's data; with no workers each
// calling thread runs its own call's tasks and every access of fusednorm's code (kernels
// included) is checked against the other calling threads, with no suppression. To run with
// workers under TSan, set it to 0 and use tests/sanitizers/tsan.supp (which then hides
// everything that runs inside a oneTBB task).
int tbb_threads() {
  const char* s = getenv("FUSEDNORM_CONCURRENCY_TBB_THREADS");
  if (s && *s) return atoi(s);
  return kTsan ? 1 : 0;
}

// ---------------------------------------------------------------- the calls

// An rmsnorm_quant case: inputs (read by several threads at once) and the reference's result.
struct RqJob {
  std::unique_ptr<CaseTensors> pristine, expected;
};

// A cast case: src (shared, read-only) and the reference's dst.
struct CastJob {
  DType src_type, dst_type;
  std::vector<int64_t> shape;
  int64_t row_pad;
  int misalign;
  fusednorm_cast_options options;
  std::unique_ptr<HostTensor> src, expected;
  std::string describe() const {
    std::ostringstream s;
    s << "cast " << dtype_name(src_type) << "->" << dtype_name(dst_type) << " shape=[";
    for (auto d : shape) s << d << ",";
    s << "] pad=" << row_pad << " misalign=" << misalign << " e8m0_up=" << options.e8m0_rounding;
    return s.str();
  }
};

// The rmsnorm_quant cases: every scale mode and placement with and without residual, every input
// dtype, the four main output formats, every scale dtype, rank 1, 2 and 3 (strided) shapes.
std::vector<CaseSpec> rq_specs() {
  const DType ins[] = {DType::kF32, DType::kF16, DType::kBF16};
  const DType outs[] = {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::k_f8e5m2, DType::kI8};
  const DType scale_types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kE8M0};
  const auto& groups = kGroupSizes;
  std::vector<CaseSpec> v;
  for (int i = 0; i < 48; ++i) {
    CaseSpec s;
    s.in = ins[i % 3];
    s.w = ins[(i / 3 + 1) % 3];
    s.out = outs[(i / 2) % 4];
    s.scale = scale_types[(i / 5) % 4];
    s.residual = (i / 6) % 2 == 1;
    s.norm = i % 11 != 7;
    s.weight_offset = i % 4 == 3 ? 1.0f : 0.0f;
    s.scale_ub = i % 9 == 4 ? 0.25f : INFINITY;
    s.min_scale = i % 13 == 5 ? 1e-6f : 0.0f;
    const int variant = i % 6;  // scale mode and placement
    bool group = false;
    switch (variant) {
      case 0: s.mode = FUSEDNORM_SCALE_STATIC; break;
      case 1: s.mode = FUSEDNORM_SCALE_DYNAMIC_ROW; break;
      case 2:
        s.mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
        s.placement = FUSEDNORM_SCALES_PACKED_ROW_END;
        break;
      case 3: s.mode = FUSEDNORM_SCALE_DYNAMIC_ROW; s.col_major_scales = true; break;
      default:
        s.mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
        s.group = groups[(i / 4) % 3];
        s.col_major_scales = variant == 5;
        group = true;
    }
    // Shapes: rank 1, rank 2, rank 3 with padded rows (strided), and a larger call that the CPU
    // backend splits over several oneTBB tasks.
    const int shape = (i / 3) % 4;
    const int64_t any_h[] = {1, 97, 333, 256};
    const int64_t group_h[] = {128, 384, 256, 512};
    s.h = group ? group_h[(i / 7) % 4] : any_h[(i / 7) % 4];
    switch (shape) {
      case 0: s.lead = {}; s.col_major_scales = false; break;
      case 1: s.lead = {5}; break;
      case 2: s.lead = {2, 3}; s.row_pad = 3; break;
      default: s.lead = {96}; s.h = std::max<int64_t>(s.h, 256); break;
    }
    s.misalign = i % 8 == 1 ? 2 : 0;
    v.push_back(s);
  }
  return v;
}

std::vector<std::unique_ptr<CastJob>> cast_jobs(std::mt19937_64& rng) {
  const DType srcs[] = {DType::kF32, DType::kF16, DType::kBF16};
  const DType dsts[] = {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::k_f8e5m2, DType::kI8,
                        DType::kBF16,      DType::kE8M0};
  const std::vector<int64_t> shapes[] = {{77}, {6, 40}, {3, 4, 24}, {512, 64}};
  std::vector<std::unique_ptr<CastJob>> v;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> mag(-10, 10);
  for (int i = 0; i < 18; ++i) {
    auto j = std::make_unique<CastJob>();
    j->src_type = srcs[i % 3];
    j->dst_type = dsts[i % 6];
    j->shape = shapes[(i / 2) % 4];
    j->row_pad = j->shape.size() == 3 ? 5 : 0;  // rank 3: strided rows
    j->misalign = i % 5 == 2 ? 2 : 0;
    fusednorm_cast_options_init(&j->options);
    j->options.e8m0_rounding = (i / 6) % 2 ? FUSEDNORM_E8M0_UP : FUSEDNORM_E8M0_NEAREST;
    j->src = std::make_unique<HostTensor>(j->src_type, j->shape, j->row_pad, j->misalign);
    for (int64_t r = 0; r < j->src->rows(); ++r) {
      const float sigma = ldexpf(1.0f, mag(rng));
      for (int64_t c = 0; c < j->src->cols(); ++c) j->src->set(r, c, nd(rng) * sigma);
    }
    j->expected = std::make_unique<HostTensor>(j->dst_type, j->shape, j->row_pad, j->misalign ? 1 : 0);
    if (reference::cast(j->src->dl(), j->expected->dl(), &j->options) != FUSEDNORM_SUCCESS)
      FAIL("reference cast failed: " << j->describe() << ": " << fusednorm_last_error());
    v.push_back(std::move(j));
  }
  return v;
}

// ---------------------------------------------------------------- one thread

// The tokens that identify thread t's invalid calls in a message.
std::string eps_token(int t) { return "options->eps = " + std::to_string(-(t + 1)) + ":"; }
std::string group_token(int t) { return "options->group_size = " + std::to_string(1000 + t) + ":"; }
std::string shape_token(int t) { return "[" + std::to_string(2000 + t) + ", "; }

struct ThreadResult : ThreadLog {
  int64_t checked = 0, rejected = 0;
};

class Worker {
 public:
  Worker(int t, int iters, const std::vector<RqJob>& rq, const std::vector<std::unique_ptr<CastJob>>& casts)
      : t_(t), iters_(iters), rq_(rq), casts_(casts), rng_(uint64_t(t) * 7919 + 1) {
    // A different mix per thread: every rmsnorm case not ≡ t (mod 4), every cast not ≡ t (mod 3),
    // in an order shuffled per iteration. Neighbouring threads share most of their inputs.
    for (size_t i = 0; i < rq.size(); ++i)
      if (int(i % 4) != t % 4) jobs_.push_back(int(i));
    for (size_t i = 0; i < casts.size(); ++i)
      if (int(i % 3) != t % 3) jobs_.push_back(-1 - int(i));
  }

  void run(ThreadResult* out) {
    r_ = out;
    const int invalid_every = 2 + t_ % 3;
    int since_invalid = 0;
    for (int it = 0; it < iters_; ++it) {
      std::shuffle(jobs_.begin(), jobs_.end(), rng_);
      for (int j : jobs_) {
        if (j >= 0) run_rq(rq_[size_t(j)], it);
        else run_cast(*casts_[size_t(-1 - j)], it);
        if (++since_invalid == invalid_every) {
          since_invalid = 0;
          invalid_call(it, j);
        }
      }
    }
    check_error_kept("at the end");
  }

 private:
  void run_rq(const RqJob& job, int it) {
    // Own outputs (poisoned) and residual (in/out); input and weight are the shared pristine ones.
    auto mine = job.pristine->clone_inputs();
    const auto o = mine->spec.options();
    const fusednorm_status st =
        fusednorm_rmsnorm_quant(job.pristine->input->dl(), mine->res_dl(), job.pristine->w_dl(), mine->output->dl(),
                                mine->s_dl(), &o, nullptr);
    ++r_->checked;
    if (st != FUSEDNORM_SUCCESS) {
      r_->fail(where(it) + "rmsnorm_quant " + mine->spec.describe() + " returned " +
               fusednorm_status_string(st) + ": " + fusednorm_last_error());
      return;
    }
    const std::string d = compare_outputs(*mine, *job.expected);
    if (!d.empty()) r_->fail(where(it) + "rmsnorm_quant " + mine->spec.describe() + ": " + d);
    check_error_kept("after successful calls");
  }

  void run_cast(const CastJob& job, int it) {
    HostTensor dst(job.dst_type, job.shape, job.row_pad, job.misalign ? 1 : 0);
    // The shared src through a DLTensor copy of our own (same data, shape and strides).
    DLTensor src = *job.src->dl();
    const fusednorm_status st = fusednorm_cast(&src, dst.dl(), &job.options, nullptr);
    ++r_->checked;
    if (st != FUSEDNORM_SUCCESS) {
      r_->fail(where(it) + job.describe() + " returned " + fusednorm_status_string(st) + ": " +
               fusednorm_last_error());
      return;
    }
    const std::string d = first_difference("dst", dst, *job.expected);
    if (!d.empty()) r_->fail(where(it) + job.describe() + ": " + d);
    check_error_kept("after successful calls");
  }

  // One of three invalid calls, each naming this thread's index in its message; the outputs
  // stay untouched.
  void invalid_call(int it, int j) {
    const int kind = (kinds_++ + t_) % 3;
    fusednorm_status st, want;
    std::string token;
    const RqJob& job = rq_[size_t((j < 0 ? -1 - j : j) % int(rq_.size()))];
    auto mine = job.pristine->clone_inputs();
    auto o = mine->spec.options();
    HostTensor cast_dst(DType::k_f8e4m3fn, {2000 + t_, 8});
    if (kind == 0) {
      o.eps = -float(t_ + 1);
      token = eps_token(t_);
      want = FUSEDNORM_INVALID_ARGUMENT;
      st = fusednorm_rmsnorm_quant(mine->input->dl(), mine->res_dl(), mine->w_dl(), mine->output->dl(),
                                   mine->s_dl(), &o, nullptr);
    } else if (kind == 1) {
      o.scale_mode = FUSEDNORM_SCALE_DYNAMIC_GROUP;
      o.scale_placement = FUSEDNORM_SCALES_TENSOR;
      o.group_size = 1000 + t_;
      token = group_token(t_);
      want = FUSEDNORM_UNSUPPORTED;
      st = fusednorm_rmsnorm_quant(mine->input->dl(), mine->res_dl(), mine->w_dl(), mine->output->dl(),
                                   mine->s_dl(), &o, nullptr);
    } else {
      // src [77] f32 (a thread-private tensor) against dst [2000 + t, 8].
      HostTensor src(DType::kF32, {77});
      token = shape_token(t_);
      want = FUSEDNORM_INVALID_ARGUMENT;
      st = fusednorm_cast(src.dl(), cast_dst.dl(), nullptr, nullptr);
    }
    ++r_->rejected;
    const std::string msg = fusednorm_last_error();
    if (st != want)
      r_->fail(where(it) + "invalid call " + token + " returned " + fusednorm_status_string(st) + ", expected " +
               fusednorm_status_string(want));
    check_message(msg, token, "right after the call");
    for (uint8_t b : mine->output->storage())
      if (b != 0xA5) {
        r_->fail(where(it) + "invalid call " + token + " wrote the output");
        break;
      }
    for (uint8_t b : cast_dst.storage())
      if (b != 0xA5) {
        r_->fail(where(it) + "invalid cast " + token + " wrote dst");
        break;
      }
    last_msg_ = msg;
    last_token_ = token;
  }

  // The message names this thread's value and no other thread's.
  void check_message(const std::string& msg, const std::string& token, const char* when) {
    if (msg.find(token) == std::string::npos)
      r_->fail("thread " + std::to_string(t_) + ": last error " + when + " lacks \"" + token + "\": \"" + msg + "\"");
    for (int u = 0; u < kThreads; ++u) {
      if (u == t_) continue;
      for (const std::string& other : {eps_token(u), group_token(u), shape_token(u)})
        if (msg.find(other) != std::string::npos)
          r_->fail("thread " + std::to_string(t_) + ": last error " + when + " names thread " + std::to_string(u) +
                   "'s value \"" + other + "\": \"" + msg + "\"");
    }
  }

  // Successful calls leave the thread's last error alone: it is still exactly our last message.
  void check_error_kept(const char* when) {
    if (last_token_.empty()) return;
    const std::string now = fusednorm_last_error();
    if (now != last_msg_)
      r_->fail("thread " + std::to_string(t_) + ": last error " + when + " changed from \"" + last_msg_ + "\" to \"" +
               now + "\"");
    check_message(now, last_token_, when);
  }

  std::string where(int it) const {
    return "thread " + std::to_string(t_) + " iteration " + std::to_string(it) + ": ";
  }

  int t_, iters_, kinds_ = 0;
  const std::vector<RqJob>& rq_;
  const std::vector<std::unique_ptr<CastJob>>& casts_;
  std::mt19937_64 rng_;
  std::vector<int> jobs_;
  ThreadResult* r_ = nullptr;
  std::string last_msg_, last_token_;
};

TEST_CASE("concurrency: many threads calling every operation at once equal the reference", "[api][concurrency]") {
  const auto t_start = std::chrono::steady_clock::now();
  const int iters = iterations();
  std::unique_ptr<tbb::global_control> cap;
  if (tbb_threads() > 0)
    cap = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, size_t(tbb_threads()));
  std::mt19937_64 rng(2024);

  // Inputs and expected bytes, single-threaded, before any thread starts.
  std::vector<RqJob> rq;
  for (const CaseSpec& s : rq_specs()) {
    RqJob j;
    j.pristine = std::make_unique<CaseTensors>(s);
    j.pristine->fill_random(rng);
    j.expected = j.pristine->clone_inputs();
    INFO(s.describe() << ": " << fusednorm_last_error());
    REQUIRE(j.expected->run_reference() == FUSEDNORM_SUCCESS);
    rq.push_back(std::move(j));
  }
  const auto casts = cast_jobs(rng);
  // Snapshots of the shared inputs: no call may write them.
  std::vector<std::vector<uint8_t>> before;
  for (auto& j : rq) {
    before.push_back(j.pristine->input->storage());
    before.push_back(j.pristine->weight->storage());
  }
  for (auto& c : casts) before.push_back(c->src->storage());

  // The main thread's own last error: the workers' failures must not replace it.
  fusednorm_rmsnorm_quant_options bad;
  fusednorm_rmsnorm_quant_options_init(&bad);
  bad.eps = -4242.0f;
  REQUIRE(fusednorm_rmsnorm_quant(rq[1].pristine->input->dl(), nullptr, rq[1].pristine->w_dl(),
                                  rq[1].expected->output->dl(), rq[1].expected->s_dl(), &bad,
                                  nullptr) == FUSEDNORM_INVALID_ARGUMENT);
  const std::string main_msg = fusednorm_last_error();
  REQUIRE(main_msg.find("options->eps = -4242:") != std::string::npos);

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < kThreads; ++t) workers.push_back(std::make_unique<Worker>(t, iters, rq, casts));
  std::vector<ThreadResult> results(kThreads);
  run_threads_together(kThreads, results, [&](int t, auto wait) {
    wait();
    workers[size_t(t)]->run(&results[size_t(t)]);
  });

  int64_t checked = 0, rejected = 0, failures = 0;
  const std::string all = all_failures(results, &failures);
  for (const auto& r : results) {
    checked += r.checked;
    rejected += r.rejected;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  printf("concurrency: %d threads x %d iterations, oneTBB parallelism %d%s: %lld valid calls compared, %lld invalid "
         "calls, %.2f s\n",
         kThreads, iters, int(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)),
         kTsan ? " (ThreadSanitizer)" : "", (long long)checked, (long long)rejected, seconds);
  INFO(all);
  CHECK(failures == 0);
  // Every thread ran all its calls (a test that ran nothing would pass otherwise).
  int64_t want_checked = 0;
  for (int t = 0; t < kThreads; ++t) {
    int64_t n = 0;
    for (size_t i = 0; i < rq.size(); ++i) n += int(i % 4) != t % 4;
    for (size_t i = 0; i < casts.size(); ++i) n += int(i % 3) != t % 3;
    want_checked += n * iters;
  }
  CHECK(checked == want_checked);
  CHECK(rejected >= want_checked / 4);
  CHECK(std::string(fusednorm_last_error()) == main_msg);
  size_t k = 0;
  for (auto& j : rq) {
    CHECK(j.pristine->input->storage() == before[k++]);
    CHECK(j.pristine->weight->storage() == before[k++]);
  }
  for (auto& c : casts) CHECK(c->src->storage() == before[k++]);
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
