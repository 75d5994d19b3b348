// fusednorm._C: the C ABI (include/fusednorm/fusednorm.h) for Python, through nanobind.
//
// Thin on purpose: every choice a user sees (format names, allocation of outputs in the caller's
// framework, streams, exceptions) is made in the Python package (python/fusednorm/); this module
// only turns Python arrays into DLTensors, runs one C call with the GIL released, and reports
// its status.
//
// A tensor argument is one of
//   None                     -> NULL
//   an array                 -> anything nanobind's ndarray imports: an object with __dlpack__
//                               (versioned protocol where offered), a DLPack capsule, or the
//                               buffer protocol; its own DLPack dtype is used
//   (array, code, bits)      -> the same array with its dtype replaced by DLPack {code, bits, 1}.
//                               The array's elements must have `bits` bits, or 8 when bits is 4:
//                               then each byte holds two elements (low nibble first), so the last
//                               dimension doubles and the other strides (in elements) double.
//                               This is how NumPy arrays of ml_dtypes types (which NumPy cannot
//                               export through DLPack) and packed FP4 bytes reach the library.
// An operation returns None on success and (status, message) on failure; the Python layer raises.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "fusednorm/fusednorm.h"

namespace nb = nanobind;

namespace {

// The largest rank this module forwards. The library supports rank <= 9 and reports larger
// ranks itself (UNSUPPORTED), so anything up to kMaxDims is passed through unchanged.
constexpr int kMaxDims = 32;

// One tensor argument as a DLTensor; keeps the imported array alive for the call.
class Tensor {
 public:
  Tensor(nb::handle arg, const char* name, bool writable) {
    if (arg.is_none()) return;
    nb::handle array = arg;
    int code = -1, bits = 0;
    if (nb::isinstance<nb::tuple>(arg)) {
      nb::tuple t = nb::borrow<nb::tuple>(arg);
      if (t.size() != 3) throw nb::type_error((std::string(name) + ": expected (array, code, bits)").c_str());
      array = t[0];
      code = nb::cast<int>(t[1]);
      bits = nb::cast<int>(t[2]);
    }
    import(array, name, writable);
    dl_.data = writable ? rw_.data() : static_cast<void*>(const_cast<void*>(ro_.data()));
    const auto dtype = writable ? rw_.dtype() : ro_.dtype();
    dl_.device.device_type = static_cast<DLDeviceType>(writable ? rw_.device_type() : ro_.device_type());
    dl_.device.device_id = writable ? rw_.device_id() : ro_.device_id();
    dl_.ndim = static_cast<int32_t>(writable ? rw_.ndim() : ro_.ndim());
    dl_.dtype.code = dtype.code;
    dl_.dtype.bits = dtype.bits;
    dl_.dtype.lanes = dtype.lanes;
    const int64_t* shape = writable ? rw_.shape_ptr() : ro_.shape_ptr();
    const int64_t* strides = writable ? rw_.stride_ptr() : ro_.stride_ptr();
    dl_.shape = const_cast<int64_t*>(shape);
    dl_.strides = const_cast<int64_t*>(strides);
    dl_.byte_offset = 0;  // data() already includes the producer's byte offset
    if (code >= 0) retype(name, code, bits);
    valid_ = true;
  }

  DLTensor* get() { return valid_ ? &dl_ : nullptr; }

 private:
  void import(nb::handle array, const char* name, bool writable) {
    const bool ok = writable ? nb::try_cast(array, rw_) : nb::try_cast(array, ro_);
    if (!ok) {
      std::string msg = std::string(name) + ": " + nb::type_name(array.type()).c_str() +
                        " is not an array fusednorm can read (no __dlpack__, DLPack capsule or buffer protocol)";
      if (writable) msg += ", or it is read-only";
      throw nb::type_error(msg.c_str());
    }
  }

  void retype(const char* name, int code, int bits) {
    const int have = dl_.dtype.bits * dl_.dtype.lanes;
    if (bits == 4 && have == 8) {  // packed FP4: two elements a byte
      if (dl_.ndim < 1 || dl_.ndim > kMaxDims)
        throw nb::value_error((std::string(name) + ": a packed 4-bit tensor needs rank 1 to 32").c_str());
      const int last = dl_.ndim - 1;
      for (int i = 0; i < dl_.ndim; ++i) {
        shape_[i] = dl_.shape[i];
        strides_[i] = dl_.strides[i] * 2;
      }
      shape_[last] *= 2;
      // Contiguous bytes are contiguous elements; any other last stride stays non-contiguous,
      // which the library reports.
      if (dl_.strides[last] == 1) strides_[last] = 1;
      dl_.shape = shape_;
      dl_.strides = strides_;
    } else if (have != bits) {
      throw nb::value_error((std::string(name) + ": an array of " + std::to_string(have) +
                             "-bit elements cannot hold " + std::to_string(bits) + "-bit codes")
                                .c_str());
    }
    dl_.dtype.code = static_cast<uint8_t>(code);
    dl_.dtype.bits = static_cast<uint8_t>(bits);
    dl_.dtype.lanes = 1;
  }

  nb::ndarray<nb::ro> ro_;
  nb::ndarray<> rw_;
  DLTensor dl_{};
  int64_t shape_[kMaxDims] = {};
  int64_t strides_[kMaxDims] = {};
  bool valid_ = false;
};

// Runs one C call without the GIL; None on success, else (status, message) read on this thread.
template <typename Call>
nb::object run(Call&& call) {
  fusednorm_status status;
  std::string message;
  {
    nb::gil_scoped_release release;
    status = call();
    if (status != FUSEDNORM_SUCCESS) message = fusednorm_last_error();
  }
  if (status == FUSEDNORM_SUCCESS) return nb::none();
  return nb::make_tuple(static_cast<int>(status), message);
}

void* stream_ptr(uintptr_t stream) { return reinterpret_cast<void*>(stream); }

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "fusednorm's C ABI (fusednorm.h) for the Python package; use the package `fusednorm`.";

  // ------------------------------------------------------------------ queries
  m.def("version", [] {
    int major = 0, minor = 0, patch = 0;
    const char* text = fusednorm_version(&major, &minor, &patch);
    return nb::make_tuple(std::string(text), major, minor, patch);
  });
  m.def("cpu_target", [] { return std::string(fusednorm_cpu_target()); });
  m.def("status_string", [](int status) { return std::string(fusednorm_status_string(static_cast<fusednorm_status>(status))); });
  m.def("query_backend", [](int device_type) -> nb::object {
    fusednorm_backend_info info{};
    info.struct_size = sizeof info;
    const fusednorm_status status = fusednorm_query_backend(device_type, &info);
    if (status != FUSEDNORM_SUCCESS) return nb::make_tuple(static_cast<int>(status), std::string(fusednorm_last_error()));
    nb::dict d;
    d["name"] = std::string(info.name);
    d["device_type"] = info.device_type;
    d["available"] = info.available != 0;
    d["device_count"] = info.device_count;
    d["detail"] = std::string(info.detail);
    return d;
  });

  // The DLPack dtype an array exports, (code, bits, lanes): how the package learns which of a
  // framework's types reach the library unchanged.
  m.def("dlpack_dtype", [](nb::handle array) {
    nb::ndarray<nb::ro> a;
    if (!nb::try_cast(array, a)) throw nb::type_error("dlpack_dtype: not an array");
    return nb::make_tuple(int(a.dtype().code), int(a.dtype().bits), int(a.dtype().lanes));
  });

  // ------------------------------------------------------------------ cast
  nb::class_<fusednorm_cast_options>(m, "CastOptions", "fusednorm_cast_options, with the library's defaults")
      .def("__init__", [](fusednorm_cast_options* o) {
        new (o) fusednorm_cast_options{};
        fusednorm_cast_options_init(o);
      })
      .def_rw("e8m0_rounding", &fusednorm_cast_options::e8m0_rounding);
  m.def(
      "cast",
      [](nb::handle src, nb::handle dst, const fusednorm_cast_options& o, uintptr_t stream) {
        Tensor s(src, "src", false), d(dst, "dst", true);
        return run([&] { return fusednorm_cast(s.get(), d.get(), &o, stream_ptr(stream)); });
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("options"), nb::arg("stream"));

  // ------------------------------------------------------------------ rmsnorm_quant
  nb::class_<fusednorm_rmsnorm_quant_options>(m, "RmsnormQuantOptions",
                                              "fusednorm_rmsnorm_quant_options, with the library's defaults")
      .def("__init__", [](fusednorm_rmsnorm_quant_options* o) {
        new (o) fusednorm_rmsnorm_quant_options{};
        fusednorm_rmsnorm_quant_options_init(o);
      })
      .def_rw("norm", &fusednorm_rmsnorm_quant_options::norm)
      .def_rw("scale_mode", &fusednorm_rmsnorm_quant_options::scale_mode)
      .def_rw("scale_placement", &fusednorm_rmsnorm_quant_options::scale_placement)
      .def_rw("group_size", &fusednorm_rmsnorm_quant_options::group_size)
      .def_rw("eps", &fusednorm_rmsnorm_quant_options::eps)
      .def_rw("weight_offset", &fusednorm_rmsnorm_quant_options::weight_offset)
      .def_rw("scale_ub", &fusednorm_rmsnorm_quant_options::scale_ub)
      .def_rw("min_scale", &fusednorm_rmsnorm_quant_options::min_scale)
      .def_rw("qmax", &fusednorm_rmsnorm_quant_options::qmax);
  m.def(
      "rmsnorm_quant",
      [](nb::handle input, nb::handle residual, nb::handle weight, nb::handle output, nb::handle scales,
         const fusednorm_rmsnorm_quant_options& o, uintptr_t stream) {
        // A static scale is read, dynamic scales are written.
        const bool scales_written = o.scale_mode != FUSEDNORM_SCALE_STATIC;
        Tensor in(input, "input", false), res(residual, "residual", true), w(weight, "weight", false),
            out(output, "output", true), sc(scales, "scales", scales_written);
        return run([&] {
          return fusednorm_rmsnorm_quant(in.get(), res.get(), w.get(), out.get(), sc.get(), &o, stream_ptr(stream));
        });
      },
      nb::arg("input"), nb::arg("residual").none(), nb::arg("weight").none(), nb::arg("output"),
      nb::arg("scales").none(), nb::arg("options"), nb::arg("stream"));

  // ------------------------------------------------------------------ rmsnorm_fp4, dequantize_fp4
  nb::class_<fusednorm_rmsnorm_fp4_options>(m, "RmsnormFp4Options",
                                            "fusednorm_rmsnorm_fp4_options, with the library's defaults")
      .def("__init__", [](fusednorm_rmsnorm_fp4_options* o) {
        new (o) fusednorm_rmsnorm_fp4_options{};
        fusednorm_rmsnorm_fp4_options_init(o);
      })
      .def_rw("norm", &fusednorm_rmsnorm_fp4_options::norm)
      .def_rw("format", &fusednorm_rmsnorm_fp4_options::format)
      .def_rw("scale_layout", &fusednorm_rmsnorm_fp4_options::scale_layout)
      .def_rw("eps", &fusednorm_rmsnorm_fp4_options::eps)
      .def_rw("weight_offset", &fusednorm_rmsnorm_fp4_options::weight_offset);
  m.def(
      "rmsnorm_fp4",
      [](nb::handle input, nb::handle residual, nb::handle weight, nb::handle output, nb::handle scales,
         nb::handle global_scale, const fusednorm_rmsnorm_fp4_options& o, uintptr_t stream) {
        Tensor in(input, "input", false), res(residual, "residual", true), w(weight, "weight", false),
            out(output, "output", true), sc(scales, "scales", true), gs(global_scale, "global_scale", false);
        return run([&] {
          return fusednorm_rmsnorm_fp4(in.get(), res.get(), w.get(), out.get(), sc.get(), gs.get(), &o,
                                       stream_ptr(stream));
        });
      },
      nb::arg("input"), nb::arg("residual").none(), nb::arg("weight").none(), nb::arg("output"), nb::arg("scales"),
      nb::arg("global_scale").none(), nb::arg("options"), nb::arg("stream"));

  nb::class_<fusednorm_dequantize_fp4_options>(m, "DequantizeFp4Options",
                                               "fusednorm_dequantize_fp4_options, with the library's defaults")
      .def("__init__", [](fusednorm_dequantize_fp4_options* o) {
        new (o) fusednorm_dequantize_fp4_options{};
        fusednorm_dequantize_fp4_options_init(o);
      })
      .def_rw("format", &fusednorm_dequantize_fp4_options::format)
      .def_rw("scale_layout", &fusednorm_dequantize_fp4_options::scale_layout);
  m.def(
      "dequantize_fp4",
      [](nb::handle codes, nb::handle scales, nb::handle global_scale, nb::handle output,
         const fusednorm_dequantize_fp4_options& o, uintptr_t stream) {
        Tensor c(codes, "codes", false), sc(scales, "scales", false), gs(global_scale, "global_scale", false),
            out(output, "output", true);
        return run([&] {
          return fusednorm_dequantize_fp4(c.get(), sc.get(), gs.get(), out.get(), &o, stream_ptr(stream));
        });
      },
      nb::arg("codes"), nb::arg("scales"), nb::arg("global_scale").none(), nb::arg("output"), nb::arg("options"),
      nb::arg("stream"));

  // ------------------------------------------------------------------ qk_rmsnorm (stats, apply, fused)
  nb::class_<fusednorm_qk_rmsnorm_options>(m, "QkRmsnormOptions",
                                           "fusednorm_qk_rmsnorm_options, with the library's defaults")
      .def("__init__", [](fusednorm_qk_rmsnorm_options* o) {
        new (o) fusednorm_qk_rmsnorm_options{};
        fusednorm_qk_rmsnorm_options_init(o);
      })
      .def_rw("stats_kind", &fusednorm_qk_rmsnorm_options::stats_kind)
      .def_rw("q_global_width", &fusednorm_qk_rmsnorm_options::q_global_width)
      .def_rw("k_global_width", &fusednorm_qk_rmsnorm_options::k_global_width)
      .def_rw("head_dim", &fusednorm_qk_rmsnorm_options::head_dim)
      .def_rw("eps", &fusednorm_qk_rmsnorm_options::eps)
      .def_rw("weight_offset", &fusednorm_qk_rmsnorm_options::weight_offset);
  m.def(
      "qk_rmsnorm_stats",
      [](nb::handle q, nb::handle k, nb::handle stats, const fusednorm_qk_rmsnorm_options& o, uintptr_t stream) {
        Tensor tq(q, "q", false), tk(k, "k", false), ts(stats, "stats", true);
        return run([&] { return fusednorm_qk_rmsnorm_stats(tq.get(), tk.get(), ts.get(), &o, stream_ptr(stream)); });
      },
      nb::arg("q"), nb::arg("k"), nb::arg("stats"), nb::arg("options"), nb::arg("stream"));
  m.def(
      "qk_rmsnorm_apply",
      [](nb::handle q, nb::handle k, nb::handle stats, nb::handle q_weight, nb::handle k_weight, nb::handle q_out,
         nb::handle k_out, nb::handle out_scales, const fusednorm_qk_rmsnorm_options& o, uintptr_t stream) {
        Tensor tq(q, "q", false), tk(k, "k", false), ts(stats, "stats", false), qw(q_weight, "q_weight", false),
            kw(k_weight, "k_weight", false), qo(q_out, "q_out", true), ko(k_out, "k_out", true),
            sc(out_scales, "out_scales", false);
        return run([&] {
          return fusednorm_qk_rmsnorm_apply(tq.get(), tk.get(), ts.get(), qw.get(), kw.get(), qo.get(), ko.get(),
                                            sc.get(), &o, stream_ptr(stream));
        });
      },
      nb::arg("q"), nb::arg("k"), nb::arg("stats"), nb::arg("q_weight"), nb::arg("k_weight"), nb::arg("q_out"),
      nb::arg("k_out"), nb::arg("out_scales").none(), nb::arg("options"), nb::arg("stream"));
  m.def(
      "qk_rmsnorm",
      [](nb::handle q, nb::handle k, nb::handle q_weight, nb::handle k_weight, nb::handle q_out, nb::handle k_out,
         nb::handle out_scales, const fusednorm_qk_rmsnorm_options& o, uintptr_t stream) {
        Tensor tq(q, "q", false), tk(k, "k", false), qw(q_weight, "q_weight", false), kw(k_weight, "k_weight", false),
            qo(q_out, "q_out", true), ko(k_out, "k_out", true), sc(out_scales, "out_scales", false);
        return run([&] {
          return fusednorm_qk_rmsnorm(tq.get(), tk.get(), qw.get(), kw.get(), qo.get(), ko.get(), sc.get(), &o,
                                      stream_ptr(stream));
        });
      },
      nb::arg("q"), nb::arg("k"), nb::arg("q_weight"), nb::arg("k_weight"), nb::arg("q_out"), nb::arg("k_out"),
      nb::arg("out_scales").none(), nb::arg("options"), nb::arg("stream"));

  // ------------------------------------------------------------------ mla_rope_rmsnorm_quant
  nb::class_<fusednorm_mla_rope_rmsnorm_quant_options>(
      m, "MlaRopeRmsnormQuantOptions", "fusednorm_mla_rope_rmsnorm_quant_options, with the library's defaults")
      .def("__init__", [](fusednorm_mla_rope_rmsnorm_quant_options* o) {
        new (o) fusednorm_mla_rope_rmsnorm_quant_options{};
        fusednorm_mla_rope_rmsnorm_quant_options_init(o);
      })
      .def_rw("rope_style", &fusednorm_mla_rope_rmsnorm_quant_options::rope_style)
      .def_rw("eps", &fusednorm_mla_rope_rmsnorm_quant_options::eps)
      .def_rw("weight_offset", &fusednorm_mla_rope_rmsnorm_quant_options::weight_offset);
  m.def(
      "mla_rope_rmsnorm_quant",
      [](nb::handle q, nb::handle q_out, nb::handle kv, nb::handle weight, nb::handle cos_sin, nb::handle positions,
         nb::handle row_offsets, nb::handle cache_len, nb::handle page_table, nb::handle kv_cache, nb::handle k_scale,
         nb::handle invalid_tokens, const fusednorm_mla_rope_rmsnorm_quant_options& o, uintptr_t stream) {
        // q is written in place when q_out is None.
        Tensor tq(q, "q", q_out.is_none()), qo(q_out, "q_out", true), tkv(kv, "kv", false), w(weight, "weight", false),
            cs(cos_sin, "cos_sin", false), pos(positions, "positions", false), ro(row_offsets, "row_offsets", false),
            cl(cache_len, "cache_len", false), pt(page_table, "page_table", false), cache(kv_cache, "kv_cache", true),
            ks(k_scale, "k_scale", false), inv(invalid_tokens, "invalid_tokens", true);
        return run([&] {
          return fusednorm_mla_rope_rmsnorm_quant(tq.get(), qo.get(), tkv.get(), w.get(), cs.get(), pos.get(), ro.get(),
                                                  cl.get(), pt.get(), cache.get(), ks.get(), inv.get(), &o,
                                                  stream_ptr(stream));
        });
      },
      nb::arg("q"), nb::arg("q_out").none(), nb::arg("kv"), nb::arg("weight"), nb::arg("cos_sin"),
      nb::arg("positions").none(), nb::arg("row_offsets"), nb::arg("cache_len").none(), nb::arg("page_table"),
      nb::arg("kv_cache"), nb::arg("k_scale").none(), nb::arg("invalid_tokens").none(), nb::arg("options"),
      nb::arg("stream"));

  // The byte count of swizzled scales: an int, or (status, message) on failure.
  m.def(
      "fp4_swizzled_size",
      [](int64_t rows, int64_t h, int32_t format) -> nb::object {
        int64_t bytes = 0;
        const fusednorm_status status = fusednorm_fp4_swizzled_size(rows, h, format, &bytes);
        if (status != FUSEDNORM_SUCCESS)
          return nb::make_tuple(static_cast<int>(status), std::string(fusednorm_last_error()));
        return nb::cast(bytes);
      },
      nb::arg("rows"), nb::arg("h"), nb::arg("format"));
}
