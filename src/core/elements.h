// Scalar element access by run-time dtype, built on the shared math: decode any fusednorm dtype
// to f32 and encode f32 to any dtype. Host code only (the reference, scalar tails, tests); decode,
// encode and store_code are always inlined (FN_HD: the CPU backend's AVX code calls them in its
// tails and must not call legacy-SSE code, tests/cpu/sse_transitions.py).
#pragma once

#include <string.h>

#include "core/dtype.h"
#include "math/quant_math.h"

namespace fusednorm {

// Raw code of element i of a row (f4e2m1: the nibble).
inline uint32_t load_code(DType t, const char* row, int64_t i) {
  switch (dtype_bits(t)) {
    case 32: { uint32_t u; memcpy(&u, row + 4 * i, 4); return u; }
    case 16: { uint16_t u; memcpy(&u, row + 2 * i, 2); return u; }
    case 8: return uint8_t(row[i]);
    default: return (uint8_t(row[i / 2]) >> (4 * (i & 1))) & 0xFu;
  }
}

FN_HD void store_code(DType t, char* row, int64_t i, uint32_t code) {
  switch (dtype_bits(t)) {
    case 32: memcpy(row + 4 * i, &code, 4); break;
    case 16: { const uint16_t u = uint16_t(code); memcpy(row + 2 * i, &u, 2); break; }
    case 8: row[i] = char(code); break;
    default: {
      uint8_t& b = reinterpret_cast<uint8_t&>(row[i / 2]);
      const int sh = 4 * int(i & 1);
      b = uint8_t((b & ~(0xFu << sh)) | ((code & 0xFu) << sh));
    }
  }
}

FN_HD float decode(DType t, uint32_t c) {
  switch (t) {
    case DType::kF32: return math::decode_f32(c);
    case DType::kF16: return math::decode_f16(c);
    case DType::kBF16: return math::decode_bf16(c);
    case DType::kI8: return math::decode_int8(c);
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return math::name::decode(c);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kE8M0: return math::decode_e8m0(c);
    default: return 0.0f;
  }
}

// kKeepNanSign: see MiniFloat::encode. e8m0_up picks enc_e8m0_up over enc_e8m0_rn.
template <bool kKeepNanSign>
FN_HD uint32_t encode(DType t, float v, bool e8m0_up = false) {
  switch (t) {
    case DType::kF32: return math::encode_f32<kKeepNanSign>(v);
    case DType::kF16: return math::encode_f16<kKeepNanSign>(v);
    case DType::kBF16: return math::encode_bf16<kKeepNanSign>(v);
    case DType::kI8: return math::encode_int8(v);
#define FN_MINIFLOAT(name, ...) \
  case DType::k_##name: return math::name::encode<kKeepNanSign>(v);
#include "math/formats.inc"
#undef FN_MINIFLOAT
    case DType::kE8M0: return e8m0_up ? math::encode_e8m0_up(v) : math::encode_e8m0_rn(v);
    default: return 0;
  }
}

}  // namespace fusednorm
