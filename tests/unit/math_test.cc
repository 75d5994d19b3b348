// The shared math on known values (from the format definitions in numerics.md §1), and every
// decoder over all its codes through the public API (fusednorm_cast T -> f32) on every target.
#include <math.h>

#include <catch2/catch.hpp>

#include "common/targets.h"
#include "common/test_tensor.h"
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

TEST_CASE("decoders: every code, through fusednorm_cast, on every target", "[math][cpu]") {
  for (const auto& d : kDTypes) {
    if (d.type == DType::kF32) continue;
    const int64_t n = d.bits == 16 ? 65536 : d.bits == 8 ? 256 : 16;
    HostTensor src(d.type, {n});
    for (int64_t c = 0; c < n; ++c) src.set_code(0, c, uint32_t(c));
    for_each_target([&](int64_t) {
      HostTensor dst(DType::kF32, {n});
      REQUIRE(fusednorm_cast(src.dl(), dst.dl(), nullptr, nullptr) == FUSEDNORM_SUCCESS);
      for (int64_t c = 0; c < n; ++c) {
        const uint32_t want = bits_of(decode(d.type, uint32_t(c)));
        if (dst.code(0, c) != want) FAIL_CHECK(d.name << " code " << c << ": 0x" << std::hex << dst.code(0, c) << " != 0x" << want);
      }
    });
  }
}

}  // namespace
}  // namespace test
}  // namespace fusednorm
