// The rotation of mla_rope_rmsnorm_quant (docs/numerics.md §5), host and device, no vendor
// header: every backend rotates a pair with this function or reproduces it exactly (the CPU's
// Highway path lane by lane).
#pragma once

#include "math/quant_math.h"

namespace fusednorm {
namespace math {

// One pair (re, im) rotated by (c, s):
//   re' = re·c − im·s,  im' = re·s + im·c
// two rounded products, then one rounded addition (no fma); re·c − im·s is re·c + (−(im·s)),
// the same correctly rounded result.
struct RopePair {
  float re, im;
};
FN_HD RopePair rope_rotate(float re, float im, float c, float s) {
  RopePair r;
  r.re = add_rn(mul_rn(re, c), -mul_rn(im, s));
  r.im = add_rn(mul_rn(re, s), mul_rn(im, c));
  return r;
}

// Element indices of pair j of a rope vector of R elements: (2j, 2j+1) interleaved, or
// (j, j + R/2) half-split ("neox"). Its cos and sin are at 2j and 2j+1 of the table row either way.
FN_HD int64_t rope_re_index(int64_t j, int64_t r, bool neox) { return neox ? j : 2 * j; }
FN_HD int64_t rope_im_index(int64_t j, int64_t r, bool neox) { return neox ? j + r / 2 : 2 * j + 1; }

}  // namespace math
}  // namespace fusednorm
