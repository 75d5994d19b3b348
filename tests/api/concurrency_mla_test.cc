// Many threads calling fusednorm_mla_rope_rmsnorm_quant at once (CPU backend): 12 threads, each
// with its own copies of the outputs (q in place or q_out, the cache) of a mix of cases, released
// together and looping; every call's bytes equal the reference's, computed before the threads
// start. Between the valid calls each thread makes an invalid call whose message carries its own
// index (a page id of 1000 + t) and checks that fusednorm_last_error() on this thread holds it.
// Each thread runs its calls in a oneTBB arena of one slot (no workers: ThreadSanitizer sees every
// race between the callers; Debian's oneTBB is not instrumented). Built into test_concurrency.
#include <string.h>

#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <tbb/task_arena.h>

#include "common/mla_case.h"
#include "common/threads.h"

namespace fusednorm {
namespace test {
namespace {

std::vector<MlaSpec> mla_specs() {
  std::vector<MlaSpec> v;
  std::mt19937_64 rng(404);
  for (int i = 0; i < 6; ++i) {
    MlaSpec s = random_mla_spec(rng, 20000);
    s.in_place = i % 2 == 0;
    v.push_back(s);
  }
  return v;
}

TEST_CASE("concurrency: many threads calling mla_rope_rmsnorm_quant at once equal the reference",
          "[api][concurrency][mla]") {
  constexpr int kThreads = 12, kIters = 4;
  const std::vector<MlaSpec> specs = mla_specs();
  std::vector<std::unique_ptr<MlaCase>> expected;
  for (const MlaSpec& s : specs) {
    expected.push_back(std::make_unique<MlaCase>(s));
    REQUIRE(expected.back()->run_reference() == FUSEDNORM_SUCCESS);
  }
  std::vector<ThreadLog> logs(kThreads);
  std::vector<int64_t> done(kThreads, 0);
  run_threads_together(kThreads, logs, [&](int t, auto wait) {
    tbb::task_arena arena(1);
    std::vector<std::unique_ptr<MlaCase>> mine;
    for (const MlaSpec& s : specs) mine.push_back(std::make_unique<MlaCase>(s));
    wait();
    arena.execute([&] {
      for (int it = 0; it < kIters; ++it)
        for (size_t k = 0; k < specs.size(); ++k) {
          const size_t j = (k + size_t(t)) % specs.size();
          MlaCase fresh(specs[j]);  // fresh outputs (and q, when rotated in place)
          if (fresh.run_library() != FUSEDNORM_SUCCESS) {
            logs[size_t(t)].fail("thread " + std::to_string(t) + ": " + fusednorm_last_error());
            continue;
          }
          const std::string d = compare_mla(fresh, *expected[j]);
          if (!d.empty()) logs[size_t(t)].fail("thread " + std::to_string(t) + " " + specs[j].describe() + ": " + d);
          ++done[size_t(t)];
          // An invalid call of this thread's own: a page id past the cache.
          MlaCase& bad = *mine[j];
          bad.page_table->set(bad.seq_of[0] * bad.max_pages + bad.pos[0] / specs[j].page_size, 1000 + t);
          const fusednorm_status st = bad.run_library();
          const std::string msg = fusednorm_last_error(), token = "= " + std::to_string(1000 + t) + " (token";
          if (st != FUSEDNORM_INVALID_ARGUMENT || msg.find(token) == std::string::npos)
            logs[size_t(t)].fail("thread " + std::to_string(t) + ": invalid call gave \"" + msg + "\"");
        }
    });
  });
  int64_t failures = 0;
  const std::string all = all_failures(logs, &failures);
  INFO(all);
  CHECK(failures == 0);
  for (int t = 0; t < kThreads; ++t) CHECK(done[size_t(t)] == int64_t(kIters) * int64_t(specs.size()));
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
