"""fusednorm.cast from NumPy and PyTorch CPU arrays against ml_dtypes / NumPy conversions (the
exhaustive proof of the encoders is tests/python/test_cast_oracle.py through the C ABI; this checks
the package: names, framework types, shapes, FP4 packing, both forms)."""

import numpy as np
import pytest

import fusednorm
import oracle
from oracle import codes, make, np_dtype

ENCODE_TO = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3", "float8_e5m2", "float8_e5m2fnuz", "int8",
             "bfloat16", "float16", "float8_e8m0fnu"]


def values(seed=0, shape=(6, 64)):
    """Finite values over many binades, exact ties of every FP8 grid among them, and ±Inf."""
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(shape) * np.float32(2.0) ** rng.integers(-12, 14, size=shape)).astype(np.float32)
    v.flat[:8] = [0.0, -0.0, 1.0625, -1.1875, 3.0, 1e30, -1e30, np.inf]  # ties of e4m3/e5m2, huge, Inf
    return v


def e8m0_nearest(v):
    """enc_e8m0_rn: the nearest power of two, ties up (numerics.md §1), for positive finite v."""
    m, e = np.frexp(np.asarray(v, np.float64))  # v = m 2^e, m in [0.5, 1)
    k = np.where(m < 0.75, e - 1, e)
    return np.clip(k + 127, 0, 0xFE).astype(np.uint8)


@pytest.mark.parametrize("dtype", ENCODE_TO)
def test_encode_from_f32(fw, dtype):
    v = values(1)
    if dtype == "float8_e8m0fnu":
        v = np.abs(v[:, 8:]) + np.float32(1e-30)  # positive finite values: the scale encoder's domain
        got = fusednorm.cast(make(fw, v), dtype)
        assert np.array_equal(codes(got), e8m0_nearest(v))
        up = fusednorm.cast(make(fw, v), dtype, e8m0_rounding="up")
        assert np.array_equal(codes(up), codes(oracle.enc(v, dtype)))
        return
    got = fusednorm.cast(make(fw, v), dtype)
    assert tuple(got.shape) == v.shape
    assert np.array_equal(codes(got), codes(oracle.enc(v, dtype)))


@pytest.mark.parametrize("src", ["float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3", "bfloat16", "float16", "int8"])
def test_decode_to_f32_is_exact(fw, src):
    every = np.arange(256, dtype=np.uint8) if src not in ("bfloat16", "float16") else \
        np.arange(0, 65536, 97, dtype=np.uint16)
    x = every.view(np_dtype(src))
    if src == "float8_e4m3" and fw == "torch":  # no torch dtype: uint8 codes and src_dtype
        got = fusednorm.cast(make(fw, every), "float32", src_dtype=src)
    else:
        got = fusednorm.cast(make(fw, x), "float32")
    want = x.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(oracle.as_f32(got)), nan)
    assert np.array_equal(codes(got)[~nan], codes(want)[~nan])


def test_float4_packing(fw):
    v = values(2, (4, 32)) / np.float32(100.0)
    want = oracle.enc(v, "float4_e2m1fn")  # ml_dtypes: one element a byte
    got = fusednorm.cast(make(fw, v), "float4_e2m1fn")
    if fw == "numpy":  # ml_dtypes float4_e2m1fn, one a byte, same shape
        assert got.dtype == np_dtype("float4_e2m1fn") and got.shape == v.shape
        assert np.array_equal(codes(got), codes(want))
    else:  # torch.float4_e2m1fn_x2: two a byte, low nibble first
        b = codes(got)
        assert b.shape == (4, 16)
        unpacked = np.stack([b & 0xF, b >> 4], axis=-1).reshape(4, 32)
        assert np.array_equal(unpacked, codes(want))
    back = fusednorm.cast(got, "float32")
    assert np.array_equal(codes(back), codes(want.astype(np.float32)))


def test_float4_from_packed_uint8(fw):
    nibbles = np.arange(32, dtype=np.uint8).reshape(2, 16) % 16
    packed = (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)
    got = fusednorm.cast(make(fw, packed), "float32", src_dtype="float4_e2m1fn")
    assert tuple(got.shape) == (2, 16)
    assert np.array_equal(oracle.as_f32(got), nibbles.view(np_dtype("float4_e2m1fn")).astype(np.float32))


def test_out_form(fw):
    v = values(3)
    dst = make(fw, np.full(v.shape, 0x55, np.uint8).view(np_dtype("float8_e5m2")))
    got = fusednorm.cast(make(fw, v), out=dst)
    assert got is dst
    assert np.array_equal(codes(dst), codes(oracle.enc(v, "float8_e5m2")))
    raw = make(fw, np.zeros(v.shape, np.uint8))
    fusednorm.cast(make(fw, v), "float8_e4m3", out=raw)  # uint8 codes named by dtype=
    assert np.array_equal(codes(raw), codes(oracle.enc(v, "float8_e4m3")))
    if fw == "numpy":  # ml_dtypes float4 outputs are staged and unpacked after the call
        f4 = np.zeros((2, 8), np_dtype("float4_e2m1fn"))
        src = np.linspace(-6, 6, 16, dtype=np.float32).reshape(2, 8)
        fusednorm.cast(src, out=f4)
        assert np.array_equal(codes(f4), codes(oracle.enc(src, "float4_e2m1fn")))


def test_dtype_objects_and_aliases():
    v = values(4)
    want = codes(oracle.enc(v, "float8_e4m3fn"))
    for dtype in ("float8_e4m3fn", "f8e4m3fn", np_dtype("float8_e4m3fn"), np_dtype("float8_e4m3fn").type):
        assert np.array_equal(codes(fusednorm.cast(v, dtype)), want)
    assert fusednorm.format_of("e8m0").name == "float8_e8m0fnu"
    with pytest.raises(ValueError, match="unknown element type"):
        fusednorm.cast(v, "float7")
