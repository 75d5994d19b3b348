// The scalar reference of mla_rope_rmsnorm_quant: one element at a time over the shared math
// (math/rope_math.h, math/quant_math.h), in the order of docs/numerics.md §5.
#include <vector>

#include "core/elements.h"
#include "core/error.h"
#include "core/validate.h"
#include "math/rope_math.h"
#include "reference/reference.h"

namespace fusednorm {
namespace reference {

using namespace math;

namespace {

// The R elements of one rope vector rotated by table row `cs`, read whole before any is written
// (q may be rotated in place); out[i] = the rotated value of element i.
void rotate(const MlaCall& c, const char* x_row, const char* cs, float* out) {
  const int64_t r = c.rope;
  std::vector<float> x(size_t(r), 0.0f);
  for (int64_t i = 0; i < r; ++i) x[size_t(i)] = decode(c.in_type, load_code(c.in_type, x_row, i));
  for (int64_t j = 0; j < r / 2; ++j) {
    const int64_t i0 = rope_re_index(j, r, c.neox != 0), i1 = rope_im_index(j, r, c.neox != 0);
    const float co = decode(c.cs_type, load_code(c.cs_type, cs, 2 * j));
    const float si = decode(c.cs_type, load_code(c.cs_type, cs, 2 * j + 1));
    const RopePair p = rope_rotate(x[size_t(i0)], x[size_t(i1)], co, si);
    out[i0] = p.re;
    out[i1] = p.im;
  }
}

}  // namespace

void mla_rope_rmsnorm_quant_tokens(const MlaCall& c, int64_t t0, int64_t t1) {
  const int64_t l = c.rank, r = c.rope;
  const float ks = mla_k_scale(c);
  std::vector<float> x(static_cast<size_t>(l)), rot(static_cast<size_t>(r));
  for (int64_t t = t0; t < t1; ++t) {
    MlaSlot s;
    if (mla_locate(c, t, &s) != MlaLocate::kOk) continue;  // validated on the CPU: never
    const char* cs = c.cos_sin + s.pos * c.cs_stride;
    for (int64_t h = 0; h < c.heads; ++h) {
      rotate(c, c.q + t * c.q_stride_t + h * c.q_stride_h, cs, rot.data());
      char* out = c.q_out + t * c.qo_stride_t + h * c.qo_stride_h;
      for (int64_t i = 0; i < r; ++i) store_code(c.in_type, out, i, encode<false>(c.in_type, rot[size_t(i)]));
    }
    const char* kv = c.kv + t * c.kv_stride;
    char* dst = mla_cache_row(c, s);
    for (int64_t i = 0; i < l; ++i) x[size_t(i)] = decode(c.in_type, load_code(c.in_type, kv, i));
    const float inv = inv_rms(sum_squares(x.data(), l), length_f32(l), c.eps);
    for (int64_t i = 0; i < l; ++i) {
      const float g = add_rn(decode(c.w_type, load_code(c.w_type, c.weight, i)), c.weight_offset);
      store_code(c.cache_type, dst, i, encode<false>(c.cache_type, div_rn(norm_apply(x[size_t(i)], inv, g), ks)));
    }
    rotate(c, kv + l * (dtype_bits(c.in_type) / 8), cs, rot.data());
    for (int64_t i = 0; i < r; ++i)
      store_code(c.cache_type, dst, l + i, encode<false>(c.cache_type, div_rn(rot[size_t(i)], ks)));
  }
}

fusednorm_status mla_rope_rmsnorm_quant(DLTensor* q, DLTensor* q_out, const DLTensor* kv, const DLTensor* weight,
                                        const DLTensor* cos_sin, const DLTensor* positions,
                                        const DLTensor* row_offsets, const DLTensor* cache_len,
                                        const DLTensor* page_table, DLTensor* kv_cache, const DLTensor* k_scale,
                                        DLTensor* invalid_tokens,
                                        const fusednorm_mla_rope_rmsnorm_quant_options* options) {
  MlaCall call;
  CallDevice dev;
  const fusednorm_status st =
      validate_mla_rope_rmsnorm_quant(q, q_out, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table,
                                      kv_cache, k_scale, invalid_tokens, options, &call, &dev);
  if (st != FUSEDNORM_SUCCESS) return st;
  if (dev.type != kDLCPU) return fail(FUSEDNORM_UNSUPPORTED, "the reference runs on CPU tensors only");
  mla_rope_rmsnorm_quant_tokens(call, 0, call.tokens);
  return FUSEDNORM_SUCCESS;
}

}  // namespace reference
}  // namespace fusednorm
