// A small real program on the installed fusednorm C++ API (fusednorm.hpp): RMSNorm + dynamic
// per-row FP8 (f8e4m3fn) quantization of an f32 [4, 64] tensor, dequantized with fusednorm::cast
// (f8e4m3fn -> f32) times the row's scale, checked against a plain RMSNorm computed here.
// Prints the version, the CPU target and the path of the libfusednorm it loaded; returns non-zero
// on any failure.
#include <fusednorm/fusednorm.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

DLTensor make_tensor(void* data, DLDataType dtype, int32_t ndim, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  return t;
}

// The file libfusednorm was mapped from (Linux: /proc/self/maps).
std::string loaded_library() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto pos = line.find('/');
    if (pos != std::string::npos && line.find("libfusednorm.so") != std::string::npos) return line.substr(pos);
  }
  return "(not found)";
}

}  // namespace

int main() {
  constexpr int64_t kRows = 4, kH = 64;
  constexpr float kEps = 1e-6f;
  try {
    std::printf("fusednorm %s, CPU target %s\n", fusednorm::version().c_str(), fusednorm::cpu_target().c_str());
    std::printf("loaded: %s\n", loaded_library().c_str());
    for (const auto& b : fusednorm::backends())
      std::printf("backend %s: %s (%s)\n", b.name, b.available ? "available" : "unavailable", b.detail);

    const DLDataType f32{kDLFloat, 32, 1};
    const DLDataType f8{kDLFloat8_e4m3fn, 8, 1};
    std::vector<float> x(kRows * kH), w(kH);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t i = 0; i < kH; ++i)
        x[size_t(r * kH + i)] = float((r + 1) * std::sin(0.37 * double(i) + double(r)) + 0.05 * double(i % 7));
    for (int64_t i = 0; i < kH; ++i) w[size_t(i)] = 0.5f + float(i) / float(kH);

    std::vector<uint8_t> q(size_t(kRows * kH), 0);
    std::vector<float> scales(size_t(kRows), 0.0f), deq(size_t(kRows * kH), 0.0f);
    int64_t shape_x[] = {kRows, kH}, shape_w[] = {kH}, shape_s[] = {kRows, 1};
    DLTensor input = make_tensor(x.data(), f32, 2, shape_x);
    DLTensor weight = make_tensor(w.data(), f32, 1, shape_w);
    DLTensor output = make_tensor(q.data(), f8, 2, shape_x);
    DLTensor scale_t = make_tensor(scales.data(), f32, 2, shape_s);
    DLTensor deq_t = make_tensor(deq.data(), f32, 2, shape_x);

    fusednorm::RmsnormQuantOptions options;  // RMS, dynamic per row, scales in a tensor
    options.eps = kEps;
    fusednorm::rmsnorm_quant(input, nullptr, &weight, output, &scale_t, options);
    fusednorm::cast(output, deq_t);

    int failures = 0;
    double worst = 0.0;
    for (int64_t r = 0; r < kRows; ++r) {
      double ss = 0.0;
      for (int64_t i = 0; i < kH; ++i) ss += double(x[size_t(r * kH + i)]) * double(x[size_t(r * kH + i)]);
      const double inv_rms = 1.0 / std::sqrt(ss / double(kH) + double(kEps));
      const double s = double(scales[size_t(r)]);
      if (!(s > 0.0) || !std::isfinite(s)) {
        std::fprintf(stderr, "row %lld: bad scale %g\n", static_cast<long long>(r), s);
        ++failures;
        continue;
      }
      double amax_q = 0.0;
      for (int64_t i = 0; i < kH; ++i) {
        const double y = double(x[size_t(r * kH + i)]) * inv_rms * double(w[size_t(i)]);
        const double qv = double(deq[size_t(r * kH + i)]);
        amax_q = std::max(amax_q, std::fabs(qv));
        const double got = qv * s;
        // FP8 e4m3: 3 mantissa bits, relative error <= 2^-4 for normals; near zero (subnormal
        // codes, step 2^-9) an absolute floor of one step times the scale.
        const double err = std::fabs(got - y);
        const double tol = std::max(std::fabs(y) / 16.0, s * std::ldexp(1.0, -9));
        worst = std::max(worst, std::fabs(y) > 0 ? err / std::fabs(y) : 0.0);
        if (!(err <= tol)) {
          std::fprintf(stderr, "row %lld col %lld: dequantized %.8g, RMSNorm %.8g (error %.3g > %.3g)\n",
                       static_cast<long long>(r), static_cast<long long>(i), got, y, err, tol);
          ++failures;
        }
      }
      // Dynamic per-row scaling maps the row's largest |y| to (about) the format's max, 448.
      if (!(amax_q > 448.0 * 15.0 / 16.0 && amax_q <= 448.0)) {
        std::fprintf(stderr, "row %lld: largest |q| = %g, expected about 448\n", static_cast<long long>(r), amax_q);
        ++failures;
      }
    }
    std::printf("rmsnorm_quant [4, 64] f32 -> f8e4m3fn, dequantized with cast: worst relative error %.4f\n", worst);

    // The same rows to MXFP4 (blocks of 32, e8m0 scales), dequantized by the library: every value
    // within half an e2m1 step of y (half the step at |y| / scale, times the scale).
    {
      std::vector<uint8_t> q4(size_t(kRows * kH / 2)), s4(size_t(kRows * kH / 32));
      std::vector<float> deq4(size_t(kRows * kH));
      int64_t shape_q4[] = {kRows, kH / 2}, shape_s4[] = {kRows, kH / 32};
      const DLDataType u8{kDLUInt, 8, 1};
      DLTensor q4_t = make_tensor(q4.data(), u8, 2, shape_q4), s4_t = make_tensor(s4.data(), u8, 2, shape_s4);
      DLTensor deq4_t = make_tensor(deq4.data(), f32, 2, shape_x);
      fusednorm::RmsnormFp4Options o4;
      o4.format = FUSEDNORM_FP4_MXFP4;
      o4.eps = kEps;
      fusednorm::rmsnorm_fp4(input, nullptr, &weight, q4_t, s4_t, nullptr, o4);
      fusednorm::DequantizeFp4Options d4;
      d4.format = FUSEDNORM_FP4_MXFP4;
      fusednorm::dequantize_fp4(q4_t, s4_t, nullptr, deq4_t, d4);
      for (int64_t r = 0; r < kRows; ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < kH; ++i) ss += double(x[size_t(r * kH + i)]) * double(x[size_t(r * kH + i)]);
        const double inv_rms = 1.0 / std::sqrt(ss / double(kH) + double(kEps));
        for (int64_t i = 0; i < kH; ++i) {
          const double y = double(x[size_t(r * kH + i)]) * inv_rms * double(w[size_t(i)]);
          const double scale = std::ldexp(1.0, int(s4[size_t(r * (kH / 32) + i / 32)]) - 127);
          const double t = std::fabs(y) / scale, step = t < 2 ? 0.5 : t < 4 ? 1.0 : 2.0;
          if (!(std::fabs(double(deq4[size_t(r * kH + i)]) - y) <= (step / 2) * scale * (1 + 1e-5))) {
            std::fprintf(stderr, "MXFP4 row %lld col %lld: dequantized %.8g, RMSNorm %.8g (scale %g)\n",
                         static_cast<long long>(r), static_cast<long long>(i), double(deq4[size_t(r * kH + i)]), y,
                         scale);
            ++failures;
          }
        }
      }
      std::printf("rmsnorm_fp4 [4, 64] f32 -> MXFP4, dequantized with dequantize_fp4: within half a step\n");
    }

    // A bad call throws fusednorm::Error with the status and the library's message.
    bool threw = false;
    try {
      int64_t bad_shape[] = {kRows, kH / 2};
      DLTensor bad = make_tensor(q.data(), f8, 2, bad_shape);
      fusednorm::rmsnorm_quant(input, nullptr, &weight, bad, &scale_t, options);
    } catch (const fusednorm::Error& e) {
      threw = e.status() == FUSEDNORM_INVALID_ARGUMENT && std::string(e.what()).find("output") != std::string::npos;
      std::printf("bad call: %s\n", e.what());
    }
    if (!threw) {
      std::fprintf(stderr, "a mismatched output did not throw fusednorm::Error(INVALID_ARGUMENT)\n");
      ++failures;
    }

    if (failures != 0) {
      std::fprintf(stderr, "FAILED: %d problems\n", failures);
      return 1;
    }
    std::printf("OK\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: %s\n", e.what());
    return 1;
  }
}
