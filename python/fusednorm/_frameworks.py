"""Arrays of each framework as the C extension takes them, and new arrays in the caller's
framework and on the caller's device.

An adapter answers, for arrays of its framework:
  format(x)              the Format of x's elements (None: raw bytes, the caller must name one)
  logical_shape(x, f)    the shape the library sees (packed FP4 bytes: the last dimension doubled)
  arg_in(x, f)           what _C takes for an input of format f
  arg_out(x, f)          (what _C takes, finish): finish() (or None) completes a staged output
                         after a successful call
  empty(like, shape, f, column_major=False)
                         a new array of format f and logical shape `shape` on like's device;
                         column_major: stored with the last axis outermost (scales [rows, G]
                         as a [G, rows] buffer: strides (1, rows))
  scalar(like, value)    a float32 array [1] holding value, on like's device
  stream(x)              the stream the producer orders its work on (0 on the CPU)
"""

import sys

import numpy as np

from ._formats import FORMATS, format_or_none, numpy_dtype, torch_dtype

_CLASSIC = {"float32", "float16", "int8"}  # types every framework exports through DLPack
_F4 = FORMATS["float4_e2m1fn"]


def _packed_shape(shape):
    return tuple(shape[:-1]) + (shape[-1] // 2,)


def _unpacked_shape(shape):
    return tuple(shape[:-1]) + (2 * shape[-1],)


class _Adapter:
    def format(self, x):
        return format_or_none(getattr(x, "dtype", None))


# ------------------------------------------------------------------------------ NumPy


class NumpyAdapter(_Adapter):
    name = "numpy"

    def logical_shape(self, x, f):
        # An ml_dtypes float4_e2m1fn array holds one element a byte; raw uint8 bytes are packed.
        if f is _F4 and x.dtype == np.uint8 and x.ndim > 0:
            return _unpacked_shape(x.shape)
        return tuple(x.shape)

    def _raw(self, x, f):
        if f.native_numpy and x.dtype == numpy_dtype(f):
            return x
        storage = np.uint16 if f.bits == 16 else np.uint8
        return (x if x.dtype == storage else x.view(storage), f.code, f.bits)

    def arg_in(self, x, f):
        if f is _F4 and x.dtype != np.uint8:
            return (_pack_f4(x), f.code, f.bits)
        return self._raw(x, f)

    def arg_out(self, x, f):
        if f is _F4 and x.dtype != np.uint8:
            if x.ndim == 0 or x.shape[-1] % 2:
                # Let the library report the odd last dimension, with its message.
                return (x.view(np.uint8), f.code, f.bits), None
            staged = np.empty(_packed_shape(x.shape), np.uint8)

            def finish():
                x[...] = _unpack_f4(staged).view(x.dtype)
            return (staged, f.code, f.bits), finish
        return self._raw(x, f), None

    def empty(self, like, shape, f, column_major=False):
        dt = numpy_dtype(f)
        if column_major and len(shape) > 1:
            a = np.empty((shape[-1],) + tuple(shape[:-1]), dt)
            return np.moveaxis(a, 0, -1)
        return np.empty(shape, dt)

    def scalar(self, like, value):
        return np.array([value], np.float32)

    def floats(self, like, values):
        return np.array(values, np.float32)

    def stream(self, x):
        return 0


def _pack_f4(x):
    codes = np.ascontiguousarray(x).view(np.uint8)
    if codes.ndim == 0 or codes.shape[-1] % 2:
        return codes  # the library reports the odd last dimension
    return (codes[..., 0::2] & 0x0F) | ((codes[..., 1::2] & 0x0F) << 4)


def _unpack_f4(packed):
    out = np.empty(packed.shape[:-1] + (2 * packed.shape[-1],), np.uint8)
    out[..., 0::2] = packed & 0x0F
    out[..., 1::2] = packed >> 4
    return out


# ------------------------------------------------------------------------------ PyTorch


class TorchAdapter(_Adapter):
    name = "torch"

    def __init__(self):
        import torch
        from . import _C
        self.torch = torch
        self.to_dlpack = torch.utils.dlpack.to_dlpack  # a capsule, no stream synchronization
        # The torch dtypes whose DLPack export is the library's type (probed once: PyTorch
        # versions differ); others travel as uint8/uint16 views with the type code beside them.
        self.native = {}
        for f in FORMATS.values():
            dt = getattr(torch, f.torch, None) if f.torch else None
            if dt is None or f is _F4:
                continue
            try:
                code, bits, lanes = _C.dlpack_dtype(self.to_dlpack(torch.empty(0, dtype=dt)))
            except Exception:
                continue
            if (code, bits, lanes) == (f.code, f.bits, 1):
                self.native[dt] = f

    def logical_shape(self, x, f):
        if f is _F4 and x.dim() > 0:  # float4_e2m1fn_x2 or uint8: two elements a byte
            return _unpacked_shape(x.shape)
        return tuple(x.shape)

    def _dl(self, x):
        # torch.utils.dlpack.to_dlpack: no synchronization; the call runs on the stream PyTorch
        # orders x's work on (self.stream), so none is needed.
        return self.to_dlpack(x.detach() if x.requires_grad else x)

    def arg_in(self, x, f):
        if self.native.get(x.dtype) is f:
            return self._dl(x)
        torch = self.torch
        storage = torch.uint16 if f.bits == 16 else torch.uint8
        raw = x if x.dtype == storage else x.view(storage)
        return (self._dl(raw), f.code, f.bits)

    def arg_out(self, x, f):
        return self.arg_in(x, f), None

    def empty(self, like, shape, f, column_major=False):
        torch = self.torch
        if f.torch is not None and hasattr(torch, f.torch):
            dt = torch_dtype(f)
        else:  # a type PyTorch lacks (float8_e4m3): its codes as uint8
            dt = torch.uint8
        if f is _F4:
            shape = _packed_shape(shape)
        if column_major and len(shape) > 1:
            a = torch.empty((shape[-1],) + tuple(shape[:-1]), dtype=dt, device=like.device)
            return a.movedim(0, -1)
        return torch.empty(shape, dtype=dt, device=like.device)

    def scalar(self, like, value):
        return self.torch.full((1,), value, dtype=self.torch.float32, device=like.device)

    def floats(self, like, values):
        return self.torch.tensor(values, dtype=self.torch.float32, device=like.device)

    def stream(self, x):
        if not x.is_cuda:  # CPU (ROCm builds of PyTorch report their GPUs as cuda too)
            return 0
        return self.torch.cuda.current_stream(x.device).cuda_stream


# ------------------------------------------------------------------------------ any other DLPack array


def _refuse_immutable(x):
    """JAX arrays are immutable: DLPack would let the library write into a buffer JAX may share."""
    if type(x).__module__.split(".")[0] in ("jax", "jaxlib"):
        raise TypeError("fusednorm: JAX arrays are immutable and cannot be written: pass JAX inputs "
                        "with out= arrays of a framework that owns mutable memory (NumPy, PyTorch, CuPy)")


class DlpackAdapter(_Adapter):
    """Arrays of other frameworks (CuPy, ...): DLPack in, and the array API namespace
    (x.__array_namespace__()) for new arrays. Types the framework lacks are stored as uint8."""

    name = "dlpack"

    def logical_shape(self, x, f):
        shape = tuple(x.shape)
        if f is _F4 and shape and self.format(x) is not _F4:
            return _unpacked_shape(shape)
        return shape

    def _capsule(self, x):
        device_type, _ = x.__dlpack_device__()
        if int(device_type) == 1:
            return x
        return x.__dlpack__(stream=self.stream(x) or (1 if int(device_type) == 2 else 0))

    def arg_in(self, x, f):
        own = self.format(x)
        if own is f and (f.name in _CLASSIC or f.name == "bfloat16"):
            return self._capsule(x)
        return (self._capsule(x), f.code, f.bits)

    def arg_out(self, x, f):
        _refuse_immutable(x)
        return self.arg_in(x, f), None

    @staticmethod
    def _namespace(like):
        """The array namespace of like (array API), else its top-level module (CuPy, ...)."""
        ns = getattr(like, "__array_namespace__", None)
        return ns() if ns is not None else sys.modules[type(like).__module__.split(".")[0]]

    @staticmethod
    def _on_device(make, like, *args, **kw):
        """make(*args, device=like.device, **kw) where the namespace takes a device (array API),
        else make(*args, **kw) on the framework's current device."""
        if hasattr(like, "device"):
            try:
                return make(*args, device=like.device, **kw)
            except TypeError:
                pass
        return make(*args, **kw)

    def empty(self, like, shape, f, column_major=False):
        _refuse_immutable(like)
        xp = self._namespace(like)
        dt = getattr(xp, f.name, None)
        if dt is None:
            dt = xp.uint16 if f.bits == 16 else xp.uint8
            if f is _F4:
                shape = _packed_shape(shape)
        if column_major and len(shape) > 1:
            a = self._on_device(xp.empty, like, (shape[-1],) + tuple(shape[:-1]), dtype=dt)
            return xp.moveaxis(a, 0, -1)
        return self._on_device(xp.empty, like, shape, dtype=dt)

    def scalar(self, like, value):
        xp = self._namespace(like)
        return self._on_device(xp.asarray, like, [value], dtype=xp.float32)

    def floats(self, like, values):
        xp = self._namespace(like)
        return self._on_device(xp.asarray, like, list(values), dtype=xp.float32)

    def stream(self, x):
        device_type, _ = x.__dlpack_device__()
        if int(device_type) == 1:
            return 0
        mod = type(x).__module__.split(".")[0]
        if mod == "cupy":
            import cupy
            return cupy.cuda.get_current_stream().ptr
        return 0


class CapsuleAdapter(_Adapter):
    """A DLPack capsule (from x.__dlpack__() or to_dlpack): usable once, as an argument of the
    out= forms and of the *_into functions; its element type is the capsule's own unless the
    call names one (dtype=, src_dtype=, ...). No new arrays can be made like it."""

    name = "capsule"

    def format(self, x):
        return None

    def arg_in(self, x, f):
        return (x, f.code, f.bits)

    def arg_out(self, x, f):
        return self.arg_in(x, f), None

    def _no_new_arrays(self, *args, **kw):
        raise TypeError("fusednorm: a DLPack capsule cannot be the model for new arrays; pass out=")

    logical_shape = empty = scalar = floats = _no_new_arrays

    def stream(self, x):
        return 0


_ADAPTERS = {}


def adapter(x):
    """The adapter for x's framework (cached by type)."""
    t = type(x)
    a = _ADAPTERS.get(t)
    if a is not None:
        return a
    mod = t.__module__.split(".")[0]
    if isinstance(x, np.ndarray):
        a = NumpyAdapter()
    elif mod == "torch":
        a = TorchAdapter()
        from . import torch as _register  # noqa: F401  (the custom ops, on first torch use)
    elif hasattr(x, "__dlpack__"):
        a = DlpackAdapter()
    elif t.__name__ == "PyCapsule":
        a = CapsuleAdapter()
    else:
        raise TypeError("fusednorm: %s.%s is not an array (it has no __dlpack__)" % (t.__module__, t.__name__))
    _ADAPTERS[t] = a
    return a
