"""fusednorm_cast: cast, cast_into, cast_shapes (see _ops_common for the layout of a module)."""

from . import _C
from ._errors import check
from ._formats import format_of
from ._frameworks import adapter
from ._ops_common import _arg_in, _arg_out, _cached_options, _choice, _opt_format, _stream, _torch_compiling

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
