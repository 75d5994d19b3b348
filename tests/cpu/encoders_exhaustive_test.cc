// Every encoder, on every compiled Highway target: the SIMD path (fusednorm_cast f32 -> T
// through the public API) equals the shared scalar math for all 2^32 f32 bit patterns.
// Label "exhaustive": minutes, not seconds (ctest -L exhaustive).
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <string>

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

// 2^18 inputs a call: a chunk's input, codes and expected codes (1.5-2.5 MiB) stay in the two
// cores' L2 while every target encodes it (2^24-input chunks made the sweep memory-bound: 24 s an
// encoder against 15 s, perf: the targets' CastRows waiting on memory).
constexpr int64_t kRows = 64, kCols = 4096;
constexpr int64_t kChunk = kRows * kCols;

// The scalar math's encoder for a dtype as a function object of its own type (f(enc) is
// instantiated per encoder, so the encoder is inlined into f's loop: a run-time dispatch per
// element made the expected codes cost as much as all targets' sweeps together).
template <bool kKeepNanSign, class F>
void with_encoder(DType t, bool e8m0_up, F&& f) {
  switch (t) {
    case DType::kF16: return f([](float v) { return math::encode_f16<kKeepNanSign>(v); });
    case DType::kBF16: return f([](float v) { return math::encode_bf16<kKeepNanSign>(v); });
    case DType::kI8: return f([](float v) { return math::encode_int8(v); });
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return f([](float v) { return math::name::encode<kKeepNanSign>(v); });
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kE8M0:
      if (e8m0_up) return f([](float v) { return math::encode_e8m0_up(v); });
      return f([](float v) { return math::encode_e8m0_rn(v); });
    default: FAIL("no scalar encoder for dtype " << int(t));
  }
}

// Row r of the chunk's expected codes, laid out like the library's output (f4e2m1: element 2i in
// the low nibble of byte i).
template <class Enc>
void expect_row(Enc enc, int bits, const uint32_t* in, char* out) {
  for (int64_t i = 0; i < kCols; ++i) {
    const uint32_t code = enc(math::float_of(in[i]));
    if (bits == 16) {
      const uint16_t u = uint16_t(code);
      memcpy(out + 2 * i, &u, 2);
    } else if (bits == 8) {
      out[i] = char(code);
    } else if (i % 2 == 0) {
      out[i / 2] = char(code & 0xFu);
    } else {
      out[i / 2] = char(uint8_t(out[i / 2]) | ((code & 0xFu) << 4));
    }
  }
}

// Sweeps all 2^32 f32 bit patterns in chunks: the scalar math's codes (with_encoder<kKeepNanSign>
// for `type`) against `run(src, dst)`, the library's codes for one chunk (on the Highway target
// set for the test).
template <bool kKeepNanSign, class Run>
void sweep(DType type, bool e8m0_up, const char* name, Run run) {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  HostTensor src(DType::kF32, {kRows, kCols});
  uint32_t* in = reinterpret_cast<uint32_t*>(src.row(0));
  HostTensor dst(type, {kRows, kCols}), want(type, {kRows, kCols});
  const int bits = dtype_bits(type);
  const size_t row_bytes = size_t(kCols * bits / 8);
  uint64_t mismatches = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t base = 0; base < (uint64_t(1) << 32); base += uint64_t(kChunk)) {
    tbb::parallel_for(int64_t(0), kRows, [&](int64_t r) {
      for (int64_t i = r * kCols; i < (r + 1) * kCols; ++i) in[i] = uint32_t(base + uint64_t(i));
      with_encoder<kKeepNanSign>(type, e8m0_up, [&](auto enc) { expect_row(enc, bits, in + r * kCols, want.row(r)); });
    });
    for (const int64_t target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      REQUIRE(run(src, dst) == FUSEDNORM_SUCCESS);
      std::atomic<uint64_t> bad_rows{0};
      tbb::parallel_for(int64_t(0), kRows, [&](int64_t r) {
        if (memcmp(dst.row(r), want.row(r), row_bytes) != 0) ++bad_rows;
      });
      if (bad_rows != 0) {
        for (int64_t i = 0; i < kChunk; ++i) {
          const uint32_t got = load_code(type, dst.row(0), i), exp = load_code(type, want.row(0), i);
          if (got != exp) {
            FAIL_CHECK(name << " on " << hwy::TargetName(target) << ": " << bad_rows.load()
                            << " rows differ in chunk 0x" << std::hex << base << "; first input 0x" << in[i]
                            << " gives 0x" << got << ", math says 0x" << exp);
            break;
          }
        }
      }
      mismatches += bad_rows;
    }
    hwy::SetSupportedTargetsForTest(0);
  }
  fprintf(stderr, "%-24s %zu targets x 2^32 inputs: %llu mismatching rows, %.0f s\n", name, targets.size(),
          (unsigned long long)mismatches,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  CHECK(mismatches == 0);
}

TEST_CASE("encoders: SIMD equals the scalar math for all 2^32 f32 inputs on every target", "[exhaustive]") {
  for (const Encoder& enc : kEncoders) {
    fusednorm_cast_options opts;
    fusednorm_cast_options_init(&opts);
    opts.e8m0_rounding = enc.e8m0_up ? FUSEDNORM_E8M0_UP : FUSEDNORM_E8M0_NEAREST;
    sweep<true>(enc.type, enc.e8m0_up, enc.name,
                [&](HostTensor& src, HostTensor& dst) { return fusednorm_cast(src.dl(), dst.dl(), &opts, nullptr); });
  }
}

// The operations' encoders: the same vector encoders with every NaN written as the format's
// canonical NaN (kKeepNanSign = false), reached through rmsnorm_quant in quant-only mode with a
// static scale of 1 (y = x exactly, q = enc(x * 1)), for every output format it writes.
TEST_CASE("encoders: rmsnorm_quant's encoders (canonical NaN) for all 2^32 f32 inputs on every target",
          "[exhaustive]") {
  HostTensor one(DType::kF32, {1});
  one.set(0, 0, 1.0f);
  fusednorm_rmsnorm_quant_options opts;
  fusednorm_rmsnorm_quant_options_init(&opts);
  opts.norm = FUSEDNORM_NORM_NONE;
  opts.scale_mode = FUSEDNORM_SCALE_STATIC;
  for (const Encoder& enc : kEncoders) {
    if (!is_quant_dtype(enc.type)) continue;
    const std::string name = std::string("rmsnorm_quant ") + enc.name;
    sweep<false>(
        enc.type, false, name.c_str(), [&](HostTensor& src, HostTensor& dst) {
          return fusednorm_rmsnorm_quant(src.dl(), nullptr, nullptr, dst.dl(), one.dl(), &opts, nullptr);
        });
  }
}

// div6_for_scale's two fmaf: on x86 with the FMA instruction where the CPU has one (a build for
// the baseline ISA otherwise calls the C library's fmaf, several times slower; both are exact).
#if defined(__x86_64__) && defined(__GNUC__)
// The scalar sweeps run after the SIMD ones on the same threads: AVX code that leaves the upper
// halves of the vector registers dirty makes every later legacy-SSE instruction of the scalar
// code pay a transition (several times slower). vzeroupper first, on each thread, where there is
// AVX.
__attribute__((target("avx"))) void clear_upper_avx() { __builtin_ia32_vzeroupper(); }
const bool g_have_avx = __builtin_cpu_supports("avx");
void clear_upper() {
  if (g_have_avx) clear_upper_avx();
}
__attribute__((target("fma"))) float div6_fma(float z) { return math::div6_for_scale(z); }
__attribute__((target("fma"))) math::BlockScale mx_finite_fma(uint32_t a) { return math::mxfp4_block_scale_finite(a); }
const bool g_have_fma = __builtin_cpu_supports("fma");
float div6_any(float z) { return g_have_fma ? div6_fma(z) : math::div6_for_scale(z); }
math::BlockScale mx_finite_any(uint32_t a) {
  return g_have_fma ? mx_finite_fma(a) : math::mxfp4_block_scale_finite(a);
}
#else
void clear_upper() {}
float div6_any(float z) { return math::div6_for_scale(z); }
math::BlockScale mx_finite_any(uint32_t a) { return math::mxfp4_block_scale_finite(a); }
#endif

// Checks bad(u) for every u in [0, end) (end a multiple of 2^16) on all cores, each thread clearing
// the vector registers' upper halves first (clear_upper); CHECKs that none is bad, naming the
// first that is.
template <class Bad>
void check_every_u32(uint64_t end, const char* what, Bad bad) {
  std::atomic<uint64_t> count{0};
  std::atomic<uint32_t> first{0xFFFFFFFFu};
  tbb::parallel_for(uint64_t(0), end >> 16, [&](uint64_t hi) {
    clear_upper();
    uint64_t n = 0;
    for (uint32_t lo = 0; lo < (1u << 16); ++lo) {
      const uint32_t u = uint32_t(hi << 16) | lo;
      if (bad(u)) {
        ++n;
        uint32_t f = first.load();
        while (u < f && !first.compare_exchange_weak(f, u)) {
        }
      }
    }
    count += n;
  });
  INFO("first mismatching " << what << " 0x" << std::hex << first.load());
  CHECK(count.load() == 0);
}

// The branch-free e2m1 encoder of the GPU kernels (math::encode_f4e2m1_sel) equals the shared
// f4e2m1::encode for every input (its GPU build is proven by the plugin's verify_encoders). The
// operations' FP4 path on the CPU is EncodeMini<f4e2m1>, swept by the first case through
// fusednorm_cast (f4e2m1 has no signed NaN, so the canonical-NaN variant is the same code).
// Called through volatile pointers: inlined, the compiler can fold the comparison away (the two
// compute the same expressions), and the loop would test nothing.
// encode_f4e2m1_num (the kernels' encoder where no value can be NaN) is checked in the same sweep,
// on every input that is not NaN.
uint32_t (*volatile g_f4_sel)(float) = math::encode_f4e2m1_sel;
uint32_t (*volatile g_f4_num)(float) = math::encode_f4e2m1_num;
uint32_t (*volatile g_f4_ref)(float) = math::f4e2m1::encode<false>;
// f4e2m1_small_low (the kernels' encoder where every |v| < 7) on |v| for every input below 7 in
// magnitude: its low byte is the magnitude code with bits 3 to 7 clear.
uint32_t (*volatile g_f4_small)(float) = math::f4e2m1_small_low;

TEST_CASE("encoders: encode_f4e2m1_sel (every input), encode_f4e2m1_num (every non-NaN input) and "
          "f4e2m1_small_low (every |v| < 7) equal f4e2m1::encode over all 2^32 f32 inputs", "[exhaustive]") {
  check_every_u32(uint64_t(1) << 32, "input", [](uint32_t u) {
    const float v = math::float_of(u);
    const uint32_t want = g_f4_ref(v);
    if ((u & math::kF32AbsMask) < math::kF4SmallLimitBits) {
      const uint32_t low = g_f4_small(math::float_of(u & math::kF32AbsMask)) & 0xFFu;
      if ((low & 0xF8u) != 0 || (low | ((u >> 28) & 8u)) != want) return true;
    }
    return g_f4_sel(v) != want || (v == v && g_f4_num(v) != want);
  });
}


// NVFP4's scale code through div6_for_scale (the GPU kernels') against the shared division, for
// every f32 z = rn(gs × amax).
uint32_t (*volatile g_e4m3_sat)(float) = math::f8e4m3fn::encode<false>;

TEST_CASE("encoders: enc_f8e4m3fn(div6_for_scale(z)) equals enc_f8e4m3fn(z / 6) over all 2^32 f32 inputs",
          "[exhaustive]") {
  check_every_u32(uint64_t(1) << 32, "input", [](uint32_t u) {
    const float z = math::float_of(u);
    const float q = div6_any(z), want = math::div_rn(z, 6.0f);  // equal bits need no encoding
    return math::bits_of(q) != math::bits_of(want) && g_e4m3_sat(q) != g_e4m3_sat(want);
  });
}

// The GPU kernels' MXFP4 scale of a finite block (mxfp4_block_scale_finite) against the shared
// one, for every finite amax (every non-negative f32 below Inf: all the bits a block's amax takes).
math::BlockScale (*volatile g_mx_ref)(uint32_t) = math::mxfp4_block_scale;

TEST_CASE("encoders: mxfp4_block_scale_finite equals mxfp4_block_scale for every finite amax", "[exhaustive]") {
  check_every_u32(math::kF32InfBits, "amax", [](uint32_t a) {
    const math::BlockScale f = mx_finite_any(a), w = g_mx_ref(a);
    return f.code != w.code || math::bits_of(f.r) != math::bits_of(w.r);
  });
}

// MI300's f8e4m3fnuz (math::encode_fnuz_rne with the chip's conversion in the HIP kernels): its
// clamp and mends around a model of the conversion, the shared encoder's code of each value it is
// given (round to nearest even), with a negative value that rounds to zero as 0x80 (kSignedZero)
// or 0x00, the two readings docs/numerics.md §3c allows. The model counts every value it is given
// outside [-240, 240] (NaN included: the clamp sends NaN to +-240 and its byte is replaced after),
// and returns 0x5A for it, so that no such byte can pass. The pair form takes every input u with
// ~u: u is checked in the low slot under one reading and (as ~u's partner) in the high slot under
// the other; every 16th input also goes through the 4-wide form under both.
std::atomic<uint64_t> g_fnuz_out_of_range{0};
template <bool kSignedZero>
struct FnuzRneModel {
  static uint32_t code(float x) {
    if (!(x >= -240.0f && x <= 240.0f)) {
      ++g_fnuz_out_of_range;
      return 0x5Au;
    }
    const uint32_t c = math::f8e4m3fnuz::encode<false>(x);
    return kSignedZero && c == 0 && (math::bits_of(x) >> 31) != 0 ? 0x80u : c;
  }
  template <class Half>
  uint32_t operator()(uint32_t old, float lo, float hi, Half) const {
    const uint32_t c = code(lo) | (code(hi) << 8);
    return Half::kValue ? (old & 0xFFFFu) | (c << 16) : (old & 0xFFFF0000u) | c;
  }
};
uint32_t (*volatile g_fnuz_ref)(float) = math::f8e4m3fnuz::encode<false>;

TEST_CASE("encoders: encode_fnuz_rne (MI300's fnuz) equals f8e4m3fnuz::encode over all 2^32 f32 inputs, "
          "both readings of a negative zero", "[exhaustive]") {
  g_fnuz_out_of_range = 0;
  check_every_u32(uint64_t(1) << 32, "input", [](uint32_t u) {
    const float v[4] = {math::float_of(u), math::float_of(~u), math::float_of(u ^ 0x80000000u),
                        math::float_of(~u ^ 0x80000000u)};
    const uint32_t want0 = g_fnuz_ref(v[0]), want1 = g_fnuz_ref(v[1]);
    const uint32_t w2 = (u >> 8) & 1u ? math::encode_fnuz_rne<2>(v, FnuzRneModel<true>{})
                                      : math::encode_fnuz_rne<2>(v, FnuzRneModel<false>{});
    bool bad = w2 != (want0 | (want1 << 8));
    if ((u & 15u) == 0) {
      const uint32_t want = want0 | (want1 << 8) | (g_fnuz_ref(v[2]) << 16) | (g_fnuz_ref(v[3]) << 24);
      bad |= math::encode_fnuz_rne<4>(v, FnuzRneModel<true>{}) != want;
      bad |= math::encode_fnuz_rne<4>(v, FnuzRneModel<false>{}) != want;
    }
    return bad;
  });
  CHECK(g_fnuz_out_of_range.load() == 0);
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
