"""Bad calls raise fusednorm.Error subclasses carrying the library's status and message, and write
nothing: every output (and the residual) is poisoned before the call and compared after."""

import numpy as np
import pytest

import fusednorm
from oracle import codes, make, np_dtype

H = 256


def poisoned(fw, shape, dtype, byte=0xAB):
    a = np.full(shape + (np.dtype(np_dtype(dtype)).itemsize,), byte, np.uint8).view(np_dtype(dtype))
    return make(fw, a.reshape(shape))


def tensors(fw):
    rng = np.random.default_rng(0)
    x = make(fw, rng.standard_normal((4, H)).astype(np.float32))
    w = make(fw, np.ones(H, np.float32))
    return x, w


# (what, keyword arguments changed from a good call, exception class, fragments of the library's message)
RMSNORM_CASES = [
    ("weight shape", dict(weight_h=100), fusednorm.InvalidArgumentError, ["weight has shape [100]", "[256]"]),
    ("group size", dict(scale_mode="group", group_size=100, scales_shape=(4, 2)), fusednorm.UnsupportedError,
     ["group_size = 100", "32, 64 and 128"]),
    ("negative eps", dict(eps=-1.0), fusednorm.InvalidArgumentError, ["eps = -1", ">= 0"]),
    ("output format", dict(out_dtype="bfloat16"), fusednorm.UnsupportedError, ["output.dtype = bf16"]),
    ("scales shape", dict(scales_shape=(4, 2)), fusednorm.InvalidArgumentError, ["scales"]),
    ("packed with groups", dict(scale_mode="group", packed_scales=True), fusednorm.UnsupportedError,
     ["PACKED_ROW_END", "DYNAMIC_ROW"]),
]


@pytest.mark.parametrize("what,change,exc,fragments", RMSNORM_CASES, ids=[c[0] for c in RMSNORM_CASES])
def test_rmsnorm_quant_bad_call_writes_nothing(fw, what, change, exc, fragments):
    x, w = tensors(fw)
    if "weight_h" in change:
        w = make(fw, np.ones(change["weight_h"], np.float32))
    out_dtype = change.get("out_dtype", "float8_e4m3fn")
    packed = change.get("packed_scales", False)
    q = poisoned(fw, (4, H + 4 if packed else H), out_dtype)
    s = poisoned(fw, change.get("scales_shape", (4, 1)), "float32")
    res = poisoned(fw, (4, H), "float32", 0x3C)  # finite f32 values: a valid residual
    before = [codes(t) for t in (q, s, res)]
    kw = {k: v for k, v in change.items() if k in ("scale_mode", "group_size", "eps", "packed_scales")}
    with pytest.raises(exc) as info:
        fusednorm.rmsnorm_quant(x, w, out=(q, None if packed else s), residual=res, **kw)
    e = info.value
    assert isinstance(e, fusednorm.Error)
    assert e.status == exc.status and e.status_name in str(e)
    for f in fragments:
        assert f in e.message, (f, e.message)
    for b, t in zip(before, (q, s, res)):
        assert np.array_equal(b, codes(t))


def test_overlapping_output_is_rejected(fw):
    x, w = tensors(fw)
    x_bytes = x.view(np.uint8) if fw == "numpy" else x.view(__import__("torch").uint8)
    before = codes(x)
    s = poisoned(fw, (4, 1), "float32")
    with pytest.raises(fusednorm.InvalidArgumentError, match="overlap"):
        fusednorm.rmsnorm_quant(x, w, dtype="float8_e4m3fn", out=(x_bytes[:, :H], s))
    assert np.array_equal(before, codes(x))


def test_cast_bad_calls(fw):
    x, _ = tensors(fw)
    dst = poisoned(fw, (4, 128), "float16")
    before = codes(dst)
    with pytest.raises(fusednorm.InvalidArgumentError, match=r"dst has shape \[4, 128\] but src has shape \[4, 256\]"):
        fusednorm.cast(x, out=dst)
    assert np.array_equal(before, codes(dst))
    wide = poisoned(fw, (4, 2 * H), "float16")
    before = codes(wide)
    with pytest.raises(fusednorm.UnsupportedError, match="last dimension must be contiguous"):
        fusednorm.cast(x, out=wide[:, ::2])
    assert np.array_equal(before, codes(wide))


def test_errors_raised_by_the_package():
    """Argument errors found before the library is called: Python exceptions, nothing written."""
    x = np.ones((4, H), np.float32)
    w = np.ones(H, np.float32)
    with pytest.raises(ValueError, match="scale_mode='bogus'"):
        fusednorm.rmsnorm_quant(x, w, scale_mode="bogus")
    q = np.zeros((4, H), np_dtype("float8_e5m2"))
    with pytest.raises(ValueError, match="output holds float8_e5m2 elements, not float8_e4m3fn"):
        fusednorm.rmsnorm_quant(x, w, dtype="float8_e4m3fn", out=(q, np.zeros((4, 1), np.float32)))
    with pytest.raises(TypeError, match="is not an array"):
        fusednorm.cast([1.0, 2.0], "float16")
    ro = np.zeros((4, H), np.float16)
    ro.setflags(write=False)
    with pytest.raises(TypeError, match="read-only"):
        fusednorm.cast(x, out=ro)
    with pytest.raises(TypeError, match="stream="):
        fusednorm.cast(x, "float16", stream="default")


def test_status_classes():
    assert issubclass(fusednorm.InvalidArgumentError, ValueError)
    assert issubclass(fusednorm.UnsupportedError, NotImplementedError)
    seen = {c.status: c.status_name for c in (fusednorm.InvalidArgumentError, fusednorm.UnsupportedError,
                                              fusednorm.BackendUnavailableError, fusednorm.DeviceError,
                                              fusednorm.InternalError)}
    assert seen == {1: "INVALID_ARGUMENT", 2: "UNSUPPORTED", 3: "BACKEND_UNAVAILABLE", 4: "DEVICE_ERROR",
                    5: "INTERNAL_ERROR"}
    from fusednorm import _C
    for status, name in seen.items():  # the names are the library's
        assert _C.status_string(status) == name
