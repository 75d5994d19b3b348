"""fusednorm_rmsnorm_fp4, fusednorm_dequantize_fp4, fusednorm_fp4_swizzled_size: rmsnorm_fp4,
dequantize_fp4 (each with _into and _shapes) and fp4_swizzled_size (see _ops_common for the layout
of a module)."""

import numbers

from . import _C
from ._errors import check
from ._formats import FORMATS, format_of
from ._frameworks import adapter
from ._ops_common import _NORMS, _arg_in, _arg_out, _cached_options, _choice, _opt_format, _stream, _torch_compiling

_F4 = FORMATS["float4_e2m1fn"]
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
