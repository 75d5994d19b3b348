"""Element types: the names users write (ml_dtypes / PyTorch spelling), their DLPack codes, and
the matching NumPy (ml_dtypes) and PyTorch dtypes."""

from typing import NamedTuple, Optional

# DLPack type codes (DLPack 1.1; fusednorm.h defines the FP8/FP4 ones for DLPack 0.6).
kDLInt, kDLUInt, kDLFloat, kDLBfloat = 0, 1, 2, 4
kDLFloat8_e4m3, kDLFloat8_e4m3fn, kDLFloat8_e4m3fnuz = 8, 10, 11
kDLFloat8_e5m2, kDLFloat8_e5m2fnuz, kDLFloat8_e8m0fnu, kDLFloat4_e2m1fn = 12, 13, 14, 17

kDLCPU, kDLCUDA, kDLROCM = 1, 2, 10


class Format(NamedTuple):
    name: str               # canonical name: ml_dtypes' (and PyTorch's, where it has the type)
    code: int               # DLPack type code
    bits: int               # bits of one element (4: two elements a byte, low nibble first)
    numpy: str              # attribute of numpy or ml_dtypes holding the NumPy dtype
    torch: Optional[str]    # attribute of torch holding the dtype (None: PyTorch lacks it)
    native_numpy: bool      # NumPy itself has the type (exports it through DLPack)


FORMATS = {f.name: f for f in (
    Format("float32", kDLFloat, 32, "float32", "float32", True),
    Format("float16", kDLFloat, 16, "float16", "float16", True),
    Format("bfloat16", kDLBfloat, 16, "bfloat16", "bfloat16", False),
    Format("int8", kDLInt, 8, "int8", "int8", True),
    Format("float8_e4m3fn", kDLFloat8_e4m3fn, 8, "float8_e4m3fn", "float8_e4m3fn", False),
    Format("float8_e4m3fnuz", kDLFloat8_e4m3fnuz, 8, "float8_e4m3fnuz", "float8_e4m3fnuz", False),
    # IEEE-like e4m3 (infinities, NaN at 0x7F/0xFF, max 240): ml_dtypes' float8_e4m3.
    Format("float8_e4m3", kDLFloat8_e4m3, 8, "float8_e4m3", None, False),
    Format("float8_e5m2", kDLFloat8_e5m2, 8, "float8_e5m2", "float8_e5m2", False),
    Format("float8_e5m2fnuz", kDLFloat8_e5m2fnuz, 8, "float8_e5m2fnuz", "float8_e5m2fnuz", False),
    Format("float8_e8m0fnu", kDLFloat8_e8m0fnu, 8, "float8_e8m0fnu", "float8_e8m0fnu", False),
    # Two elements a byte. NumPy (ml_dtypes) keeps one a byte; PyTorch's float4_e2m1fn_x2 packs.
    Format("float4_e2m1fn", kDLFloat4_e2m1fn, 4, "float4_e2m1fn", "float4_e2m1fn_x2", False),
)}

# The C library's short names (fusednorm.h, docs/numerics.md) name the same types.
ALIASES = {
    "f32": "float32", "f16": "float16", "bf16": "bfloat16", "f8e4m3fn": "float8_e4m3fn",
    "f8e4m3fnuz": "float8_e4m3fnuz", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2",
    "f8e5m2fnuz": "float8_e5m2fnuz", "e8m0": "float8_e8m0fnu", "f4e2m1": "float4_e2m1fn",
    "float4_e2m1fn_x2": "float4_e2m1fn", "half": "float16", "float": "float32",
}

# Cached lookups: dtype object or name -> Format, or None for a type fusednorm lacks (uint8,
# float64, ...). Three dicts by kind of key: torch.compile traces lookups of names and torch
# dtypes, and PyTorch 2.11's dynamo cannot trace a lookup in a dict that holds NumPy dtypes.
_BY_NAME = {}
_BY_TORCH = {}
_CACHE = {}


def _cache_for(dtype) -> dict:
    if isinstance(dtype, str):
        return _BY_NAME
    return _BY_TORCH if type(dtype).__module__ == "torch" else _CACHE


def format_or_none(dtype) -> Optional[Format]:
    """format_of(dtype), or None where fusednorm has no such type. Cached per dtype object."""
    cache = _cache_for(dtype)
    try:
        return cache[dtype]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return _lookup(dtype)
    f = cache[dtype] = _lookup(dtype)
    return f


def format_of(dtype) -> Format:
    """The Format of a name ("float8_e4m3fn", "f8e4m3fn"), a NumPy/ml_dtypes dtype or type, or a
    torch.dtype. Raises ValueError for anything else."""
    f = format_or_none(dtype)
    if f is None:
        raise ValueError("fusednorm: unknown element type %r; known: %s" % (dtype, ", ".join(FORMATS)))
    return f


def _lookup(dtype) -> Optional[Format]:
    if isinstance(dtype, Format):
        return dtype
    if isinstance(dtype, str):
        name = ALIASES.get(dtype, dtype)
    else:
        # torch.float8_e4m3fn -> "float8_e4m3fn"; np.dtype / ml_dtypes types -> their name.
        text = str(dtype)
        if text.startswith("torch."):
            name = text[len("torch."):]
        else:
            try:
                import numpy as np
                name = np.dtype(dtype).name
            except Exception:
                name = text
        name = ALIASES.get(name, name)
    return FORMATS.get(name)


def numpy_dtype(f: Format):
    import numpy as np
    if f.native_numpy:
        return np.dtype(f.numpy)
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, f.numpy))


def torch_dtype(f: Format):
    import torch
    if f.torch is None or not hasattr(torch, f.torch):
        raise ValueError("fusednorm: PyTorch %s has no dtype for %s" % (torch.__version__, f.name))
    return getattr(torch, f.torch)
