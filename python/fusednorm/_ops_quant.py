"""fusednorm_rmsnorm_quant: rmsnorm_quant, rmsnorm_quant_into, rmsnorm_quant_shapes (see
_ops_common for the layout of a module)."""

import numbers

from . import _C
from ._errors import check
from ._formats import format_of
from ._frameworks import adapter
from ._ops_common import _NORMS, _arg_in, _arg_out, _cached_options, _choice, _opt_format, _stream, _torch_compiling

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
