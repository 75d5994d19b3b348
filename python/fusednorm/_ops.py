"""The operations. Each has, in this order (docs/python.md, "adding an operation"):
  <op>_shapes(...)   logical shapes of the outputs it allocates (shared with the torch fakes)
  _<op>_options(...) the C options struct from keyword arguments (None: the library's default)
  <op>_into(...)     one C call on arrays the caller owns (also the torch custom op's body)
  <op>(...)          the public function: functional form (allocates) or out= form
"""

import numbers
import sys

from . import _C
from ._errors import check
from ._formats import FORMATS, format_of
from ._frameworks import adapter

_F4 = FORMATS["float4_e2m1fn"]


def _choice(what, value, table):
    try:
        return table[value]
    except KeyError:
        raise ValueError("fusednorm: %s=%r; expected one of %s" % (what, value, ", ".join(map(repr, table))))


def _stream(stream, x):
    """The stream handle (int) for a call on x's device: `stream` as given (an int, a
    torch.cuda.Stream or a CuPy stream), else the one x's framework orders its work on."""
    if stream is None:
        return adapter(x).stream(x)
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError("fusednorm: stream=%r is not an int, a torch.cuda.Stream or a CuPy stream" % (stream,))


def _resolve(a, x, f, what):
    """x's format: its own, or f where x holds raw codes (uint8/uint16); f must agree with a
    typed x. None: neither (the library reports x's element type)."""
    own = a.format(x)
    if f is None or own is None:
        return f or own
    if own is not f:
        raise ValueError("fusednorm: %s holds %s elements, not %s" % (what, own.name, f.name))
    return f


def _arg_in(x, f=None, what="input"):
    """_C's argument for input x (None stays None); f: its format where x holds raw codes."""
    if x is None:
        return None
    a = adapter(x)
    f = _resolve(a, x, f, what)
    return x if f is None else a.arg_in(x, f)


def _arg_out(x, f, finishers, what="output"):
    """_C's argument for output x; a staged output's finish() is appended to finishers."""
    if x is None:
        return None
    a = adapter(x)
    f = _resolve(a, x, f, what)
    if f is None:
        return x
    arg, finish = a.arg_out(x, f)
    if finish is not None:
        finishers.append(finish)
    return arg


def _opt_format(dtype):
    return None if dtype is None else format_of(dtype)


def _torch_compiling(x):
    return adapter(x).name == "torch" and sys.modules["torch"].compiler.is_compiling()


def _cached_options(make):
    """make(*args) -> a _C options object, memoized on its arguments: the options are read-only
    once made (the C call takes them const), so calls with the same arguments share one."""
    cache = {}

    def get(*args):
        try:
            return cache[args]
        except KeyError:
            o = cache[args] = make(*args)
            if len(cache) > 256:
                cache.pop(next(iter(cache)))
            return o
        except TypeError:  # an unhashable argument
            return make(*args)
    return get


# ------------------------------------------------------------------------------ cast

_ROUNDING = {"nearest": 0, "up": 1}


def cast_shapes(shape):
    return tuple(shape)


@_cached_options
def _cast_options(e8m0_rounding):
    o = _C.CastOptions()
    if e8m0_rounding is not None:
        o.e8m0_rounding = _choice("e8m0_rounding", e8m0_rounding, _ROUNDING)
    return o


def cast_into(src, dst, src_dtype=None, dst_dtype=None, e8m0_rounding=None, stream=None):
    """dst[...] = src converted element-wise (fusednorm_cast). Returns dst."""
    finishers = []
    s = _arg_in(src, _opt_format(src_dtype), "src")
    d = _arg_out(dst, _opt_format(dst_dtype), finishers, "dst")
    check(_C.cast(s, d, _cast_options(e8m0_rounding), _stream(stream, src)))
    for f in finishers:
        f()
    return dst


def cast(src, dtype=None, *, out=None, src_dtype=None, e8m0_rounding=None, stream=None):
    """Convert `src` element-wise to `dtype` with the library's encoders (fusednorm_cast).

    src: any array (NumPy, PyTorch, any object with __dlpack__); dtype: the destination type, a
    name ("float8_e4m3fn", "float4_e2m1fn", "float8_e8m0fnu", "bfloat16", ...) or a NumPy /
    ml_dtypes / torch dtype. Functional form: returns a new array of src's framework on src's
    device. out=: writes into `out` (its own dtype, or `dtype` where out holds raw uint8 codes)
    and returns it. src_dtype: the type of src's elements where src holds raw codes (uint8).
    e8m0_rounding: "nearest" (default) or "up", for float8_e8m0fnu destinations.
    float4_e2m1fn: NumPy arrays of ml_dtypes.float4_e2m1fn hold one element a byte (packed for
    the call); uint8 arrays and torch.float4_e2m1fn_x2 tensors hold two a byte, low nibble first.
    Raises fusednorm.Error (a subclass per status) with the library's message; writes nothing
    then."""
    if _torch_compiling(src):
        from . import torch as ft
        return ft.cast(src, dtype, out=out, src_dtype=src_dtype, e8m0_rounding=e8m0_rounding)
    a = adapter(src)
    sfmt = _opt_format(src_dtype) or a.format(src)
    if out is None:
        if dtype is None:
            raise TypeError("fusednorm.cast: give dtype= or out=")
        dfmt = format_of(dtype)
        out = a.empty(src, cast_shapes(a.logical_shape(src, sfmt)), dfmt)
    else:
        dfmt = _opt_format(dtype)
    return cast_into(src, out, sfmt, dfmt, e8m0_rounding, stream)


# ------------------------------------------------------------------------------ rmsnorm_quant

_NORMS = {"rms": 0, "none": 1}
_SCALE_MODES = {"static": 0, "row": 1, "group": 2, "dynamic_row": 1, "dynamic_group": 2}


def rmsnorm_quant_shapes(shape, scale_mode="row", group_size=None, packed_scales=False):
    """(output shape, scales shape or None) of rmsnorm_quant for an input of `shape`; None when
    no scales are written (static scale, or scales packed at the row end)."""
    shape = tuple(shape)
    if not shape:
        return shape, None
    lead, h = shape[:-1], shape[-1]
    mode = _choice("scale_mode", scale_mode, _SCALE_MODES)
    out = lead + (h + 4,) if packed_scales else shape
    if packed_scales or mode == 0:
        return out, None
    if mode == 1:
        return out, lead + (1,)
    g = 128 if group_size is None else group_size
    return out, lead + ((h // g) if g > 0 else 0,)


@_cached_options
def _rmsnorm_quant_options(scale_mode, group_size, packed_scales, norm, eps, weight_offset, scale_ub,
                           min_scale, qmax):
    o = _C.RmsnormQuantOptions()
    o.norm = _choice("norm", norm, _NORMS)
    o.scale_mode = _choice("scale_mode", scale_mode, _SCALE_MODES)
    o.scale_placement = 1 if packed_scales else 0
    for name, value in (("group_size", group_size), ("eps", eps), ("weight_offset", weight_offset),
                        ("scale_ub", scale_ub), ("min_scale", min_scale), ("qmax", qmax)):
        if value is not None:
            setattr(o, name, value)
    return o


def rmsnorm_quant_into(x, weight, output, scales, *, residual=None, dtype=None, scale_dtype=None,
                       scale_mode="row", group_size=None, packed_scales=False, norm="rms", eps=None,
                       weight_offset=None, scale_ub=None, min_scale=None, qmax=None, stream=None):
    """One fusednorm_rmsnorm_quant call on arrays the caller owns (see rmsnorm_quant)."""
    o = _rmsnorm_quant_options(scale_mode, group_size, packed_scales, norm, eps, weight_offset, scale_ub,
                               min_scale, qmax)
    finishers = []
    sfmt = _opt_format(scale_dtype)
    args = (_arg_in(x), _arg_out(residual, None, finishers, "residual"), _arg_in(weight, None, "weight"),
            _arg_out(output, _opt_format(dtype), finishers),
            _arg_in(scales, sfmt, "scales") if o.scale_mode == 0 else _arg_out(scales, sfmt, finishers, "scales"))
    check(_C.rmsnorm_quant(*args, o, _stream(stream, x)))
    for f in finishers:
        f()


def rmsnorm_quant(x, weight=None, *, dtype=None, scale_mode="row", group_size=None, scale=None,
                  scale_dtype=None, scales_column_major=False, packed_scales=False, residual=None,
                  norm="rms", eps=None, weight_offset=None, scale_ub=None, min_scale=None, qmax=None,
                  out=None, stream=None):
    """RMSNorm (or quant only) + FP8/INT8 quantization (fusednorm_rmsnorm_quant). Returns (q, scales).

    x: [..., H] float32/float16/bfloat16 array of any framework (NumPy, PyTorch, any object
    with __dlpack__); weight: [H] (gamma; any of the three types), or None with norm="none".
    dtype: output format, "float8_e4m3fn" (default), "float8_e4m3fnuz", "float8_e4m3",
    "float8_e5m2", "float8_e5m2fnuz" or "int8" (names or NumPy/ml_dtypes/torch dtypes).
    scale_mode: "row" (one dynamic scale a row, default), "group" (one per group_size elements:
    32, 64 or 128, default 128) or "static" (scale: the dequantization scale, a float or a
    float32 array [1]). scale_dtype: "float32" (default), "float16", "bfloat16" or
    "float8_e8m0fnu" (rounded up). scales_column_major: allocate scales [..., n] stored as
    [n, ...] (strides (1, rows) in 2-D). packed_scales: the float32 row scale in bytes H..H+3 of
    each output row (output [..., H + 4]; no scales array). residual: [..., H], like x, updated
    in place to x + residual, which is then normalized. norm: "rms" (default) or "none" (quant
    only). eps (1e-6), weight_offset (0; 1 for Gemma), scale_ub (none), min_scale (0), qmax (the
    format's largest): the C options; None means the library's default.
    Functional form: q (and scales) are new arrays of x's framework on x's device. out=: (q,
    scales) or q alone (no scales written) that the caller owns; their dtypes give the formats
    unless dtype/scale_dtype name them (raw uint8 codes).
    Returns (q, scales): scales is the new/given scales array, the static scale, or None with
    packed_scales. Scales are dequantization scales: y ~ q * s.
    Raises fusednorm.Error (a subclass per status) with the library's message; nothing is
    written then (residual included)."""
    if _torch_compiling(x):
        from . import torch as ft
        return ft.rmsnorm_quant(x, weight, dtype=dtype, scale_mode=scale_mode, group_size=group_size, scale=scale,
                                scale_dtype=scale_dtype, scales_column_major=scales_column_major,
                                packed_scales=packed_scales, residual=residual, norm=norm, eps=eps,
                                weight_offset=weight_offset, scale_ub=scale_ub, min_scale=min_scale, qmax=qmax,
                                out=out)
    a = adapter(x)
    static = _choice("scale_mode", scale_mode, _SCALE_MODES) == 0
    if static:
        if scale is None:
            raise TypeError("fusednorm.rmsnorm_quant: scale_mode='static' needs scale=")
        scales = a.scalar(x, float(scale)) if isinstance(scale, numbers.Real) else scale
    if out is None:
        qshape, sshape = rmsnorm_quant_shapes(a.logical_shape(x, None), scale_mode, group_size, packed_scales)
        qfmt = format_of(dtype if dtype is not None else "float8_e4m3fn")
        q = a.empty(x, qshape, qfmt)
        if not static:
            scales = None if sshape is None else a.empty(
                x, sshape, format_of(scale_dtype if scale_dtype is not None else "float32"), scales_column_major)
    else:
        q, given = (out[0], out[1]) if isinstance(out, (tuple, list)) else (out, None)
        if not static:
            scales = given
    rmsnorm_quant_into(x, weight, q, scales, residual=residual, dtype=dtype, scale_dtype=None if static else scale_dtype,
                       scale_mode=scale_mode, group_size=group_size, packed_scales=packed_scales, norm=norm, eps=eps,
                       weight_offset=weight_offset, scale_ub=scale_ub, min_scale=min_scale, qmax=qmax, stream=stream)
    return q, scales


# ------------------------------------------------------------------------------ rmsnorm_fp4, dequantize_fp4

_FP4_FORMATS = {"nvfp4": 0, "mxfp4": 1}
_FP4_LAYOUTS = {"row_major": 0, "row-major": 0, "swizzled": 1}
_FP4_BLOCK = (16, 32)  # by format: NVFP4, MXFP4
_FP4_SCALE_FORMAT = ("float8_e4m3fn", "float8_e8m0fnu")


def _fp4_format(format):
    return _choice("format", format, _FP4_FORMATS)


def _fp4_layout(scale_layout):
    return _choice("scale_layout", scale_layout, _FP4_LAYOUTS)


def _fp4_scale_fmt(format):
    return format_of(_FP4_SCALE_FORMAT[_fp4_format(format)])


def fp4_swizzled_size(rows, h, format="nvfp4"):
    """Bytes (= elements) of the swizzled scales of `rows` rows of `h` elements in `format` ("nvfp4"
    or "mxfp4"): ceil(rows/128)*128 * ceil((h/block)/4)*4 (fusednorm_fp4_swizzled_size). Raises
    InvalidArgumentError (h not a multiple of the block, negative sizes, overflow)."""
    r = _C.fp4_swizzled_size(int(rows), int(h), _fp4_format(format))
    check(r if isinstance(r, tuple) else None)
    return r


def rmsnorm_fp4_shapes(shape, format="nvfp4", scale_layout="row_major"):
    """(codes shape, scales shape) of rmsnorm_fp4 for an input of `shape` [..., H]: the codes'
    logical shape is the input's (two FP4 elements a byte in memory); scales are [..., H/block]
    (row_major) or [ceil(rows/128)*128, ceil((H/block)/4)*4] (swizzled, rows = the product of the
    leading dimensions: the fusednorm_fp4_swizzled_size bytes as a 2-D tensor, as vLLM/FlashInfer
    lay them out). Pure Python on the sizes (SymInt safe); H not a multiple of the block is left
    for the library to report."""
    shape = tuple(shape)
    if not shape:
        return shape, shape
    lead, h = shape[:-1], shape[-1]
    blocks = h // _FP4_BLOCK[_fp4_format(format)]
    if _fp4_layout(scale_layout) == 0:
        return shape, lead + (blocks,)
    rows = 1
    for d in lead:
        rows = rows * d
    return shape, (((rows + 127) // 128) * 128, ((blocks + 3) // 4) * 4)


def dequantize_fp4_shapes(shape):
    """The output shape of dequantize_fp4 for codes of logical shape `shape` [..., H]."""
    return tuple(shape)


@_cached_options
def _rmsnorm_fp4_options(format, scale_layout, norm, eps, weight_offset):
    o = _C.RmsnormFp4Options()
    o.norm = _choice("norm", norm, _NORMS)
    o.format = _fp4_format(format)
    o.scale_layout = _fp4_layout(scale_layout)
    if eps is not None:
        o.eps = eps
    if weight_offset is not None:
        o.weight_offset = weight_offset
    return o


@_cached_options
def _dequantize_fp4_options(format, scale_layout):
    o = _C.DequantizeFp4Options()
    o.format = _fp4_format(format)
    o.scale_layout = _fp4_layout(scale_layout)
    return o


def _global_scale(global_scale, x):
    """A float global scale as a float32 array [1] on x's device; arrays (and None) unchanged."""
    if isinstance(global_scale, numbers.Real):
        return adapter(x).scalar(x, float(global_scale))
    return global_scale


def rmsnorm_fp4_into(x, weight, output, scales, *, global_scale=None, residual=None, format="nvfp4",
                     scale_layout="row_major", norm="rms", eps=None, weight_offset=None, stream=None):
    """One fusednorm_rmsnorm_fp4 call on arrays the caller owns (see rmsnorm_fp4)."""
    o = _rmsnorm_fp4_options(format, scale_layout, norm, eps, weight_offset)
    finishers = []
    args = (_arg_in(x), _arg_out(residual, None, finishers, "residual"), _arg_in(weight, None, "weight"),
            _arg_out(output, _F4, finishers), _arg_out(scales, _fp4_scale_fmt(format), finishers, "scales"),
            _arg_in(_global_scale(global_scale, x), None, "global_scale"))
    check(_C.rmsnorm_fp4(*args, o, _stream(stream, x)))
    for f in finishers:
        f()


def rmsnorm_fp4(x, weight=None, *, format="nvfp4", scale_layout="row_major", global_scale=None, residual=None,
                norm="rms", eps=None, weight_offset=None, out=None, stream=None):
    """RMSNorm (or quant only) + FP4 block quantization, NVFP4 or MXFP4 (fusednorm_rmsnorm_fp4).
    Returns (q, scales).

    x: [..., H] float32/float16/bfloat16 array of any framework; H a multiple of the block (16
    for NVFP4, 32 for MXFP4). weight: [H] (any of the three types), or None with norm="none".
    format: "nvfp4" (default; blocks of 16, float8_e4m3fn scales, optional global scale) or
    "mxfp4" (blocks of 32, float8_e8m0fnu scales rounded up to a power of two).
    scale_layout: "row_major" (default; scales [..., H/block]) or "swizzled" (the 128x4 tiled
    layout of block-scaled GEMMs, allocated as [ceil(rows/128)*128, ceil((H/block)/4)*4], padding
    written as 0; rows = the product of the leading dimensions; see fp4_swizzled_size).
    global_scale: NVFP4 only; None (1), a float, or a float32 array of one element on x's device
    (read by the kernel: no host synchronization). residual: [..., H] like x, updated in place to
    x + residual, which is then normalized. norm: "rms" (default) or "none" (quant only). eps
    (1e-6), weight_offset (0; 1 for Gemma): None means the library's default.
    Codes (float4_e2m1fn) are stored as the package stores that type everywhere: NumPy
    functional outputs are ml_dtypes.float4_e2m1fn arrays [..., H] (one element a byte; staged
    packed and unpacked after a successful call); PyTorch's are torch.float4_e2m1fn_x2 [..., H/2]
    (two a byte, low nibble first), and uint8 [..., H/2] arrays of packed bytes are taken as
    outputs in any framework. Scales are float8_e4m3fn (NVFP4) or float8_e8m0fnu (MXFP4) arrays
    (or uint8 codes as out=).
    out=: (q, scales) that the caller owns. Dequantization: y ~ dec(q) * dec(scale) / gs
    (dequantize_fp4). Raises fusednorm.Error (a subclass per status) with the library's message;
    nothing is written then (residual included)."""
    if _torch_compiling(x):
        from . import torch as ft
        return ft.rmsnorm_fp4(x, weight, format=format, scale_layout=scale_layout, global_scale=global_scale,
                              residual=residual, norm=norm, eps=eps, weight_offset=weight_offset, out=out)
    if out is None:
        a = adapter(x)
        qshape, sshape = rmsnorm_fp4_shapes(a.logical_shape(x, None), format, scale_layout)
        q, scales = a.empty(x, qshape, _F4), a.empty(x, sshape, _fp4_scale_fmt(format))
    elif isinstance(out, (tuple, list)) and len(out) == 2:
        q, scales = out
    else:
        raise TypeError("fusednorm.rmsnorm_fp4: out= takes (q, scales)")
    rmsnorm_fp4_into(x, weight, q, scales, global_scale=global_scale, residual=residual, format=format,
                     scale_layout=scale_layout, norm=norm, eps=eps, weight_offset=weight_offset, stream=stream)
    return q, scales


def dequantize_fp4_into(codes, scales, output, *, global_scale=None, format="nvfp4", scale_layout="row_major",
                        dtype=None, stream=None):
    """One fusednorm_dequantize_fp4 call on arrays the caller owns (see dequantize_fp4)."""
    o = _dequantize_fp4_options(format, scale_layout)
    finishers = []
    args = (_arg_in(codes, _F4, "codes"), _arg_in(scales, _fp4_scale_fmt(format), "scales"),
            _arg_in(_global_scale(global_scale, codes), None, "global_scale"),
            _arg_out(output, _opt_format(dtype), finishers))
    check(_C.dequantize_fp4(*args, o, _stream(stream, codes)))
    for f in finishers:
        f()


def dequantize_fp4(codes, scales, *, global_scale=None, format="nvfp4", scale_layout="row_major", dtype=None,
                   out=None, stream=None):
    """The inverse of rmsnorm_fp4's encoding (fusednorm_dequantize_fp4): out = dec(q) * dec(scale)
    / gs, in f32 (the product, then the division), rounded once to the output type.

    codes: FP4 codes as rmsnorm_fp4 returns them (ml_dtypes.float4_e2m1fn [..., H],
    torch.float4_e2m1fn_x2 [..., H/2], or uint8 [..., H/2] packed bytes); scales, global_scale,
    format, scale_layout: as given to / returned by rmsnorm_fp4. dtype: the output type,
    "float32" (default), "float16" or "bfloat16". out=: an array [..., H] the caller owns (its
    dtype is the output type unless dtype= names it: raw uint16 codes of bfloat16). Returns the
    output. Raises fusednorm.Error with the library's message; writes nothing then."""
    if _torch_compiling(codes):
        from . import torch as ft
        return ft.dequantize_fp4(codes, scales, global_scale=global_scale, format=format, scale_layout=scale_layout,
                                 dtype=dtype, out=out)
    if out is None:
        a = adapter(codes)
        out = a.empty(codes, dequantize_fp4_shapes(a.logical_shape(codes, _F4)),
                      format_of(dtype if dtype is not None else "float32"))
    dequantize_fp4_into(codes, scales, out, global_scale=global_scale, format=format, scale_layout=scale_layout,
                        dtype=dtype, stream=stream)
    return out


# ------------------------------------------------------------------------------ queries


def version():
    """The library's version string ("0.1.0")."""
    return _C.version()[0]


def cpu_target():
    """The Highway SIMD target the CPU backend dispatches to now ("AVX3", "AVX2", "SSE4", ...)."""
    return _C.cpu_target()


def backends():
    """Every backend fusednorm knows, available or not: a list of dicts with name ("cpu", "cuda",
    "hip"), device_type (DLPack), available, device_count and detail (the CPU's SIMD target and
    threads; for an unavailable backend the reason: the plugin loader's or the vendor's text)."""
    out = []
    for device_type in (1, 2, 10):
        info = _C.query_backend(device_type)
        check(info if isinstance(info, tuple) else None)
        out.append(info)
    return out
