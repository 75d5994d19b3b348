"""Arrays of a framework the package has no adapter for: anything with __dlpack__ (here a wrapper
around NumPy that offers only the DLPack and array-API protocols), and DLPack capsules."""

import numpy as np
import pytest

import fusednorm
import oracle
from oracle import codes


class Foreign:
    """An array type fusednorm does not know: DLPack export, shape, dtype, device and an array-API
    namespace (NumPy's), nothing else."""

    def __init__(self, a):
        self._a = a
        self.shape, self.dtype, self.device = a.shape, a.dtype, "cpu"

    def __dlpack__(self, **kw):
        kw.pop("stream", None)  # a CPU producer has nothing to order
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

    def __array_namespace__(self):
        return np


def test_rmsnorm_quant_on_a_foreign_array():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 128)).astype(np.float32)
    w = (rng.random(128) + 0.5).astype(np.float32)
    q, s = fusednorm.rmsnorm_quant(Foreign(x), Foreign(w), dtype="float8_e5m2", scale_mode="group", group_size=32)
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w, dtype="float8_e5m2", scale_mode="group", group_size=32)
    # NumPy's namespace has no float8 type: the codes come back as uint8
    assert q.dtype == np.uint8 and s.dtype == np.float32
    assert np.array_equal(q, codes(want_q)) and np.array_equal(s, want_s)


def test_out_form_into_foreign_arrays_and_capsules():
    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32)
    dst = np.zeros((2, 32), np.float16)
    fusednorm.cast(Foreign(x), out=Foreign(dst))
    assert np.array_equal(dst, x.astype(np.float16))
    dst8 = np.zeros((2, 32), np.uint8)
    fusednorm.cast_into(x.__dlpack__(), dst8.__dlpack__(), dst_dtype="float8_e4m3fn")
    assert np.array_equal(dst8, codes(oracle.enc(x, "float8_e4m3fn")))


def test_stream_argument_on_the_cpu():
    """The CPU ignores streams, but the argument is checked and accepted in every spelling."""
    x = np.ones((2, 32), np.float32)

    class CupyLikeStream:
        ptr = 0

    for stream in (0, 12345, CupyLikeStream()):
        assert np.array_equal(fusednorm.cast(x, "float16", stream=stream), x.astype(np.float16))


def test_jax_arrays_are_inputs_only():
    """JAX arrays are immutable: read as inputs, refused as outputs (no JAX here: a stand-in
    class from a module named like JAX's)."""
    ArrayImpl = type("ArrayImpl", (Foreign,), {"__module__": "jaxlib._jax"})
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    out = np.zeros((2, 32), np.float16)
    fusednorm.cast(ArrayImpl(x), out=out)
    assert np.array_equal(out, x.astype(np.float16))
    with pytest.raises(TypeError, match="immutable"):
        fusednorm.cast(ArrayImpl(x), "float16")
    with pytest.raises(TypeError, match="immutable"):
        fusednorm.cast(x, out=ArrayImpl(np.zeros((2, 32), np.float16)))
