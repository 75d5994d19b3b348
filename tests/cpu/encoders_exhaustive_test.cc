// Every encoder, on every compiled Highway target: the SIMD path (fusednorm_cast f32 -> T
// through the public API) equals the shared scalar math for all 2^32 f32 bit patterns.
// Label "exhaustive": minutes, not seconds (ctest -L exhaustive).
#include <stdio.h>

#include <atomic>
#include <chrono>

#include <catch2/catch.hpp>
#include <tbb/parallel_for.h>

#include "common/targets.h"
#include "common/test_tensor.h"
#include "core/elements.h"

namespace fusednorm {
namespace test {
namespace {

struct Encoder {
  DType type;
  bool e8m0_up;
  const char* name;
};

const Encoder kEncoders[] = {
#define FN_MINIFLOAT(name, ...) {DType::k_##name, false, #name},
#include "math/formats.inc"
#undef FN_MINIFLOAT
    {DType::kI8, false, "int8"},           {DType::kF16, false, "f16"},
    {DType::kBF16, false, "bf16"},         {DType::kE8M0, false, "e8m0_rn"},
    {DType::kE8M0, true, "e8m0_up"},
};

constexpr int64_t kRows = 4096, kCols = 4096;  // 2^24 inputs per call
constexpr int64_t kChunk = kRows * kCols;

TEST_CASE("encoders: SIMD equals the scalar math for all 2^32 f32 inputs on every target", "[exhaustive]") {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  HostTensor src(DType::kF32, {kRows, kCols});
  std::vector<uint32_t> expect(static_cast<size_t>(kChunk));
  for (const Encoder& enc : kEncoders) {
    const int bits = dtype_bits(enc.type);
    HostTensor dst(enc.type, {kRows, kCols});
    fusednorm_cast_options opts;
    fusednorm_cast_options_init(&opts);
    opts.e8m0_rounding = enc.e8m0_up ? FUSEDNORM_E8M0_UP : FUSEDNORM_E8M0_NEAREST;
    uint64_t mismatches = 0;
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t base = 0; base < (uint64_t(1) << 32); base += uint64_t(kChunk)) {
      uint32_t* in = reinterpret_cast<uint32_t*>(src.row(0));
      tbb::parallel_for(int64_t(0), kRows, [&](int64_t r) {
        for (int64_t i = r * kCols; i < (r + 1) * kCols; ++i) {
          in[i] = uint32_t(base + uint64_t(i));
          expect[size_t(i)] = encode<true>(enc.type, math::float_of(in[i]), enc.e8m0_up);
        }
      });
      for (const int64_t target : targets) {
        hwy::SetSupportedTargetsForTest(target);
        REQUIRE(fusednorm_cast(src.dl(), dst.dl(), &opts, nullptr) == FUSEDNORM_SUCCESS);
        const char* out = dst.row(0);
        std::atomic<uint64_t> bad{0};
        std::atomic<int64_t> first{-1};
        tbb::parallel_for(int64_t(0), kRows, [&](int64_t r) {
          uint64_t local = 0;
          for (int64_t i = r * kCols; i < (r + 1) * kCols; ++i)
            if (load_code(enc.type, out, i) != expect[size_t(i)]) {
              ++local;
              int64_t none = -1;
              first.compare_exchange_strong(none, i);
            }
          bad += local;
        });
        if (bad != 0) {
          const int64_t i = first.load();
          FAIL_CHECK(enc.name << " on " << hwy::TargetName(target) << ": " << bad.load()
                              << " mismatches in chunk 0x" << std::hex << base << "; first input 0x"
                              << in[i] << " gives 0x" << load_code(enc.type, out, i) << ", math says 0x"
                              << expect[size_t(i)]);
        }
        mismatches += bad;
      }
      hwy::SetSupportedTargetsForTest(0);
    }
    fprintf(stderr, "%-12s %zu targets x 2^32 inputs: %llu mismatches, %.0f s\n", enc.name, targets.size(),
            (unsigned long long)mismatches,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    INFO(enc.name << ": " << targets.size() << " targets x 2^32 inputs (" << bits << "-bit codes)");
    CHECK(mismatches == 0);
  }
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
