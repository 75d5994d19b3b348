"""fusednorm.rmsnorm_quant from NumPy and PyTorch CPU arrays against the NumPy + ml_dtypes oracle
(tests/oracle.py, from docs/numerics.md): every code and scale byte must match."""

import numpy as np
import pytest

import fusednorm
import oracle
from oracle import IN_FORMATS, OUT_FORMATS, SCALE_FORMATS, codes, make, np_dtype

ROWS, H = 5, 256


def inputs(in_fmt, rows=ROWS, h=H, seed=0):
    """x [rows, H] with rows of very different magnitudes and one zero row, weight [H]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, h)).astype(np.float32)
    x *= np.float32(10.0) ** rng.integers(-3, 4, size=(rows, 1)).astype(np.float32)
    x[min(2, rows - 1)] = 0
    w = (0.5 + rng.random(h)).astype(np.float32)
    return x.astype(np_dtype(in_fmt)), w.astype(np_dtype(in_fmt))


def check_same(got, want, what):
    g, w = codes(got), codes(want)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    bad = np.argwhere(g != w)
    assert bad.size == 0, "%s: %d of %d elements differ, first at %s: got 0x%x, want 0x%x" % (
        what, len(bad), g.size, tuple(bad[0]), g[tuple(bad[0])], w[tuple(bad[0])])


@pytest.mark.parametrize("in_fmt", IN_FORMATS)
@pytest.mark.parametrize("dtype", OUT_FORMATS)
@pytest.mark.parametrize("mode", ["row", "group", "static"])
def test_functional_matches_oracle(fw, in_fmt, dtype, mode):
    x, w = inputs(in_fmt)
    kw = dict(dtype=dtype, scale_mode=mode, group_size=64)
    if mode == "static":
        kw["scale"] = 0.0125
    q, s = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w), **kw)
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w, in_fmt=in_fmt, **kw)
    assert type(q) is type(make(fw, x))
    if not (fw == "torch" and dtype == "float8_e4m3"):  # PyTorch lacks float8_e4m3: uint8 codes
        assert str(q.dtype).replace("torch.", "") == dtype
    check_same(q, want_q, "q")
    if mode == "static":
        assert float(oracle.as_f32(s)[0]) == np.float32(0.0125)
    else:
        assert tuple(s.shape) == (ROWS, 1 if mode == "row" else H // 64)
        check_same(s, want_s, "scales")


@pytest.mark.parametrize("scale_dtype", SCALE_FORMATS)
@pytest.mark.parametrize("mode", ["row", "group"])
def test_scale_dtypes(fw, scale_dtype, mode):
    x, w = inputs("bfloat16", seed=1)
    kw = dict(dtype="float8_e4m3fn", scale_mode=mode, group_size=32, scale_dtype=scale_dtype)
    q, s = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w), **kw)
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w, in_fmt="bfloat16", **kw)
    assert str(s.dtype).replace("torch.", "") == scale_dtype
    check_same(s, want_s, "scales")
    check_same(q, want_q, "q")


def test_out_form_writes_callers_arrays(fw):
    x, w = inputs("float16", seed=2)
    q = np.full((ROWS, H), 0xAB, np.uint8).view(np_dtype("float8_e5m2"))
    s = np.full((ROWS, H // 128), np.nan, np.float32)
    q, s = make(fw, q), make(fw, s)
    got_q, got_s = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w), scale_mode="group", out=(q, s))
    assert got_q is q and got_s is s
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w, in_fmt="float16", dtype="float8_e5m2", scale_mode="group")
    check_same(q, want_q, "q")
    check_same(s, want_s, "scales")


def test_out_form_raw_uint8_codes(fw):
    """uint8 outputs hold codes of the format named by dtype= (how NumPy users without ml_dtypes
    arrays, and PyTorch users of float8_e4m3, pass outputs)."""
    x, w = inputs("float32", seed=3)
    q = make(fw, np.zeros((ROWS, H), np.uint8))
    s = make(fw, np.zeros((ROWS, 1), np.float32))
    fusednorm.rmsnorm_quant(make(fw, x), make(fw, w), dtype="float8_e4m3", out=(q, s))
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w, dtype="float8_e4m3")
    check_same(q, want_q, "q")
    check_same(s, want_s, "scales")


def test_residual_is_updated_in_place(fw):
    x, w = inputs("bfloat16", seed=4)
    r0, _ = inputs("bfloat16", seed=5)
    res = make(fw, r0)
    q, s = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w), residual=res)
    want_q, want_s, want_res = oracle.rmsnorm_quant(x, w, r0, in_fmt="bfloat16")
    check_same(res, want_res, "residual")
    check_same(q, want_q, "q")
    check_same(s, want_s, "scales")


def test_options(fw):
    x, w = inputs("float32", seed=6)
    kw = dict(dtype="int8", eps=1e-3, weight_offset=1.0, scale_ub=0.5, min_scale=1e-4, qmax=100.0)
    q, s = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w), **kw)
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w, **kw)
    check_same(q, want_q, "q")
    check_same(s, want_s, "scales")


def test_quant_only_and_weight_dtype(fw):
    x, _ = inputs("float16", seed=7)
    q, s = fusednorm.rmsnorm_quant(make(fw, x), None, norm="none", dtype="float8_e4m3fnuz")
    want_q, want_s, _ = oracle.rmsnorm_quant(x, None, in_fmt="float16", norm="none", dtype="float8_e4m3fnuz")
    check_same(q, want_q, "q")
    check_same(s, want_s, "scales")
    # The weight's dtype need not be the input's: the same values give the same bytes.
    x, w = inputs("float32", seed=8)
    w16 = w.astype(np_dtype("bfloat16"))
    a = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w16))
    b = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w16.astype(np.float32)))
    check_same(a[0], b[0], "q")
    check_same(a[1], b[1], "scales")


def test_scales_column_major(fw):
    x, w = inputs("float32", rows=6, seed=9)
    q, s = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w), scale_mode="group", group_size=32,
                                   scales_column_major=True)
    elem = 4
    strides = s.strides if fw == "numpy" else tuple(v * elem for v in s.stride())
    assert tuple(s.shape) == (6, H // 32) and strides == (elem, 6 * elem)
    _, want_s, _ = oracle.rmsnorm_quant(x, w, scale_mode="group", group_size=32)
    check_same(s, want_s, "scales")


def test_packed_scales(fw):
    x, w = inputs("float32", seed=10)
    q, s = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w), packed_scales=True)
    assert s is None and tuple(q.shape) == (ROWS, H + 4)
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w)
    b = codes(q)
    check_same(b[:, :H], codes(want_q), "q")
    assert np.array_equal(np.ascontiguousarray(b[:, H:]).view("<f4"), want_s.astype(np.float32))


def test_leading_dimensions_and_strided_rows(fw):
    x, w = inputs("float32", rows=12, seed=11)
    x3 = x.reshape(3, 4, H)
    q, s = fusednorm.rmsnorm_quant(make(fw, x3), make(fw, w), scale_mode="group")
    assert tuple(q.shape) == (3, 4, H) and tuple(s.shape) == (3, 4, 2)
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w, scale_mode="group")
    check_same(codes(q).reshape(12, H), want_q, "q")
    check_same(codes(s).reshape(12, 2), want_s, "scales")
    # every other row of a wider buffer: a strided leading dimension
    wide = np.zeros((12, 2 * H), np.float32)
    wide[:, :H] = x
    src = make(fw, wide)[:, :H]
    q, s = fusednorm.rmsnorm_quant(src, make(fw, w))
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w)
    check_same(q, want_q, "q")
    check_same(s, want_s, "scales")


def test_non_finite_rows_follow_the_edge_policy(fw):
    x, w = inputs("float32", seed=12)
    x[0, 3] = np.nan
    x[1, 7] = np.inf
    q, s = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w))
    want_q, want_s, _ = oracle.rmsnorm_quant(x, w)
    assert np.isnan(oracle.as_f32(s)[:2]).all()
    check_same(q, want_q, "q")
    check_same(s, want_s, "scales")


@pytest.mark.parametrize("h", [8, 40, 2048, 5120, 7168])
def test_hidden_sizes_of_real_models(h):
    """The canonical reduction (numerics.md §2) at sizes with a tail (40: 8 partials, 5 steps), many
    steps and the partial counts of real models; per row and per group of 32 where H allows."""
    x, w = inputs("bfloat16", rows=3, h=h, seed=h)
    for mode in ("row", "group") if h % 32 == 0 else ("row",):
        q, s = fusednorm.rmsnorm_quant(x, w, scale_mode=mode, group_size=32)
        want_q, want_s, _ = oracle.rmsnorm_quant(x, w, in_fmt="bfloat16", scale_mode=mode, group_size=32)
        check_same(q, want_q, "q")
        check_same(s, want_s, "scales")


def test_static_scale_spellings(fw):
    x, w = inputs("float32", seed=13)
    want_q, _, _ = oracle.rmsnorm_quant(x, w, scale_mode="static", scale=0.25)
    for scale in (0.25, np.float32(0.25), make(fw, np.array([0.25], np.float32))):
        q, s = fusednorm.rmsnorm_quant(make(fw, x), make(fw, w), scale_mode="static", scale=scale)
        check_same(q, want_q, "q")
        assert float(oracle.as_f32(s)[0]) == 0.25
