// Many threads started together, for the concurrency tests (CPU and GPU). Catch2's assertions are
// not thread-safe: a thread records its failures in its ThreadLog, and the main thread asserts
// after joining.
#pragma once

#include <atomic>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace fusednorm {
namespace test {

struct ThreadLog {
  std::vector<std::string> failures;  // the first 20
  int64_t count = 0;
  void fail(const std::string& s) {
    if (failures.size() < 20) failures.push_back(s);
    ++count;
  }
};

// Every thread calls arrive_and_wait() once it is set up; all are released together.
class StartLine {
 public:
  explicit StartLine(int n) : n_(n) {}
  void arrive_and_wait() {
    ready_.fetch_add(1);
    while (!go_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  void release_when_all_arrived() {
    while (ready_.load() < n_) std::this_thread::yield();
    go_.store(true, std::memory_order_release);
  }

 private:
  const int n_;
  std::atomic<int> ready_{0};
  std::atomic<bool> go_{false};
};

// Runs body(t, wait) on threads t = 0..n-1 and joins them; each thread calls wait() once it is set
// up, and all are released together. An exception ends its thread with a failure in logs[t] (a
// ThreadLog); a thread that throws before wait() still arrives, so the others are released.
template <class Log, class Body>
void run_threads_together(int n, std::vector<Log>& logs, Body body) {
  StartLine start(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      bool arrived = false;
      auto wait = [&] {
        if (!arrived) start.arrive_and_wait();
        arrived = true;
      };
      try {
        body(t, wait);
      } catch (const std::exception& e) {
        logs[size_t(t)].fail("thread " + std::to_string(t) + ": exception " + e.what());
      }
      wait();
    });
  start.release_when_all_arrived();
  for (auto& th : threads) th.join();
}

// Every thread's recorded failures, one a line; `count` gets their total.
template <class Log>
std::string all_failures(const std::vector<Log>& logs, int64_t* count) {
  std::string all;
  *count = 0;
  for (const auto& l : logs) {
    for (const auto& f : l.failures) all += f + "\n";
    *count += l.count;
  }
  return all;
}

}  // namespace test
}  // namespace fusednorm
