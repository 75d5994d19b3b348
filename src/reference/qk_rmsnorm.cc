// The scalar reference of qk_rmsnorm (docs/numerics.md §5): stats, apply and the fused form,
// one element at a time over the shared math, in the canonical order.
#include <vector>

#include "core/elements.h"
#include "core/error.h"
#include "core/validate.h"
#include "reference/reference.h"

namespace fusednorm {
namespace reference {

using namespace math;

namespace {

// out[i] = rn((x_i * inv) * (w_i + offset)) over one group of a row (w: the group's weights);
// FP8 outputs: enc(y * rcp), rcp = 1 / the side's static scale.
void apply_group(const QkRmsnormCall& c, const QkSide& s, int j, const std::vector<float>& x, int64_t begin,
                 const char* w, float inv, char* out) {
  const bool fp8 = c.out_type != c.in_type;
  const float rcp = fp8 ? qk_out_rcp(c, j) : 1.0f;
  for (int64_t i = 0; i < s.group; ++i) {
    const float g = add_rn(decode(s.w_type, load_code(s.w_type, w, i)), c.weight_offset);
    const float y = norm_apply(x[size_t(begin + i)], inv, g);
    store_code(c.out_type, out, begin + i, encode<false>(c.out_type, fp8 ? mul_rn(y, rcp) : y));
  }
}

float load_stat(const QkRmsnormCall& c, int64_t r, int j) {
  return decode(DType::kF32, load_code(DType::kF32, row_ptr(c.lead, c.stats, r), j));
}

}  // namespace

void qk_rmsnorm_rows(const QkRmsnormCall& c, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int j = 0; j < 2; ++j) {
      const QkSide& s = j == 0 ? c.q : c.k;
      const char* in = row_ptr(c.lead, s.in, r);
      std::vector<float> x(size_t(s.width));
      for (int64_t i = 0; i < s.width; ++i) x[size_t(i)] = decode(c.in_type, load_code(c.in_type, in, i));
      if (c.kind == QkKind::kStats) {
        store_code(DType::kF32, row_ptr(c.lead, c.stats, r), j, encode<false>(DType::kF32, sum_squares(x.data(), s.width)));
        continue;
      }
      char* out = row_ptr(c.lead, s.out, r);
      for (int64_t b = 0; b < s.width; b += s.group) {
        const float stat = c.kind == QkKind::kApply ? load_stat(c, r, j) : sum_squares(x.data() + b, s.group);
        apply_group(c, s, j, x, b, s.weight, qk_inv_rms(c, s, stat), out);
      }
    }
  }
}

namespace {

fusednorm_status run_qk(QkKind kind, const DLTensor* q, const DLTensor* k, const DLTensor* stats,
                        const DLTensor* q_weight, const DLTensor* k_weight, DLTensor* q_out, DLTensor* k_out,
                        const DLTensor* out_scales, const fusednorm_qk_rmsnorm_options* options) {
  QkRmsnormCall call;
  CallDevice dev;
  const fusednorm_status st =
      validate_qk_rmsnorm(kind, q, k, stats, q_weight, k_weight, q_out, k_out, out_scales, options, &call, &dev);
  if (st != FUSEDNORM_SUCCESS) return st;
  if (dev.type != kDLCPU) return fail(FUSEDNORM_UNSUPPORTED, "the reference runs on CPU tensors only");
  qk_rmsnorm_rows(call, 0, call.lead.rows);
  return FUSEDNORM_SUCCESS;
}

}  // namespace

fusednorm_status qk_rmsnorm_stats(const DLTensor* q, const DLTensor* k, DLTensor* stats,
                                  const fusednorm_qk_rmsnorm_options* options) {
  return run_qk(QkKind::kStats, q, k, stats, nullptr, nullptr, nullptr, nullptr, nullptr, options);
}

fusednorm_status qk_rmsnorm_apply(const DLTensor* q, const DLTensor* k, const DLTensor* stats,
                                  const DLTensor* q_weight, const DLTensor* k_weight, DLTensor* q_out,
                                  DLTensor* k_out, const DLTensor* out_scales,
                                  const fusednorm_qk_rmsnorm_options* options) {
  return run_qk(QkKind::kApply, q, k, stats, q_weight, k_weight, q_out, k_out, out_scales, options);
}

fusednorm_status qk_rmsnorm(const DLTensor* q, const DLTensor* k, const DLTensor* q_weight,
                            const DLTensor* k_weight, DLTensor* q_out, DLTensor* k_out, const DLTensor* out_scales,
                            const fusednorm_qk_rmsnorm_options* options) {
  return run_qk(QkKind::kFused, q, k, nullptr, q_weight, k_weight, q_out, k_out, out_scales, options);
}

}  // namespace reference
}  // namespace fusednorm
