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
    # No adapter here: the first adapter of a framework is made on first use (TorchAdapter probes
    # PyTorch's DLPack export and imports fusednorm.torch), which torch.compile cannot trace when
    # the first call of the process is inside a compiled function.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor) and torch.compiler.is_compiling()


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


# ------------------------------------------------------------------------------ qk_rmsnorm (stats, apply, fused)

_QK_STATS_KINDS = {"sums": 0, "mean_squares": 1}


def qk_rmsnorm_stats_shapes(q_shape):
    """The shape of qk_rmsnorm_stats' statistics for q of `q_shape` [..., Nq]: [..., 2]."""
    q_shape = tuple(q_shape)
    return q_shape[:-1] + (2,)


def qk_rmsnorm_shapes(q_shape, k_shape):
    """(q_out shape, k_out shape) of qk_rmsnorm and qk_rmsnorm_apply: q's and k's."""
    return tuple(q_shape), tuple(k_shape)


@_cached_options
def _qk_rmsnorm_options(stats_kind, q_global_width, k_global_width, head_dim, eps, weight_offset):
    o = _C.QkRmsnormOptions()
    if stats_kind is not None:
        o.stats_kind = _choice("stats_kind", stats_kind, _QK_STATS_KINDS)
    for name, value in (("q_global_width", q_global_width), ("k_global_width", k_global_width),
                        ("head_dim", head_dim), ("eps", eps), ("weight_offset", weight_offset)):
        if value is not None:
            setattr(o, name, value)
    return o


def _out_scales(out_scales, x):
    """out_scales as a float32 array [2] on x's device: a pair of floats is made one; arrays (and
    None) unchanged."""
    if isinstance(out_scales, (tuple, list)):
        return adapter(x).floats(x, [float(v) for v in out_scales])
    return out_scales


def _qk_outputs(q_out, k_out, dtype, finishers):
    """_C's q_out and k_out (in place: q and k themselves); FP8 outputs may be raw uint8 codes
    with dtype= naming the format."""
    f = _opt_format(dtype)
    return (_arg_out(q_out, f, finishers, "q_out"), _arg_out(k_out, f, finishers, "k_out"))


def qk_rmsnorm_stats_into(q, k, stats, *, stream=None):
    """One fusednorm_qk_rmsnorm_stats call on arrays the caller owns (see qk_rmsnorm_stats)."""
    finishers = []
    args = (_arg_in(q, None, "q"), _arg_in(k, None, "k"), _arg_out(stats, None, finishers, "stats"))
    check(_C.qk_rmsnorm_stats(*args, _qk_rmsnorm_options(None, None, None, None, None, None), _stream(stream, q)))
    for f in finishers:
        f()


def qk_rmsnorm_stats(q, k, *, out=None, stream=None):
    """The local statistics of a tensor-parallel QK-norm (fusednorm_qk_rmsnorm_stats): stats
    [..., 2] float32, stats[..., 0] = the sum of squares of q's row, stats[..., 1] = k's, each in
    the canonical order over this rank's slice (docs/numerics.md §6).

    q: [..., Nq] float32/float16/bfloat16 (a strided view of a fused QKV projection is fine: the
    last dimension contiguous); k: [..., Nk], q's type and leading dimensions. Sum the stats of
    all ranks (an all-reduce), then qk_rmsnorm_apply(..., stats_kind="sums", q_global_width=,
    k_global_width=). Functional form: a new float32 array of q's framework on q's device. out=: a
    float32 array [..., 2] the caller owns; returned. Raises fusednorm.Error (a subclass per
    status) with the library's message; writes nothing then."""
    if _torch_compiling(q):
        from . import torch as ft
        return ft.qk_rmsnorm_stats(q, k, out=out)
    if out is None:
        a = adapter(q)
        out = a.empty(q, qk_rmsnorm_stats_shapes(a.logical_shape(q, None)), format_of("float32"))
    qk_rmsnorm_stats_into(q, k, out, stream=stream)
    return out


def qk_rmsnorm_apply_into(q, k, stats, q_weight, k_weight, q_out, k_out, *, out_scales=None, dtype=None,
                          stats_kind=None, q_global_width=None, k_global_width=None, eps=None, weight_offset=None,
                          stream=None):
    """One fusednorm_qk_rmsnorm_apply call on arrays the caller owns (see qk_rmsnorm_apply); q_out
    and k_out may be q and k themselves (in place)."""
    o = _qk_rmsnorm_options(stats_kind, q_global_width, k_global_width, None, eps, weight_offset)
    finishers = []
    args = (_arg_in(q, None, "q"), _arg_in(k, None, "k"), _arg_in(stats, None, "stats"),
            _arg_in(q_weight, None, "q_weight"), _arg_in(k_weight, None, "k_weight"),
            *_qk_outputs(q_out, k_out, dtype, finishers),
            _arg_in(_out_scales(out_scales, q), None, "out_scales"))
    check(_C.qk_rmsnorm_apply(*args, o, _stream(stream, q)))
    for f in finishers:
        f()


def _qk_alloc_outputs(q, k, dtype, out, what):
    if out is None:
        a = adapter(q)
        qs, ks = qk_rmsnorm_shapes(a.logical_shape(q, None), a.logical_shape(k, None))
        f = format_of(dtype) if dtype is not None else a.format(q)
        return a.empty(q, qs, f), a.empty(k, ks, f)
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return out[0], out[1]
    raise TypeError("fusednorm.%s: out= takes (q_out, k_out)" % what)


def qk_rmsnorm_apply(q, k, stats, q_weight, k_weight, *, q_global_width=None, k_global_width=None, stats_kind="sums",
                     eps=None, weight_offset=None, dtype=None, out_scales=None, out=None, stream=None):
    """Applies a QK-norm from (all-reduced) statistics (fusednorm_qk_rmsnorm_apply). Returns
    (q_out, k_out).

    q, k: as for qk_rmsnorm_stats; stats: [..., 2] float32, the sums of squares of all ranks
    (stats_kind="sums", the default; q_global_width, k_global_width: Nq and Nk over all ranks,
    required) or mean squares (stats_kind="mean_squares": used as they are). q_weight [Nq],
    k_weight [Nk]: this rank's slices (float32/float16/bfloat16). out = rn((x * inv) * (w +
    weight_offset)), inv = 1 / sqrt(var + eps) (eps 1e-6, weight_offset 0: None means the
    library's default). dtype: None (q's type), or "float8_e4m3fn" / "float8_e4m3fnuz" for FP8
    attention, with out_scales the static dequantization scales of q and k (a float32 array [2]
    on q's device, or a pair of floats). Functional form: new arrays of q's framework on q's
    device. out=: (q_out, k_out) the caller owns, which may be (q, k) themselves (in place).
    Raises fusednorm.Error (a subclass per status) with the library's message; writes nothing
    then."""
    if _torch_compiling(q):
        from . import torch as ft
        return ft.qk_rmsnorm_apply(q, k, stats, q_weight, k_weight, q_global_width=q_global_width,
                                   k_global_width=k_global_width, stats_kind=stats_kind, eps=eps,
                                   weight_offset=weight_offset, dtype=dtype, out_scales=out_scales, out=out)
    qo, ko = _qk_alloc_outputs(q, k, dtype, out, "qk_rmsnorm_apply")
    qk_rmsnorm_apply_into(q, k, stats, q_weight, k_weight, qo, ko, out_scales=out_scales, dtype=dtype,
                          stats_kind=stats_kind, q_global_width=q_global_width, k_global_width=k_global_width,
                          eps=eps, weight_offset=weight_offset, stream=stream)
    return qo, ko


def qk_rmsnorm_into(q, k, q_weight, k_weight, q_out, k_out, *, out_scales=None, dtype=None, head_dim=None, eps=None,
                    weight_offset=None, stream=None):
    """One fusednorm_qk_rmsnorm call on arrays the caller owns (see qk_rmsnorm); q_out and k_out
    may be q and k themselves (in place)."""
    o = _qk_rmsnorm_options(None, None, None, head_dim, eps, weight_offset)
    finishers = []
    args = (_arg_in(q, None, "q"), _arg_in(k, None, "k"), _arg_in(q_weight, None, "q_weight"),
            _arg_in(k_weight, None, "k_weight"), *_qk_outputs(q_out, k_out, dtype, finishers),
            _arg_in(_out_scales(out_scales, q), None, "out_scales"))
    check(_C.qk_rmsnorm(*args, o, _stream(stream, q)))
    for f in finishers:
        f()


def qk_rmsnorm(q, k, q_weight, k_weight, *, head_dim=None, eps=None, weight_offset=None, dtype=None,
               out_scales=None, out=None, stream=None):
    """The single-device QK-norm of attention (fusednorm_qk_rmsnorm): RMSNorm of q and of k, over
    each whole row (head_dim None or 0: MiniMax-M2, OLMo-2; weights [Nq], [Nk]) or over each head
    of head_dim elements (Qwen3, Gemma-3; weights [head_dim], shared by the heads). Returns
    (q_out, k_out).

    q: [..., Nq] float32/float16/bfloat16 (strided views of a fused QKV projection are fine); k:
    [..., Nk], q's type and leading dimensions. out = rn((x * inv) * (w + weight_offset)), inv =
    1 / sqrt(ss / G + eps), ss the sum of squares of the group in the canonical order
    (docs/numerics.md §6); eps (1e-6), weight_offset (0; 1 for Gemma): None means the library's
    default. dtype: None (q's type), or "float8_e4m3fn" / "float8_e4m3fnuz" with out_scales (the
    static dequantization scales of q and k: a float32 array [2] on q's device, or a pair of
    floats). Functional form: new arrays of q's framework on q's device. out=: (q_out, k_out)
    the caller owns, which may be (q, k) themselves (in place). Equals qk_rmsnorm_stats then
    qk_rmsnorm_apply (global widths Nq, Nk) byte for byte when head_dim is 0.
    Raises fusednorm.Error (a subclass per status) with the library's message; writes nothing
    then."""
    if _torch_compiling(q):
        from . import torch as ft
        return ft.qk_rmsnorm(q, k, q_weight, k_weight, head_dim=head_dim, eps=eps, weight_offset=weight_offset,
                             dtype=dtype, out_scales=out_scales, out=out)
    qo, ko = _qk_alloc_outputs(q, k, dtype, out, "qk_rmsnorm")
    qk_rmsnorm_into(q, k, q_weight, k_weight, qo, ko, out_scales=out_scales, dtype=dtype, head_dim=head_dim, eps=eps,
                    weight_offset=weight_offset, stream=stream)
    return qo, ko


# ------------------------------------------------------------------------------ mla_rope_rmsnorm_quant

_ROPE_STYLES = {"interleaved": 0, "neox": 1}


def mla_rope_rmsnorm_quant_shapes(q_shape):
    """The shape of the q_out that mla_rope_rmsnorm_quant allocates: q's [T, Hq, R]."""
    return tuple(q_shape)


@_cached_options
def _mla_rope_rmsnorm_quant_options(rope_style, eps, weight_offset):
    o = _C.MlaRopeRmsnormQuantOptions()
    if rope_style is not None:
        o.rope_style = _choice("rope_style", rope_style, _ROPE_STYLES)
    if eps is not None:
        o.eps = eps
    if weight_offset is not None:
        o.weight_offset = weight_offset
    return o


def mla_rope_rmsnorm_quant_into(q, q_out, kv, weight, cos_sin, page_table, kv_cache, *, positions=None,
                                row_offsets=None, cache_len=None, k_scale=None, invalid_tokens=None, cache_dtype=None,
                                rope_style=None, eps=None, weight_offset=None, stream=None):
    """One fusednorm_mla_rope_rmsnorm_quant call on arrays the caller owns (see
    mla_rope_rmsnorm_quant); q_out None rotates q in place."""
    o = _mla_rope_rmsnorm_quant_options(rope_style, eps, weight_offset)
    finishers = []
    if isinstance(k_scale, numbers.Real):
        k_scale = adapter(kv).scalar(kv, float(k_scale))
    args = (_arg_out(q, None, finishers, "q") if q_out is None else _arg_in(q, None, "q"),
            _arg_out(q_out, None, finishers, "q_out"), _arg_in(kv, None, "kv"), _arg_in(weight, None, "weight"),
            _arg_in(cos_sin, None, "cos_sin"), _arg_in(positions, None, "positions"),
            _arg_in(row_offsets, None, "row_offsets"), _arg_in(cache_len, None, "cache_len"),
            _arg_in(page_table, None, "page_table"),
            _arg_out(kv_cache, _opt_format(cache_dtype), finishers, "kv_cache"),
            _arg_in(k_scale, None, "k_scale"), _arg_out(invalid_tokens, None, finishers, "invalid_tokens"))
    check(_C.mla_rope_rmsnorm_quant(*args, o, _stream(stream, kv)))
    for f in finishers:
        f()


def mla_rope_rmsnorm_quant(q, kv, weight, cos_sin, page_table, kv_cache, *, row_offsets=None, positions=None,
                           cache_len=None, k_scale=None, invalid_tokens=None, cache_dtype=None, rope_style="interleaved",
                           eps=None, weight_offset=None, inplace=False, out=None, stream=None):
    """The DeepSeek-style MLA KV-cache write in one pass (fusednorm_mla_rope_rmsnorm_quant): for
    each token t of a ragged batch at position pos(t), q's rope part is rotated, and the latent
    kv row is RMS-normalized (its first L elements) and rotated (its last R), encoded to the
    cache's type and written into the paged cache at page page_table[b, pos // page_size], slot
    pos % page_size (docs/numerics.md §5). Returns the rotated q: a new array (default), out=, or
    q itself (inplace=True).

    q: [T, Hq, R] float32/float16/bfloat16 (any strides but the last: a view of the q
    projection); kv: [T, L + R], q's type (c_kv then k_pe); weight: [L] (gamma of the latent
    norm); cos_sin: [max_pos, R] float32 or bfloat16, row p = cos, sin interleaved per pair;
    page_table: [B, max_pages] int32/int64 page ids; kv_cache: [num_pages, page_size, L + R]
    bfloat16, float16, float32 or FP8 (float8_e4m3fn, float8_e4m3fnuz, float8_e4m3, float8_e5m2,
    float8_e5m2fnuz; cache_dtype= names the format of a raw uint8 cache), caller-owned: only the
    T addressed slots are written. row_offsets: [B + 1] int32/int64 (0, ..., T; sequence b owns
    tokens row_offsets[b] <= t < row_offsets[b+1]); positions: [T] int32/int64, or cache_len: [B]
    (pos = cache_len[b] + t - row_offsets[b]): exactly one of the two. k_scale: the cache's
    dequantization scale (a float or a float32 array [1]; None: 1): the cache holds enc(v /
    k_scale). invalid_tokens: int32 [1] the GPU counts skipped tokens into (the caller zeroes it).
    rope_style: "interleaved" (default; pairs (x[2j], x[2j+1])) or "neox" (pairs (x[j],
    x[j + R/2])). eps (1e-6), weight_offset (0): None means the library's default.
    Raises fusednorm.Error (a subclass per status) with the library's message (CPU: bad index
    values name the tensor, index and value); writes nothing then (q and the cache included)."""
    if _torch_compiling(kv):
        from . import torch as ft
        return ft.mla_rope_rmsnorm_quant(q, kv, weight, cos_sin, page_table, kv_cache, row_offsets=row_offsets,
                                         positions=positions, cache_len=cache_len, k_scale=k_scale,
                                         invalid_tokens=invalid_tokens, cache_dtype=cache_dtype,
                                         rope_style=rope_style, eps=eps, weight_offset=weight_offset,
                                         inplace=inplace, out=out)
    if inplace:
        if out is not None:
            raise TypeError("fusednorm.mla_rope_rmsnorm_quant: inplace=True and out= exclude each other")
        q_out = None
    elif out is None:
        a = adapter(q)
        q_out = a.empty(q, mla_rope_rmsnorm_quant_shapes(a.logical_shape(q, None)), a.format(q))
    else:
        q_out = out
    mla_rope_rmsnorm_quant_into(q, q_out, kv, weight, cos_sin, page_table, kv_cache, positions=positions,
                                row_offsets=row_offsets, cache_len=cache_len, k_scale=k_scale,
                                invalid_tokens=invalid_tokens, cache_dtype=cache_dtype, rope_style=rope_style,
                                eps=eps, weight_offset=weight_offset, stream=stream)
    return q if q_out is None else q_out


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
