// A complete rmsnorm_fp4 call (tensors + options) run through the public API or the scalar
// reference, with byte-exact comparison of every output buffer (guards included), and its
// dequantization. Shared by the CPU and GPU tests.
#pragma once

#include <math.h>

#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/rmsnorm_case.h"
#include "common/test_tensor.h"
#include "fusednorm/fusednorm.h"
#include "reference/reference.h"

namespace fusednorm {
namespace test {

struct Fp4Spec {
  DType in = DType::kBF16, w = DType::kBF16;
  int format = FUSEDNORM_FP4_NVFP4;
  bool swizzled = false;
  bool norm = true, residual = false;
  bool global_scale = false;  // NVFP4: pass a global scale tensor (else NULL: gs = 1)
  float gs = 1.0f;
  float eps = 1e-6f, weight_offset = 0.0f;
  bool uint8_views = false;  // output as uint8 [..., H/2], scales as uint8
  std::vector<int64_t> lead = {3};
  int64_t h = 64;
  int64_t row_pad = 0;  // extra elements between rows of input/residual/output (even)
  int misalign = 0;     // bytes, input/residual/weight

  int64_t block() const { return format == FUSEDNORM_FP4_NVFP4 ? 16 : 32; }
  int64_t rows() const {
    int64_t r = 1;
    for (auto d : lead) r *= d;
    return r;
  }
  DType scale_type() const { return format == FUSEDNORM_FP4_NVFP4 ? DType::k_f8e4m3fn : DType::kE8M0; }
  std::string describe() const {
    std::ostringstream s;
    s << (format == FUSEDNORM_FP4_NVFP4 ? "NVFP4" : "MXFP4") << (swizzled ? " swizzled" : " row-major")
      << " in=" << dtype_name(in) << " w=" << dtype_name(w) << " norm=" << norm << " residual=" << residual
      << " gs=" << (global_scale ? gs : 1.0f) << " eps=" << eps << " offset=" << weight_offset
      << " u8=" << uint8_views << " h=" << h << " lead=[";
    for (auto d : lead) s << d << ",";
    s << "] pad=" << row_pad << " misalign=" << misalign;
    return s.str();
  }
  fusednorm_rmsnorm_fp4_options options() const {
    fusednorm_rmsnorm_fp4_options o;
    fusednorm_rmsnorm_fp4_options_init(&o);
    o.norm = norm ? FUSEDNORM_NORM_RMS : FUSEDNORM_NORM_NONE;
    o.format = format;
    o.scale_layout = swizzled ? FUSEDNORM_FP4_SCALES_SWIZZLED : FUSEDNORM_FP4_SCALES_ROW_MAJOR;
    o.eps = eps;
    o.weight_offset = weight_offset;
    return o;
  }
  fusednorm_dequantize_fp4_options dequant_options() const {
    fusednorm_dequantize_fp4_options o;
    fusednorm_dequantize_fp4_options_init(&o);
    o.format = format;
    o.scale_layout = swizzled ? FUSEDNORM_FP4_SCALES_SWIZZLED : FUSEDNORM_FP4_SCALES_ROW_MAJOR;
    return o;
  }
};

// A uint8 view of an f4e2m1 or 8-bit scale tensor (what PyTorch's float4_e2m1fn_x2 / uint8
// storage exports): last dimension in bytes, strides in bytes.
struct ByteView {
  DLTensor dl{};
  std::vector<int64_t> shape, strides;
  explicit ByteView(DLTensor* t) {
    const int bits = t->dtype.bits;
    dl = *t;
    dl.dtype = DLDataType{kDLUInt, 8, 1};
    shape.assign(t->shape, t->shape + t->ndim);
    strides.assign(t->strides, t->strides + t->ndim);
    if (bits == 4) {
      shape.back() /= 2;
      for (size_t i = 0; i + 1 < strides.size(); ++i) strides[i] /= 2;
    }
    dl.shape = shape.data();
    dl.strides = strides.data();
  }
};

struct Fp4Tensors {
  Fp4Spec spec;
  std::unique_ptr<HostTensor> input, residual, weight, output, scales, gs;
  explicit Fp4Tensors(const Fp4Spec& s) : spec(s) {
    std::vector<int64_t> shape = s.lead;
    shape.push_back(s.h);
    input = std::make_unique<HostTensor>(s.in, shape, s.row_pad, s.misalign);
    if (s.residual) residual = std::make_unique<HostTensor>(s.in, shape, s.row_pad, s.misalign);
    weight = std::make_unique<HostTensor>(s.w, std::vector<int64_t>{s.h}, 0, s.misalign);
    output = std::make_unique<HostTensor>(DType::k_f4e2m1, shape, s.row_pad);
    if (s.swizzled) {
      int64_t bytes = 0;
      fusednorm_fp4_swizzled_size(s.rows(), s.h, s.format, &bytes);
      scales = std::make_unique<HostTensor>(s.scale_type(), std::vector<int64_t>{bytes});
    } else {
      std::vector<int64_t> sshape = s.lead;
      sshape.push_back(s.h / s.block());
      scales = std::make_unique<HostTensor>(s.scale_type(), sshape);
    }
    gs = std::make_unique<HostTensor>(DType::kF32, std::vector<int64_t>{1});
    gs->set(0, 0, s.gs);
  }
  std::unique_ptr<Fp4Tensors> clone_inputs() const {
    auto c = std::make_unique<Fp4Tensors>(spec);
    c->input->copy_from(*input);
    if (residual) c->residual->copy_from(*residual);
    c->weight->copy_from(*weight);
    return c;
  }
  // Rows ~ N(0, sigma), sigma 2^-12 .. 2^12 by row; weights ~ 1 + N(0, 0.1). kind 1: uniform;
  // 2: sparse (9 of 10 zero); 3: constant rows.
  void fill_random(std::mt19937_64& rng, int kind = 0) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    std::uniform_int_distribution<int> mag(-12, 12), tenth(0, 9);
    for (int64_t r = 0; r < input->rows(); ++r) {
      const float sigma = ldexpf(1.0f, mag(rng));
      const float c = nd(rng) * sigma;
      for (int64_t i = 0; i < spec.h; ++i) {
        float v = kind == 1 ? ud(rng) * sigma : kind == 3 ? c : nd(rng) * sigma;
        if (kind == 2 && tenth(rng) != 0) v = 0.0f;
        input->set(r, i, v);
        if (residual) residual->set(r, i, nd(rng) * sigma);
      }
    }
    for (int64_t i = 0; i < spec.h; ++i) weight->set(0, i, 1.0f + 0.1f * nd(rng));
  }
  template <class Fn>
  fusednorm_status call(Fn&& fn) {
    const auto o = spec.options();
    DLTensor* out = output->dl();
    DLTensor* sc = scales->dl();
    ByteView out_u8(out), sc_u8(sc);
    if (spec.uint8_views) {
      out = &out_u8.dl;
      sc = &sc_u8.dl;
    }
    return fn(input->dl(), residual ? residual->dl() : nullptr, spec.norm ? weight->dl() : nullptr, out, sc,
              spec.global_scale ? gs->dl() : nullptr, &o);
  }
  fusednorm_status run_library(void* stream = nullptr) {
    return call([&](auto... a) { return fusednorm_rmsnorm_fp4(a..., stream); });
  }
  fusednorm_status run_reference() {
    return call([](auto... a) { return reference::rmsnorm_fp4(a...); });
  }
};

inline std::string compare_fp4(Fp4Tensors& a, Fp4Tensors& b) {
  // Every tensor that differs (whether the residual's sums differ too locates a failure).
  std::string d = first_difference("output", *a.output, *b.output);
  join_difference(d, first_difference("scales", *a.scales, *b.scales));
  if (a.residual) join_difference(d, first_difference("residual", *a.residual, *b.residual));
  return d;
}

// e2m1 values of the 16 codes (the format table: magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6).
inline double e2m1_value(uint32_t code) {
  static const double kMag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (code & 8 ? -1.0 : 1.0) * kMag[code & 7];
}

// The scale code of (row, block) as the layout of numerics.md §3.2 places it, written as loops
// over the tile structure (independently of math::fp4_swizzled_offset).
inline uint32_t fp4_scale_code(Fp4Tensors& t, int64_t row, int64_t k) {
  if (!t.spec.swizzled) return t.scales->code(row, k);
  const int64_t tiles = (t.spec.h / t.spec.block() + 3) / 4;
  const int64_t tile = (row / 128) * tiles + k / 4;     // 128 x 4 tiles, row-major over tiles
  const int64_t in_tile = (row % 32) * 16 + ((row % 128) / 32) * 4 + k % 4;
  return t.scales->code(0, tile * 512 + in_tile);
}

}  // namespace test
}  // namespace fusednorm
