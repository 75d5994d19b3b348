// A complete rmsnorm_quant call (tensors + options) that can be run through the public API or
// through the scalar reference, with byte-exact comparison of every output buffer. Shared by
// the CPU tests (and, later, the GPU tests).
#pragma once

#include <math.h>

#include <algorithm>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "common/test_tensor.h"
#include "fusednorm/fusednorm.h"
#include "core/validate.h"
#include "reference/reference.h"

namespace fusednorm {
namespace test {

struct CaseSpec {
  DType in = DType::kBF16, w = DType::kBF16, out = DType::k_f8e4m3fn;
  DType scale = DType::kF32;
  int mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
  int placement = FUSEDNORM_SCALES_TENSOR;
  bool col_major_scales = false;
  int64_t group = 128;
  bool residual = false;
  bool norm = true;
  float eps = 1e-6f, weight_offset = 0.0f, scale_ub = INFINITY, min_scale = 0.0f, qmax = 0.0f;
  std::vector<int64_t> lead = {3};  // leading dims
  int64_t h = 64;
  int64_t row_pad = 0;  // extra elements between rows of input/residual/output
  int misalign = 0;     // bytes
  float static_scale = 0.05f;

  std::string describe() const {
    std::ostringstream s;
    s << "in=" << dtype_name(in) << " w=" << dtype_name(w) << " out=" << dtype_name(out) << " mode=" << mode
      << " placement=" << placement << " scale=" << dtype_name(scale) << (col_major_scales ? " col-major" : "")
      << " group=" << group << " residual=" << residual << " norm=" << norm << " eps=" << eps
      << " offset=" << weight_offset << " ub=" << scale_ub << " min_scale=" << min_scale << " qmax=" << qmax
      << " h=" << h << " lead=[";
    for (auto d : lead) s << d << ",";
    s << "] pad=" << row_pad << " misalign=" << misalign;
    return s.str();
  }
  fusednorm_rmsnorm_quant_options options() const {
    fusednorm_rmsnorm_quant_options o;
    fusednorm_rmsnorm_quant_options_init(&o);
    o.norm = norm ? FUSEDNORM_NORM_RMS : FUSEDNORM_NORM_NONE;
    o.scale_mode = mode;
    o.scale_placement = placement;
    o.group_size = group;
    o.eps = eps;
    o.weight_offset = weight_offset;
    o.scale_ub = scale_ub;
    o.min_scale = min_scale;
    o.qmax = qmax;
    return o;
  }
  bool packed() const { return placement == FUSEDNORM_SCALES_PACKED_ROW_END; }
  int64_t groups() const { return mode == FUSEDNORM_SCALE_DYNAMIC_GROUP ? h / group : 1; }
};

// The tensors of one call. Inputs are filled by the caller (or fill_random); outputs start as
// poison (0xA5), so bytes a backend must not write are compared too.
struct CaseTensors {
  CaseSpec spec;
  std::unique_ptr<HostTensor> input, residual, weight, output, scales;
  std::vector<int64_t> scale_shape, scale_strides;

  explicit CaseTensors(const CaseSpec& s) : spec(s) {
    std::vector<int64_t> shape = s.lead;
    shape.push_back(s.h);
    input = std::make_unique<HostTensor>(s.in, shape, s.row_pad, s.misalign);
    if (s.residual) residual = std::make_unique<HostTensor>(s.in, shape, s.row_pad, s.misalign);
    weight = std::make_unique<HostTensor>(s.w, std::vector<int64_t>{s.h}, 0, s.misalign);
    std::vector<int64_t> out_shape = s.lead;
    out_shape.push_back(s.h + (s.packed() ? 4 : 0));
    output = std::make_unique<HostTensor>(s.out, out_shape, s.row_pad, s.misalign ? 1 : 0);
    if (s.mode == FUSEDNORM_SCALE_STATIC) {
      scales = std::make_unique<HostTensor>(DType::kF32, std::vector<int64_t>{1});
      scales->set(0, 0, s.static_scale);
    } else if (!s.packed()) {
      std::vector<int64_t> sshape = s.lead;
      sshape.push_back(s.groups());
      scales = std::make_unique<HostTensor>(s.scale, sshape);
      if (s.col_major_scales) {
        // [rows, groups] stored as [groups, ld] with ld = rows + 3: strides {1, ld} on a
        // flattened 2-D view of the leading dims.
        int64_t rows = 1;
        for (auto d : s.lead) rows *= d;
        const int64_t ld = rows + 3;
        scales = std::make_unique<HostTensor>(s.scale, std::vector<int64_t>{s.groups(), ld});
        scale_shape = s.lead;
        scale_shape.push_back(s.groups());
        scale_strides.assign(scale_shape.size(), 0);
        int64_t st = 1;
        for (int i = int(s.lead.size()) - 1; i >= 0; --i) {
          scale_strides[size_t(i)] = st;
          st *= s.lead[size_t(i)];
        }
        scale_strides.back() = ld;
        DLTensor* d = scales->dl();
        d->ndim = int(scale_shape.size());
        d->shape = scale_shape.data();
        d->strides = scale_strides.data();
      }
    }
  }

  // Same spec and same input bytes; fresh poisoned outputs.
  std::unique_ptr<CaseTensors> clone_inputs() const {
    auto c = std::make_unique<CaseTensors>(spec);
    c->input->copy_from(*input);
    if (residual) c->residual->copy_from(*residual);
    c->weight->copy_from(*weight);
    return c;
  }

  // Inputs ~ N(0, sigma) with sigma varying by row; weights ~ 1 + N(0, 0.1).
  void fill_random(std::mt19937_64& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> mag(-12, 12);
    for (int64_t r = 0; r < input->rows(); ++r) {
      const float sigma = ldexpf(1.0f, mag(rng));
      for (int64_t i = 0; i < spec.h; ++i) {
        input->set(r, i, nd(rng) * sigma);
        if (residual) residual->set(r, i, nd(rng) * sigma);
      }
    }
    for (int64_t i = 0; i < spec.h; ++i) weight->set(0, i, 1.0f + 0.1f * nd(rng));
  }

  DLTensor* res_dl() { return residual ? residual->dl() : nullptr; }
  DLTensor* w_dl() { return spec.norm ? weight->dl() : nullptr; }
  DLTensor* s_dl() { return scales ? scales->dl() : nullptr; }

  fusednorm_status run_library() {
    const auto o = spec.options();
    return fusednorm_rmsnorm_quant(input->dl(), res_dl(), w_dl(), output->dl(), s_dl(), &o, nullptr);
  }
  fusednorm_status run_reference() {
    const auto o = spec.options();
    return reference::rmsnorm_quant(input->dl(), res_dl(), w_dl(), output->dl(), s_dl(), &o);
  }
};

// The value lists and option combinations the CPU and GPU tests sweep. The GPU kernel shapes they
// reach: 8-element vectors (S <= 4), 4-element vectors with whole steps (5120, 7168: S = 5, 7;
// 24576, 32768: 1024 threads a row) and with a partial step (1001, 8193), rows of one thread (7).
inline constexpr int64_t kTestHs[] = {1,    7,    8,    9,    15,   16,    17,    97,   128,
                                      333,  513,  1001, 4096, 5120, 7168,  8192,  8193, 16384,
                                      24576, 32768};
inline constexpr DType kTestIns[] = {DType::kF32, DType::kF16, DType::kBF16};
inline constexpr DType kTestOuts[] = {DType::k_f8e4m3fn, DType::k_f8e4m3fnuz, DType::k_f8e4m3,
                                      DType::k_f8e5m2,   DType::k_f8e5m2fnuz, DType::kI8};

// Every (mode, scale dtype, placement, group) the API offers.
inline std::vector<CaseSpec> scale_variants() {
  std::vector<CaseSpec> v;
  CaseSpec s;
  s.mode = FUSEDNORM_SCALE_STATIC;
  v.push_back(s);
  s.mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
  s.placement = FUSEDNORM_SCALES_PACKED_ROW_END;
  v.push_back(s);
  s.placement = FUSEDNORM_SCALES_TENSOR;
  for (int mode : {FUSEDNORM_SCALE_DYNAMIC_ROW, FUSEDNORM_SCALE_DYNAMIC_GROUP})
    for (int64_t g : kGroupSizes) {
      if (mode == FUSEDNORM_SCALE_DYNAMIC_ROW && g != 128) continue;
      for (DType st : {DType::kF32, DType::kF16, DType::kBF16, DType::kE8M0})
        for (bool col : {false, true}) {
          s.mode = mode;
          s.group = g;
          s.scale = st;
          s.col_major_scales = col;
          v.push_back(s);
        }
    }
  return v;
}

// Calls body(spec) for every input dtype x output format x scale variant x {residual} x {norm},
// with the secondary options (weight dtype, offset, eps, scale_ub, min_scale, qmax, row padding,
// misalignment, leading dims lead_a or lead_b) drawn from rng (the seed replays them) and one H
// per combination, cycling through kTestHs. Returns the number of combinations.
template <class Body>
int64_t for_each_option_combination(std::mt19937_64& rng, const std::vector<int64_t>& lead_a,
                                    const std::vector<int64_t>& lead_b, Body&& body) {
  std::uniform_int_distribution<int> coin(0, 1), pick(0, 7);
  int64_t cases = 0;
  for (DType in : kTestIns)
    for (DType out : kTestOuts)
      for (const CaseSpec& v : scale_variants())
        for (int flags = 0; flags < 4; ++flags) {
          CaseSpec s = v;
          s.in = in;
          s.w = kTestIns[size_t(pick(rng)) % 3];
          s.out = out;
          s.residual = flags & 1;
          s.norm = (flags & 2) == 0;
          s.weight_offset = coin(rng) ? 1.0f : 0.0f;
          s.eps = coin(rng) ? 1e-6f : 0.0f;
          s.scale_ub = pick(rng) == 0 ? 0.25f : INFINITY;
          s.min_scale = pick(rng) == 0 ? 1e-6f : 0.0f;
          s.qmax = pick(rng) == 0 ? quant_max(out) / 2 : 0.0f;
          s.row_pad = pick(rng) == 0 ? 5 : 0;
          s.misalign = pick(rng) == 0 ? 2 : 0;
          s.lead = pick(rng) == 0 ? lead_a : lead_b;
          const int64_t h = kTestHs[size_t(cases) % (sizeof kTestHs / sizeof kTestHs[0])];
          s.h = s.mode == FUSEDNORM_SCALE_DYNAMIC_GROUP ? std::max<int64_t>(s.group, h / s.group * s.group) : h;
          body(s);
          ++cases;
        }
  return cases;
}

// Special rows (docs/numerics.md, "Edge policy"), shared by the CPU and GPU tests: the spec of
// variant v (0 static; 1 quant-only; 2 scale_ub; 3 groups of 32; 4 e8m0 scales; 5 quant-only with
// f16 scales, which overflow on the huge row) and the rows below, in that order.
constexpr int kSpecialVariants = 6;
constexpr int64_t kSpecialRows = 11;
inline CaseSpec special_spec(DType in, DType out, int variant) {
  CaseSpec s;
  s.in = s.w = in;
  s.out = out;
  s.h = variant == 3 ? 64 : 40;
  s.lead = {kSpecialRows};
  s.mode = variant == 0 ? FUSEDNORM_SCALE_STATIC
           : variant == 3 ? FUSEDNORM_SCALE_DYNAMIC_GROUP
                          : FUSEDNORM_SCALE_DYNAMIC_ROW;
  s.group = 32;
  s.scale_ub = variant == 2 ? 1.5f : INFINITY;
  s.scale = variant == 4 ? DType::kE8M0 : variant == 5 ? DType::kF16 : DType::kF32;
  s.norm = variant != 1 && variant != 5;
  s.eps = variant == 1 ? 0.0f : 1e-6f;
  return s;
}
inline void fill_special_rows(CaseTensors& t) {
  const int64_t h = t.spec.h;
  for (int64_t i = 0; i < h; ++i) t.weight->set(0, i, 1.0f + 0.01f * float(i));
  for (int64_t i = 0; i < h; ++i) {
    const float f = float(i + 1);
    t.input->set(0, i, 0.0f);                                    // zero row
    t.input->set(1, i, (i % 2 ? -1e-40f : 1e-40f) * f);          // f32 subnormals
    t.input->set(2, i, (i % 3 ? 3e38f : -3e38f) / f);            // huge: Inf in f16, squares overflow
    t.input->set(3, i, i == 5 ? NAN : f);                        // one NaN
    t.input->set(4, i, i == 7 ? -INFINITY : f);                  // one -Inf
    t.input->set(5, i, i < 20 ? 1e-3f * f : 60000.0f * f);       // wide dynamic range
    t.input->set(6, i, i == 33 ? INFINITY : -0.0f);              // -0 and +Inf
    t.input->set(7, i, (i % 2 ? 1.0f : -1.0f) * 1e-30f * f);     // tiny normals
    t.input->set(8, i, (i % 2 ? -2e19f : 2e19f) + 1e17f * f);    // finite, squares overflow f32
    t.input->set(9, i, NAN);                                     // all NaN
    t.input->set(10, i, i % 2 ? -INFINITY : INFINITY);           // all Inf
  }
}

// First differing byte of two tensors' whole allocations (poison included), or "".
inline std::string first_difference(const char* what, const HostTensor& a, const HostTensor& b) {
  const auto& x = a.storage();
  const auto& y = b.storage();
  const size_t offset_a = size_t(a.data_begin() - x.data()), offset_b = size_t(b.data_begin() - y.data());
  const size_t n = a.data_bytes();
  // The first difference, and how many bytes differ and where the last one is (a wrong element,
  // a wrong row or a wrong tensor: where a failure comes from).
  size_t count = 0, first = 0, last = 0;
  for (size_t i = 0; i < n; ++i)
    if (a.data_begin()[i] != b.data_begin()[i]) {
      if (count++ == 0) first = i;
      last = i;
    }
  if (count != 0) {
    std::ostringstream s;
    s << what << " byte " << first << ": " << int(a.data_begin()[first]) << " vs " << int(b.data_begin()[first])
      << " (" << count << " of " << n << " bytes differ, the last at byte " << last << ")";
    return s.str();
  }
  // Guard bytes before and after the data must be untouched poison in both.
  for (const HostTensor* t : {&a, &b}) {
    const auto& st = t->storage();
    const size_t off = t == &a ? offset_a : offset_b;
    for (size_t i = 0; i < st.size(); ++i)
      if ((i < off || i >= off + n) && st[i] != 0xA5) return std::string(what) + ": write outside the tensor";
  }
  return "";
}

// Appends a tensor's difference (if any) to a list of them.
inline void join_difference(std::string& all, const std::string& d) {
  if (!d.empty()) all += (all.empty() ? "" : "; ") + d;
}

inline std::string compare_outputs(CaseTensors& a, CaseTensors& b) {
  // Every tensor that differs (whether the residual's sums differ too locates a failure).
  std::string d = first_difference("output", *a.output, *b.output);
  if (a.scales && a.spec.mode != FUSEDNORM_SCALE_STATIC) join_difference(d, first_difference("scales", *a.scales, *b.scales));
  if (a.residual) join_difference(d, first_difference("residual", *a.residual, *b.residual));
  return d;
}

}  // namespace test
}  // namespace fusednorm
