// fusednorm's element types and their DLPack codes: the one mapping used by validation, the
// backends, the tests and the benchmark.
#pragma once

#include <stdint.h>

#include "fusednorm/fusednorm.h"
#include "math/quant_math.h"

namespace fusednorm {

enum class DType : int {
  kF32, kF16, kBF16, kI8,
#define FN_MINIFLOAT(name, ...) k_##name,
#include "math/formats.inc"
#undef FN_MINIFLOAT
  kE8M0,
  kInvalid
};

struct DTypeInfo {
  DType type;
  const char* name;
  uint8_t dl_code;
  uint8_t bits;
};

inline constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "f32", kDLFloat, 32},
    {DType::kF16, "f16", kDLFloat, 16},
    {DType::kBF16, "bf16", kDLBfloat, 16},
    {DType::kI8, "int8", kDLInt, 8},
#define FN_MINIFLOAT(name, dl, e, m, ...) {DType::k_##name, #name, uint8_t(dl), uint8_t(1 + e + m)},
#include "math/formats.inc"
#undef FN_MINIFLOAT
    {DType::kE8M0, "e8m0", kDLFloat8_e8m0fnu, 8},
};

inline const char* dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  return "invalid";
}

inline int dtype_bits(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.bits;
  return 0;
}

// DLDataType -> DType (lanes must be 1); kInvalid if fusednorm has no such type.
inline DType dtype_from_dl(DLDataType t) {
  if (t.lanes != 1) return DType::kInvalid;
  for (const auto& d : kDTypes)
    if (d.dl_code == t.code && d.bits == t.bits) return d.type;
  return DType::kInvalid;
}

inline DLDataType dl_from_dtype(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return DLDataType{d.dl_code, d.bits, 1};
  return DLDataType{0, 0, 0};
}

inline bool is_input_dtype(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// The group sizes of DYNAMIC_GROUP scales: the one list that validation, the reference, the
// backends' instantiations, the tests and the benchmark use.
inline constexpr int64_t kGroupSizes[] = {32, 64, 128};
inline bool is_group_size(int64_t g) {
  for (int64_t s : kGroupSizes)
    if (s == g) return true;
  return false;
}

// The dtypes of dynamic scales, each with the shared math's ScaleType (the one mapping).
struct ScaleDTypeInfo {
  DType type;
  math::ScaleType scale_type;
};
inline constexpr ScaleDTypeInfo kScaleDTypes[] = {
    {DType::kF32, math::ScaleType::kF32},
    {DType::kF16, math::ScaleType::kF16},
    {DType::kBF16, math::ScaleType::kBF16},
    {DType::kE8M0, math::ScaleType::kE8M0},
};
// false when t is not a dynamic scale dtype.
inline bool scale_type_of(DType t, math::ScaleType* out) {
  for (const auto& s : kScaleDTypes)
    if (s.type == t) {
      *out = s.scale_type;
      return true;
    }
  return false;
}
inline DType dtype_of(math::ScaleType st) {
  for (const auto& s : kScaleDTypes)
    if (s.scale_type == st) return s.type;
  return DType::kInvalid;
}
inline bool is_quant_dtype(DType t) {
  return t == DType::kI8 || (t >= DType::k_f8e4m3fn && t <= DType::k_f8e5m2fnuz);
}

}  // namespace fusednorm
