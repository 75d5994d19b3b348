// fusednorm-bench helpers: timing, statistics, list parsing, random tensor contents, the JSON type.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "bench_device.h"
#include "core/dtype.h"
#include "core/elements.h"

namespace fusednorm {
namespace bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A pool of random values, encoded once per dtype; a tensor row is a window of the pool at a
// pseudo-random offset (generating hundreds of millions of normal deviates per run would take
// longer than the benchmark itself).
class RandomPool {
 public:
  // Values mean + stddev * N(0, 1), n of them, from seed.
  RandomPool(uint64_t seed, float mean, float stddev, size_t n) : seed_(seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    values_.resize(n);
    for (auto& v : values_) v = mean + stddev * nd(rng);
  }
  size_t size() const { return values_.size(); }
  // The pool encoded as dtype t (round to nearest even; sizes of 8+ bits only).
  const std::vector<uint8_t>& encoded(DType t) {
    for (auto& e : enc_)
      if (e.first == t) return e.second;
    std::vector<uint8_t> bytes(values_.size() * size_t(dtype_bits(t) / 8));
    for (size_t i = 0; i < values_.size(); ++i)
      store_code(t, reinterpret_cast<char*>(bytes.data()), int64_t(i), encode<false>(t, values_[i]));
    enc_.emplace_back(t, std::move(bytes));
    return enc_.back().second;
  }
  // Element offset of the window for row `row` of buffer set `set`, tensor `tag`.
  size_t offset(uint64_t tag, uint64_t set, uint64_t row, size_t cols) const {
    const uint64_t h = splitmix64(seed_ ^ splitmix64(tag * 0x100000001B3ull ^ splitmix64(set * 0x5851F42Dull + row)));
    return size_t(h % uint64_t(values_.size() - cols + 1));
  }

 private:
  uint64_t seed_;
  std::vector<float> values_;
  std::vector<std::pair<DType, std::vector<uint8_t>>> enc_;
};

// Fills `sets` consecutive blocks (each `set_stride` bytes apart) of `rows` x `cols` compact rows
// of dtype t on the device from the pool. Parallel when the device memory is host-addressable,
// else staged through host memory and uploaded.
inline void fill_random(Device& dev, char* base, size_t sets, size_t set_stride, int64_t rows, int64_t cols, DType t,
                        RandomPool& pool, uint64_t tag) {
  const std::vector<uint8_t>& src = pool.encoded(t);
  const size_t esz = size_t(dtype_bits(t) / 8), row_bytes = size_t(cols) * esz;
  const int64_t total = int64_t(sets) * rows;
  auto row_src = [&](int64_t g) {
    return src.data() + pool.offset(tag, uint64_t(g / rows), uint64_t(g % rows), size_t(cols)) * esz;
  };
  auto row_dst_off = [&](int64_t g) { return size_t(g / rows) * set_stride + size_t(g % rows) * row_bytes; };
  if (char* host = static_cast<char*>(dev.host_view(base))) {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, total, std::max<int64_t>(1, 65536 / int64_t(row_bytes))),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        for (int64_t g = r.begin(); g < r.end(); ++g) memcpy(host + row_dst_off(g), row_src(g), row_bytes);
                      });
    return;
  }
  // Staged: whole sets (each a compact block, padding between sets left as it is) gathered in
  // host memory, ~64 MiB at a time, and uploaded.
  const size_t set_bytes = size_t(rows) * row_bytes, stride = sets > 1 ? set_stride : set_bytes;
  const size_t per_batch = std::max<size_t>(1, (size_t(64) << 20) / std::max<size_t>(stride, 1));
  std::vector<uint8_t> stage(std::min(sets, per_batch) * stride);
  for (size_t s0 = 0; s0 < sets; s0 += per_batch) {
    const size_t nb = std::min(per_batch, sets - s0);
    const int64_t g0 = int64_t(s0) * rows;
    tbb::parallel_for(tbb::blocked_range<int64_t>(g0, g0 + int64_t(nb) * rows,
                                                  std::max<int64_t>(1, 65536 / int64_t(row_bytes))),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        for (int64_t g = r.begin(); g < r.end(); ++g)
                          memcpy(stage.data() + (size_t(g / rows) - s0) * stride + size_t(g % rows) * row_bytes,
                                 row_src(g), row_bytes);
                      });
    dev.upload(base + s0 * stride, stage.data(), (nb - 1) * stride + set_bytes);
  }
}

// A case's JSON object, its keys in insertion order (op, mode, shape first, as a reader scans
// them); dumped on one line. Non-finite numbers are written as null.
using Json = nlohmann::ordered_json;

// v to 6 significant digits, the precision of a timing (the JSON writer prints the shortest text
// that reads back as the same double, so such a value comes out as at most 6 digits).
inline double sig6(double v) {
  if (!std::isfinite(v)) return v;
  char b[32];
  snprintf(b, sizeof b, "%.6g", v);
  return strtod(b, nullptr);
}

// One object, one line; flushed, so a reader (or a run cut short) has every finished case. Bytes
// that are not UTF-8 (in a library message) are replaced rather than thrown on.
inline void write_json_line(FILE* f, const Json& j) {
  fprintf(f, "%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  fflush(f);
}

}  // namespace bench
}  // namespace fusednorm
