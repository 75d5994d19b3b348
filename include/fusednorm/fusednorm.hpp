// fusednorm: the header-only C++ API over the C ABI (fusednorm.h). Failures throw
// fusednorm::Error, which carries the status and the library's message.
#ifndef FUSEDNORM_FUSEDNORM_HPP_
#define FUSEDNORM_FUSEDNORM_HPP_

#include <stdexcept>
#include <string>
#include <vector>

#include "fusednorm/fusednorm.h"

namespace fusednorm {

class Error : public std::runtime_error {
 public:
  Error(fusednorm_status status, const std::string& message)
      : std::runtime_error(std::string(fusednorm_status_string(status)) + ": " + message), status_(status) {}
  fusednorm_status status() const noexcept { return status_; }

 private:
  fusednorm_status status_;
};

// Throws Error unless status is SUCCESS.
inline void check(fusednorm_status status) {
  if (status != FUSEDNORM_SUCCESS) throw Error(status, fusednorm_last_error());
}

// Options with the library's defaults (the C *_init functions), ready to adjust.
struct RmsnormQuantOptions : fusednorm_rmsnorm_quant_options {
  RmsnormQuantOptions() { fusednorm_rmsnorm_quant_options_init(this); }
};
struct CastOptions : fusednorm_cast_options {
  CastOptions() { fusednorm_cast_options_init(this); }
};
struct QkRmsnormOptions : fusednorm_qk_rmsnorm_options {
  QkRmsnormOptions() { fusednorm_qk_rmsnorm_options_init(this); }
};

inline std::string version() { return fusednorm_version(nullptr, nullptr, nullptr); }
inline std::string cpu_target() { return fusednorm_cpu_target(); }

inline fusednorm_backend_info query_backend(int32_t device_type) {
  fusednorm_backend_info info{};
  info.struct_size = sizeof info;
  check(fusednorm_query_backend(device_type, &info));
  return info;
}

// Every backend fusednorm knows, available or not (the detail says why not).
inline std::vector<fusednorm_backend_info> backends() {
  return {query_backend(kDLCPU), query_backend(kDLCUDA), query_backend(kDLROCM)};
}

// See fusednorm_cast in fusednorm.h.
inline void cast(const DLTensor& src, DLTensor& dst, const CastOptions& options = CastOptions(),
                 void* stream = nullptr) {
  check(fusednorm_cast(&src, &dst, &options, stream));
}

// See fusednorm_rmsnorm_quant in fusednorm.h. residual, weight and scales may be nullptr where
// the C API allows NULL.
inline void rmsnorm_quant(const DLTensor& input, DLTensor* residual, const DLTensor* weight, DLTensor& output,
                          DLTensor* scales, const RmsnormQuantOptions& options = RmsnormQuantOptions(),
                          void* stream = nullptr) {
  check(fusednorm_rmsnorm_quant(&input, residual, weight, &output, scales, &options, stream));
}

// qk_rmsnorm (see fusednorm.h): statistics, apply from all-reduced statistics, and the fused
// single-device form. out_scales: nullptr, or [2] f32 with FP8 outputs.
inline void qk_rmsnorm_stats(const DLTensor& q, const DLTensor& k, DLTensor& stats,
                             const QkRmsnormOptions& options = QkRmsnormOptions(), void* stream = nullptr) {
  check(fusednorm_qk_rmsnorm_stats(&q, &k, &stats, &options, stream));
}
inline void qk_rmsnorm_apply(const DLTensor& q, const DLTensor& k, const DLTensor& stats, const DLTensor& q_weight,
                             const DLTensor& k_weight, DLTensor& q_out, DLTensor& k_out, const DLTensor* out_scales,
                             const QkRmsnormOptions& options, void* stream = nullptr) {
  check(fusednorm_qk_rmsnorm_apply(&q, &k, &stats, &q_weight, &k_weight, &q_out, &k_out, out_scales, &options,
                                   stream));
}
inline void qk_rmsnorm(const DLTensor& q, const DLTensor& k, const DLTensor& q_weight, const DLTensor& k_weight,
                       DLTensor& q_out, DLTensor& k_out, const DLTensor* out_scales = nullptr,
                       const QkRmsnormOptions& options = QkRmsnormOptions(), void* stream = nullptr) {
  check(fusednorm_qk_rmsnorm(&q, &k, &q_weight, &k_weight, &q_out, &k_out, out_scales, &options, stream));
}

// ---------------------------------------------------------------- rmsnorm_fp4
struct RmsnormFp4Options : fusednorm_rmsnorm_fp4_options {
  RmsnormFp4Options() { fusednorm_rmsnorm_fp4_options_init(this); }
};
struct DequantizeFp4Options : fusednorm_dequantize_fp4_options {
  DequantizeFp4Options() { fusednorm_dequantize_fp4_options_init(this); }
};

// See fusednorm_rmsnorm_fp4 in fusednorm.h. residual, weight and global_scale may be nullptr where
// the C API allows NULL.
inline void rmsnorm_fp4(const DLTensor& input, DLTensor* residual, const DLTensor* weight, DLTensor& output,
                        DLTensor& scales, const DLTensor* global_scale = nullptr,
                        const RmsnormFp4Options& options = RmsnormFp4Options(), void* stream = nullptr) {
  check(fusednorm_rmsnorm_fp4(&input, residual, weight, &output, &scales, global_scale, &options, stream));
}
// See fusednorm_dequantize_fp4 in fusednorm.h.
inline void dequantize_fp4(const DLTensor& codes, const DLTensor& scales, const DLTensor* global_scale,
                           DLTensor& output, const DequantizeFp4Options& options = DequantizeFp4Options(),
                           void* stream = nullptr) {
  check(fusednorm_dequantize_fp4(&codes, &scales, global_scale, &output, &options, stream));
}
// Bytes of the swizzled scale tensor (fusednorm_fp4_swizzled_size).
inline int64_t fp4_swizzled_size(int64_t rows, int64_t h, int32_t format) {
  int64_t bytes = 0;
  check(fusednorm_fp4_swizzled_size(rows, h, format, &bytes));
  return bytes;
}

// ---------------------------------------------------------------- mla_rope_rmsnorm_quant
struct MlaRopeRmsnormQuantOptions : fusednorm_mla_rope_rmsnorm_quant_options {
  MlaRopeRmsnormQuantOptions() { fusednorm_mla_rope_rmsnorm_quant_options_init(this); }
};

// See fusednorm_mla_rope_rmsnorm_quant in fusednorm.h. q_out nullptr: q is rotated in place;
// exactly one of positions and cache_len; k_scale and invalid_tokens may be nullptr.
inline void mla_rope_rmsnorm_quant(DLTensor& q, DLTensor* q_out, const DLTensor& kv, const DLTensor& weight,
                                   const DLTensor& cos_sin, const DLTensor* positions, const DLTensor& row_offsets,
                                   const DLTensor* cache_len, const DLTensor& page_table, DLTensor& kv_cache,
                                   const DLTensor* k_scale = nullptr, DLTensor* invalid_tokens = nullptr,
                                   const MlaRopeRmsnormQuantOptions& options = MlaRopeRmsnormQuantOptions(),
                                   void* stream = nullptr) {
  check(fusednorm_mla_rope_rmsnorm_quant(&q, q_out, &kv, &weight, &cos_sin, positions, &row_offsets, cache_len,
                                         &page_table, &kv_cache, k_scale, invalid_tokens, &options, stream));
}

}  // namespace fusednorm

#endif  // FUSEDNORM_FUSEDNORM_HPP_
