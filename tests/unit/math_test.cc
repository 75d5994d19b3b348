// The shared math on known values (from the format definitions in numerics.md §1), and every
// decoder over all its codes, the shared one and through the public API (fusednorm_cast T -> f32)
// on every target, against values computed independently from the format table.
#include <math.h>
#include <string.h>

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "common/targets.h"
#include "common/test_tensor.h"
#include "backends/gpu/plan.h"
#include "core/elements.h"
#include "core/validate.h"

namespace fusednorm {
namespace test {
namespace {

using math::float_of;
using math::bits_of;

TEST_CASE("math: largest finite values and their codes", "[math]") {
  CHECK(quant_max(DType::k_f8e4m3fn) == 448.0f);
  CHECK(quant_max(DType::k_f8e4m3fnuz) == 240.0f);
  CHECK(quant_max(DType::k_f8e4m3) == 240.0f);
  CHECK(quant_max(DType::k_f8e5m2) == 57344.0f);
  CHECK(quant_max(DType::k_f8e5m2fnuz) == 57344.0f);
  CHECK(quant_max(DType::k_f4e2m1) == 6.0f);
  CHECK(quant_max(DType::kI8) == 127.0f);
}

TEST_CASE("math: encoders on hand-checked values", "[math]") {
  using E4 = math::f8e4m3fn;
  CHECK(E4::encode(448.0f) == 0x7E);
  CHECK(E4::encode(464.0f) == 0x7E);    // above max: saturates
  CHECK(E4::encode(INFINITY) == 0x7E);
  CHECK(E4::encode(-INFINITY) == 0xFE);
  CHECK(E4::encode(NAN) == 0x7F);
  CHECK(E4::encode(-NAN) == 0xFF);
  CHECK(E4::encode<false>(-NAN) == 0x7F);
  CHECK(E4::encode(-0.0f) == 0x80);
  CHECK(E4::encode(ldexpf(1, -9)) == 0x01);       // smallest subnormal
  CHECK(E4::encode(ldexpf(1, -10)) == 0x00);      // half of it: tie to even (0)
  CHECK(E4::encode(ldexpf(3, -10)) == 0x02);      // 1.5 quanta: tie to even (2)
  CHECK(E4::encode(ldexpf(1, -6)) == 0x08);       // smallest normal
  CHECK(E4::encode(1.0625f) == 0x38);             // tie between 1 and 1.125: to even
  CHECK(E4::encode(1.1875f) == 0x3A);             // tie between 1.125 and 1.25: to even
  CHECK(math::f8e4m3fnuz::encode(-0.0f) == 0x00);
  CHECK(math::f8e4m3fnuz::encode(NAN) == 0x80);
  CHECK(math::f8e4m3fnuz::encode(-1e-30f) == 0x00);  // rounds to zero: no -0
  CHECK(math::f8e4m3fnuz::encode(240.0f) == 0x7F);
  CHECK(math::f8e4m3::encode(INFINITY) == 0x77);   // IEEE-like: saturates below Inf 0x78
  CHECK(math::f8e5m2::encode(57344.0f) == 0x7B);
  CHECK(math::f8e5m2::encode(61440.0f) == 0x7B);   // would round to Inf: saturates
  CHECK(math::f8e5m2fnuz::encode(-57344.0f) == 0xFF);
  CHECK(math::f4e2m1::encode(5.0f) == 0x6);        // tie between 4 and 6: to even (4)
  CHECK(math::f4e2m1::encode(-6.5f) == 0xF);
  CHECK(math::f4e2m1::encode(0.25f) == 0x0);       // tie between 0 and 0.5: to even (0)
  CHECK(math::f4e2m1::encode(0.75f) == 0x2);       // tie between 0.5 and 1: to even (1)
  CHECK(math::f4e2m1::encode(NAN) == 0x0);
  CHECK(math::encode_int8(2.5f) == 2);
  CHECK(math::encode_int8(-2.5f) == 0xFE);
  CHECK(math::encode_int8(-300.0f) == 0x80);
  CHECK(math::encode_int8(NAN) == 0);
  CHECK(math::encode_f16(65504.0f) == 0x7BFF);
  CHECK(math::encode_f16(65519.996f) == 0x7BFF);
  CHECK(math::encode_f16(65520.0f) == 0x7C00);
  CHECK(math::encode_f16(ldexpf(1, -24)) == 0x0001);
  CHECK(math::encode_f16(ldexpf(1, -25)) == 0x0000);
  CHECK(math::encode_bf16(1.00390625f) == 0x3F80);  // tie: to even
  CHECK(math::encode_bf16(1.01171875f) == 0x3F82);
  CHECK(math::encode_e8m0_up(1.0f) == 127);
  CHECK(math::encode_e8m0_up(1.0000001f) == 128);
  CHECK(math::encode_e8m0_up(0.0f) == 0);
  CHECK(math::encode_e8m0_up(-1.0f) == 0);
  CHECK(math::encode_e8m0_up(ldexpf(1, -127)) == 0);
  CHECK(math::encode_e8m0_up(ldexpf(1.5f, -127)) == 1);
  CHECK(math::encode_e8m0_up(INFINITY) == 0xFE);
  CHECK(math::encode_e8m0_up(NAN) == 0xFF);
  CHECK(math::encode_e8m0_rn(1.4999999f) == 127);
  CHECK(math::encode_e8m0_rn(1.5f) == 128);         // ties up
  CHECK(math::encode_e8m0_rn(ldexpf(1.5f, 127)) == 0xFE);
}

TEST_CASE("math: decode(encode(decode(c))) == c for every code", "[math]") {
  for (DType t : {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::k_f8e4m3, DType::k_f8e5m2,
                  DType::k_f8e5m2fnuz, DType::k_f4e2m1, DType::kI8, DType::kE8M0}) {
    const uint32_t n = dtype_bits(t) == 4 ? 16 : 256;
    for (uint32_t c = 0; c < n; ++c) {
      const float v = decode(t, c);
      if (std::isnan(v)) continue;
      if (std::isinf(v)) continue;  // Inf codes decode but are never produced (saturation)
      INFO(dtype_name(t) << " code " << c);
      CHECK(encode<true>(t, v) == c);
    }
  }
  for (uint32_t c = 0; c < 65536; ++c) {
    if (!std::isnan(math::decode_f16(c))) CHECK(math::encode_f16(math::decode_f16(c)) == c);
    if (!std::isnan(math::decode_bf16(c))) CHECK(math::encode_bf16(math::decode_bf16(c)) == c);
  }
}

TEST_CASE("math: canonical reduction partial counts", "[math]") {
  CHECK(math::reduction_partials(1) == 8);
  CHECK(math::reduction_partials(97) == 16);
  CHECK(math::reduction_partials(2048) == 512);
  CHECK(math::reduction_partials(4096) == 1024);
  CHECK(math::reduction_partials(7168) == 1024);
  CHECK(math::reduction_partials(16384) == 4096);
  CHECK(math::reduction_partials(1 << 20) == 4096);
}

// The value of every code, written from the format table of docs/numerics.md §1 in double
// arithmetic, independently of the library's decoders (which the CPU backend's cast and the
// kernels use): sign, exponent and mantissa fields, subnormals, and each format's NaN/Inf codes.
struct FormatSpec {
  DType type;
  int exp_bits, man_bits, bias;
  bool ieee_top;     // the top exponent holds Inf (mantissa 0) and NaN (mantissa != 0)
  bool nan_all_ones; // S.1111.111 is NaN and the rest of the top exponent is finite (e4m3fn)
  bool fnuz;         // 0x80 is the only NaN; no -0, no Inf
  bool no_nan;       // f4e2m1
};
const FormatSpec kSpecs[] = {
    {DType::k_f8e4m3fn, 4, 3, 7, false, true, false, false},
    {DType::k_f8e4m3fnuz, 4, 3, 8, false, false, true, false},
    {DType::k_f8e4m3, 4, 3, 7, true, false, false, false},
    {DType::k_f8e5m2, 5, 2, 15, true, false, false, false},
    {DType::k_f8e5m2fnuz, 5, 2, 16, false, false, true, false},
    {DType::k_f4e2m1, 2, 1, 1, false, false, false, true},
    {DType::kF16, 5, 10, 15, true, false, false, false},
};

// NaN (as a quiet NaN with the code's sign) or the exact value of `code`.
double spec_value(const FormatSpec& f, uint32_t code) {
  const int bits = 1 + f.exp_bits + f.man_bits;
  const uint32_t sign = code >> (bits - 1), e = (code >> f.man_bits) & ((1u << f.exp_bits) - 1),
                 m = code & ((1u << f.man_bits) - 1);
  const uint32_t e_max = (1u << f.exp_bits) - 1, m_max = (1u << f.man_bits) - 1;
  const double s = sign ? -1.0 : 1.0;
  if (f.fnuz && code == (1u << (bits - 1))) return std::nan("");
  if (f.ieee_top && e == e_max) return m == 0 ? s * HUGE_VAL : std::copysign(std::nan(""), s);
  if (f.nan_all_ones && e == e_max && m == m_max) return std::copysign(std::nan(""), s);
  if (e == 0) return s * std::ldexp(double(m), 1 - f.bias - f.man_bits);
  return s * std::ldexp(double((1u << f.man_bits) + m), int(e) - f.bias - f.man_bits);
}

// Decoded f32 bits equal the spec's value (NaN: any NaN with the spec's sign where it has one).
bool same_value(float got, double want, bool signed_nan) {
  if (std::isnan(want)) return std::isnan(got) && (!signed_nan || std::signbit(got) == std::signbit(want));
  return double(got) == want && std::signbit(got) == std::signbit(want);
}

double spec_value_of(DType t, uint32_t code) {
  for (const FormatSpec& f : kSpecs)
    if (f.type == t) return spec_value(f, code);
  switch (t) {
    case DType::kI8: return double(int8_t(uint8_t(code)));
    case DType::kE8M0: return code == 0xFF ? std::nan("") : std::ldexp(1.0, int(code) - 127);
    case DType::kBF16: {  // the top half of an f32
      const uint32_t u = code << 16;
      float f;
      memcpy(&f, &u, 4);
      return double(f);
    }
    default: return std::nan("");
  }
}
bool spec_signed_nan(DType t) {
  for (const FormatSpec& f : kSpecs)
    if (f.type == t) return !f.fnuz;
  return t == DType::kBF16;
}

// The GPU kernels' division by a launch's constant (backends/gpu/plan.h): every divisor up to
// 4096 and around every power of two, against numerators at and around multiples of the divisor,
// the ends of the range and a random sample.
TEST_CASE("math: DivU32 equals integer division", "[math]") {
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int b = 12; b < 32; ++b)
    for (int64_t k = -2; k <= 2; ++k) divisors.push_back(uint32_t((int64_t(1) << b) + k));
  divisors.push_back(0xFFFFFFFFu);
  divisors.push_back(0xFFFFFFFEu);
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  const auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return uint32_t(rng >> 16);
  };
  int64_t bad = 0;
  for (const uint32_t d : divisors) {
    const gpu::DivU32 q = gpu::DivU32::of(d);
    const auto check = [&](uint64_t n) {
      if (n > 0xFFFFFFFFull) return;
      if (q.div(uint32_t(n)) != uint32_t(n) / d) ++bad;
    };
    for (uint64_t n = 0; n < 64; ++n) check(n);
    for (uint64_t k = 1; k < 64; ++k)
      for (int64_t e = -1; e <= 1; ++e) check(uint64_t(int64_t(k * d) + e));
    for (uint64_t k = 0xFFFFFFFFull / d; k + 2 > 0xFFFFFFFFull / d && k > 0; --k)
      for (int64_t e = -1; e <= 1; ++e) check(uint64_t(int64_t(k * d) + e));
    for (uint64_t n = 0xFFFFFFFFull - 64; n <= 0xFFFFFFFFull; ++n) check(n);
    for (int i = 0; i < 256; ++i) check(next());
  }
  CHECK(bad == 0);
}

TEST_CASE("math: the spec's values of known codes", "[math]") {
  CHECK(spec_value_of(DType::k_f8e4m3fn, 0x7E) == 448.0);
  CHECK(spec_value_of(DType::k_f8e4m3fn, 0x01) == std::ldexp(1.0, -9));
  CHECK(std::isnan(spec_value_of(DType::k_f8e4m3fn, 0x7F)));
  CHECK(spec_value_of(DType::k_f8e4m3fnuz, 0x7F) == 240.0);
  CHECK(std::isnan(spec_value_of(DType::k_f8e4m3fnuz, 0x80)));
  CHECK(spec_value_of(DType::k_f8e4m3, 0x77) == 240.0);
  CHECK(std::isinf(spec_value_of(DType::k_f8e4m3, 0x78)));
  CHECK(spec_value_of(DType::k_f8e5m2, 0x7B) == 57344.0);
  CHECK(spec_value_of(DType::k_f8e5m2fnuz, 0x7F) == 57344.0);
  CHECK(spec_value_of(DType::k_f4e2m1, 0x7) == 6.0);
  CHECK(spec_value_of(DType::k_f4e2m1, 0x9) == -0.5);
  CHECK(spec_value_of(DType::kF16, 0x7BFF) == 65504.0);
  CHECK(spec_value_of(DType::kE8M0, 0) == std::ldexp(1.0, -127));
  CHECK(spec_value_of(DType::kI8, 0x80) == -128.0);
}

TEST_CASE("decoders: every code, the shared math and fusednorm_cast on every target, equal the spec",
          "[math][cpu]") {
  for (const auto& d : kDTypes) {
    if (d.type == DType::kF32) continue;
    const int64_t n = d.bits == 16 ? 65536 : d.bits == 8 ? 256 : 16;
    const bool signed_nan = spec_signed_nan(d.type);
    for (int64_t c = 0; c < n; ++c)
      if (!same_value(decode(d.type, uint32_t(c)), spec_value_of(d.type, uint32_t(c)), signed_nan))
        FAIL_CHECK(d.name << " code " << c << ": the shared decoder gives " << decode(d.type, uint32_t(c))
                          << ", the spec " << spec_value_of(d.type, uint32_t(c)));
    HostTensor src(d.type, {n});
    for (int64_t c = 0; c < n; ++c) src.set_code(0, c, uint32_t(c));
    for_each_target([&](int64_t) {
      HostTensor dst(DType::kF32, {n});
      REQUIRE(fusednorm_cast(src.dl(), dst.dl(), nullptr, nullptr) == FUSEDNORM_SUCCESS);
      for (int64_t c = 0; c < n; ++c) {
        if (!same_value(dst.get(0, c), spec_value_of(d.type, uint32_t(c)), signed_nan))
          FAIL_CHECK(d.name << " code " << c << ": cast gives 0x" << std::hex << dst.code(0, c) << ", the spec "
                            << spec_value_of(d.type, uint32_t(c)));
        // The vector loaders give the shared decoder's bits, NaN payloads and quiet bits included
        // (the f16 loader's hardware conversion, which quiets signaling NaNs, is mended).
        if (dst.code(0, c) != math::bits_of(decode(d.type, uint32_t(c))))
          FAIL_CHECK(d.name << " code " << c << ": cast gives 0x" << std::hex << dst.code(0, c)
                            << ", the shared decoder 0x" << math::bits_of(decode(d.type, uint32_t(c))));
      }
    });
  }
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
