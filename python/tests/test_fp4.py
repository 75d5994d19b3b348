"""fusednorm.rmsnorm_fp4 / dequantize_fp4 / fp4_swizzled_size from NumPy and PyTorch CPU arrays
against the NumPy + ml_dtypes oracle (oracle.py, from docs/numerics.md §3b), byte for byte; the
swizzled scale layout against the row-major one; bad calls (library's message, nothing written);
the torch custom ops (opcheck, torch.compile(fullgraph=True))."""

import numpy as np
import pytest

import fusednorm
import oracle
from conftest import TORCH_SKIP, requires_torch
from oracle import FP4_BLOCK, FP4_SCALE_FORMAT, IN_FORMATS, codes, make, np_dtype

ROWS, H = 7, 256
FORMATS = ["nvfp4", "mxfp4"]


def inputs(in_fmt="float32", rows=ROWS, h=H, seed=0, special=True):
    """x [rows, h]: rows of magnitudes 1e-3 .. 1e3, and (special) a zero row, a row with a zero
    block, a tiny block, a block just under a power of two and a block of one huge value, so that
    zero, subnormal, saturated and rounded-down scales occur; weight [h]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, h)).astype(np.float32)
    x *= np.float32(10.0) ** rng.integers(-3, 4, size=(rows, 1)).astype(np.float32)
    if special and rows >= 4:
        x[1] = 0
        x[2, :32] = 0                                              # a zero block (both formats)
        x[2, 32:64] *= np.float32(1e-39)                           # tiny blocks: scale 0 (NVFP4), 0x00 (MXFP4)
        x[3, :32] = np.float32(6.0 * (1 - 2.0 ** -10))             # a/6 just under 1: e4m3 rounds up, e8m0 to 1
        x[3, 40] = np.float32(3e4)                                 # one huge value: every other code of its row 0
    w = (0.5 + rng.random(h)).astype(np.float32)
    return x.astype(np_dtype(in_fmt)), w.astype(np_dtype(in_fmt))


def fp4_codes(q):
    """The FP4 codes of q as uint8 [..., H], one a byte: ml_dtypes float4_e2m1fn arrays as they are;
    packed bytes (uint8, torch.float4_e2m1fn_x2) unpacked, low nibble first."""
    b = codes(q)
    if str(q.dtype) == "float4_e2m1fn":
        return b
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(b.shape[:-1] + (2 * b.shape[-1],))


def check_same(got, want, what):
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    bad = np.argwhere(g != w)
    assert bad.size == 0, "%s: %d of %d elements differ, first at %s: got 0x%x, want 0x%x" % (
        what, len(bad), g.size, tuple(bad[0]), g[tuple(bad[0])], w[tuple(bad[0])])


def check_fp4(q, s, want_q, want_s):
    check_same(fp4_codes(q), codes(want_q), "q")
    check_same(codes(s), codes(want_s), "scales")


# ------------------------------------------------------------------------------ rmsnorm_fp4


@pytest.mark.parametrize("in_fmt", IN_FORMATS)
@pytest.mark.parametrize("format", FORMATS)
def test_functional_matches_oracle(fw, in_fmt, format):
    x, w = inputs(in_fmt)
    q, s = fusednorm.rmsnorm_fp4(make(fw, x), make(fw, w), format=format)
    want_q, want_s, _ = oracle.rmsnorm_fp4(x, w, in_fmt=in_fmt, format=format)
    assert type(q) is type(make(fw, x)) and type(s) is type(q)
    if fw == "numpy":  # ml_dtypes float4_e2m1fn, one element a byte
        assert q.dtype == np_dtype("float4_e2m1fn") and q.shape == (ROWS, H)
    else:  # two a byte
        assert str(q.dtype) == "torch.float4_e2m1fn_x2" and tuple(q.shape) == (ROWS, H // 2)
    assert str(s.dtype).replace("torch.", "") == FP4_SCALE_FORMAT[format]
    assert tuple(s.shape) == (ROWS, H // FP4_BLOCK[format])
    check_fp4(q, s, want_q, want_s)


def test_oracle_covers_the_edge_cases():
    """The inputs reach the branches of §3b: zero and rounded-down scales, r = 0 and r = 2^127."""
    x, w = inputs()
    _, s_nv, _ = oracle.rmsnorm_fp4(x, w, format="nvfp4")
    q_mx, s_mx, _ = oracle.rmsnorm_fp4(x, w, format="mxfp4")
    assert (codes(s_nv)[2, 2:4] == 0).all()          # tiny blocks: NVFP4 scale 0
    assert (codes(s_mx)[2, :2] == 0).all()           # zero block and tiny block: e8m0 0x00 ...
    assert (codes(q_mx)[2, 32:64] != 0).any()        # ... the tiny one still gets codes (r = 2^127)
    assert codes(oracle.e8m0_up_bits(np.float32([1.0, 1.0000001, 2.0 ** -127, 2.0 ** -140, 0.0, 3e38]))).tolist() \
        == [127, 128, 0, 0, 0, 0xFE]
    # ml_dtypes 0.5/0.6 casts f32 -> float8_e4m3fn to NaN from 464 up and float4_e2m1fn's NaN to -0:
    # the oracle's encoders saturate and give +0, as numerics.md §1 says
    assert codes(oracle.e4m3fn_saturating(np.float32([448, 470, np.inf, -1e9, np.nan]))).tolist() \
        == [0x7E, 0x7E, 0x7E, 0xFE, 0x7F]
    assert codes(oracle.e2m1(np.float32([np.nan, 6.5, -np.inf, -0.0, 0.25, 0.75]))).tolist() == [0, 7, 15, 8, 0, 2]


@pytest.mark.parametrize("global_scale", [0.37, 100.0, "array"])
def test_nvfp4_global_scale(fw, global_scale):
    x, w = inputs("bfloat16", seed=1)
    gs = make(fw, np.array([2.5], np.float32)) if global_scale == "array" else global_scale
    value = 2.5 if global_scale == "array" else global_scale
    q, s = fusednorm.rmsnorm_fp4(make(fw, x), make(fw, w), global_scale=gs)
    want_q, want_s, _ = oracle.rmsnorm_fp4(x, w, in_fmt="bfloat16", global_scale=value)
    check_fp4(q, s, want_q, want_s)


@pytest.mark.parametrize("format", FORMATS)
def test_swizzled_scales_are_the_row_major_ones_tiled(fw, format):
    """130 rows (two row tiles, 126 padding rows) of 5 blocks (a padding block), as [2, 65, H]: the
    leading dimensions are flattened into rows."""
    block = FP4_BLOCK[format]
    h = 5 * block
    x, w = inputs("float16", rows=130, h=h, seed=2)
    x3 = make(fw, x.reshape(2, 65, h))
    q_rm, s_rm = fusednorm.rmsnorm_fp4(x3, make(fw, w), format=format)
    q_sw, s_sw = fusednorm.rmsnorm_fp4(x3, make(fw, w), format=format, scale_layout="swizzled")
    assert tuple(s_rm.shape) == (2, 65, 5) and tuple(s_sw.shape) == (256, 8)
    assert str(s_sw.dtype) == str(s_rm.dtype)
    assert fusednorm.fp4_swizzled_size(130, h, format) == 256 * 8
    check_same(fp4_codes(q_sw), fp4_codes(q_rm), "q")
    check_same(codes(s_sw), oracle.swizzle(codes(s_rm).reshape(130, 5)), "swizzled scales")
    want_q, want_s, _ = oracle.rmsnorm_fp4(x, w, in_fmt="float16", format=format)
    check_same(codes(s_rm).reshape(130, 5), codes(want_s), "scales")
    check_same(fp4_codes(q_rm).reshape(130, h), codes(want_q), "q")
    # out=: any compact tensor of fp4_swizzled_size elements, here 1-D uint8 bytes
    flat = make(fw, np.full(256 * 8, 0xAB, np.uint8))
    fusednorm.rmsnorm_fp4(x3, make(fw, w), format=format, scale_layout="swizzled",
                          out=(make(fw, np.zeros((2, 65, h // 2), np.uint8)), flat))
    check_same(codes(flat), codes(s_sw).reshape(-1), "swizzled scales, 1-D out=")


def test_swizzled_size_and_shapes_agree_with_the_library():
    for format in FORMATS:
        block = FP4_BLOCK[format]
        for rows in (0, 1, 127, 128, 129, 300):
            for blocks in (1, 3, 4, 5, 9):
                shape = (rows, blocks * block)
                qshape, sshape = fusednorm.rmsnorm_fp4_shapes(shape, format, "swizzled")
                size = fusednorm.fp4_swizzled_size(rows, blocks * block, format)
                assert qshape == shape and sshape[0] * sshape[1] == size
                assert size == -(-rows // 128) * 128 * -(-blocks // 4) * 4
        assert fusednorm.rmsnorm_fp4_shapes((3, 4, 8 * block), format) == ((3, 4, 8 * block), (3, 4, 8))
        assert fusednorm.rmsnorm_fp4_shapes((3, 4, 8 * block), format, "swizzled")[1] == (128, 8)


def test_out_form_writes_callers_arrays(fw):
    x, w = inputs("float32", seed=3)
    want_q, want_s, _ = oracle.rmsnorm_fp4(x, w)
    # typed outputs: ml_dtypes float4_e2m1fn (NumPy, one a byte) or float4_e2m1fn_x2 (torch)
    if fw == "numpy":
        q = np.full((ROWS, H), 0x5, np.uint8).view(np_dtype("float4_e2m1fn"))
    else:
        import torch
        q = torch.full((ROWS, H // 2), 0x55, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    s = make(fw, np.full((ROWS, H // 16), 0x33, np.uint8).view(np_dtype("float8_e4m3fn")))
    got_q, got_s = fusednorm.rmsnorm_fp4(make(fw, x), make(fw, w), out=(q, s))
    assert got_q is q and got_s is s
    check_fp4(q, s, want_q, want_s)
    # raw bytes: uint8 [..., H/2] packed codes and uint8 scales, in every framework
    q8 = make(fw, np.full((ROWS, H // 2), 0x55, np.uint8))
    s8 = make(fw, np.full((ROWS, H // 16), 0x33, np.uint8))
    fusednorm.rmsnorm_fp4_into(make(fw, x), make(fw, w), q8, s8)
    check_fp4(q8, s8, want_q, want_s)


def test_out_form_typed_mismatch_is_refused(fw):
    x, w = inputs(seed=4)
    q = make(fw, np.zeros((ROWS, H // 2), np.uint8))
    s = make(fw, np.zeros((ROWS, H // 32), np.uint8).view(np_dtype("float8_e4m3fn")))
    with pytest.raises(ValueError, match="scales holds float8_e4m3fn elements, not float8_e8m0fnu"):
        fusednorm.rmsnorm_fp4(make(fw, x), make(fw, w), format="mxfp4", out=(q, s))
    # and the other way round, also through the torch ops (which take MXFP4 scales as uint8 codes)
    s = make(fw, np.zeros((ROWS, H // 16), np.uint8).view(np_dtype("float8_e8m0fnu")))
    calls = [fusednorm.rmsnorm_fp4]
    if fw == "torch":
        from fusednorm import torch as ft
        calls.append(ft.rmsnorm_fp4)
    for call in calls:
        with pytest.raises(ValueError, match="scales holds float8_e8m0fnu elements, not float8_e4m3fn"):
            call(make(fw, x), make(fw, w), format="nvfp4", out=(q, s))


def test_residual_is_updated_in_place(fw):
    x, w = inputs("bfloat16", seed=5)
    r0, _ = inputs("bfloat16", seed=6, special=False)
    res = make(fw, r0)
    q, s = fusednorm.rmsnorm_fp4(make(fw, x), make(fw, w), residual=res, format="mxfp4")
    want_q, want_s, want_res = oracle.rmsnorm_fp4(x, w, r0, in_fmt="bfloat16", format="mxfp4")
    check_same(codes(res), codes(want_res), "residual")
    check_fp4(q, s, want_q, want_s)


@pytest.mark.parametrize("format", FORMATS)
def test_options_and_quant_only(fw, format):
    x, w = inputs("float32", seed=7)
    kw = dict(format=format, eps=1e-2, weight_offset=1.0)
    q, s = fusednorm.rmsnorm_fp4(make(fw, x), make(fw, w), **kw)
    check_fp4(q, s, *oracle.rmsnorm_fp4(x, w, **kw)[:2])
    q, s = fusednorm.rmsnorm_fp4(make(fw, x), None, norm="none", format=format)
    check_fp4(q, s, *oracle.rmsnorm_fp4(x, None, norm="none", format=format)[:2])


@pytest.mark.parametrize("format", FORMATS)
def test_non_finite_blocks(fw, format):
    """A NaN/Inf y gives its block the NaN scale and codes of y * 0 (NaN, Inf: +0); with RMS the whole
    row is NaN; quant-only, only the blocks holding them."""
    x, w = inputs("float32", seed=8)
    x[0, 5] = np.nan
    x[4, 70] = -np.inf
    for norm in ("rms", "none"):
        q, s = fusednorm.rmsnorm_fp4(make(fw, x), make(fw, w) if norm == "rms" else None, format=format, norm=norm)
        want_q, want_s, _ = oracle.rmsnorm_fp4(x, w, format=format, norm=norm)
        check_fp4(q, s, want_q, want_s)
        nan = 0x7F if format == "nvfp4" else 0xFF
        b = codes(s)
        if norm == "rms":
            assert (b[[0, 4]] == nan).all()
        else:
            blk = FP4_BLOCK[format]
            assert b[0, 5 // blk] == nan and b[4, 70 // blk] == nan and (b[0, 5 // blk + 1:] != nan).all()
            assert fp4_codes(q)[4, 70] == 0


def test_leading_dimensions_and_strided_rows(fw):
    x, w = inputs("float32", rows=12, seed=9)
    q, s = fusednorm.rmsnorm_fp4(make(fw, x.reshape(3, 4, H)), make(fw, w))
    want_q, want_s, _ = oracle.rmsnorm_fp4(x, w)
    assert tuple(s.shape) == (3, 4, H // 16)
    check_same(fp4_codes(q).reshape(12, H), codes(want_q), "q")
    check_same(codes(s).reshape(12, H // 16), codes(want_s), "scales")
    wide = np.zeros((12, 2 * H), np.float32)
    wide[:, :H] = x
    q, s = fusednorm.rmsnorm_fp4(make(fw, wide)[:, :H], make(fw, w))
    check_fp4(q, s, want_q, want_s)


# ------------------------------------------------------------------------------ dequantize_fp4


@pytest.mark.parametrize("format,global_scale", [("nvfp4", None), ("nvfp4", 3.25), ("mxfp4", None)])
@pytest.mark.parametrize("dtype", IN_FORMATS)
def test_dequantize_matches_oracle(fw, format, global_scale, dtype):
    x, w = inputs("float32", seed=10)
    x[5, 9] = np.nan  # a NaN scale: its row dequantizes to NaN
    q, s = fusednorm.rmsnorm_fp4(make(fw, x), make(fw, w), format=format, global_scale=global_scale)
    y = fusednorm.dequantize_fp4(q, s, format=format, global_scale=global_scale, dtype=dtype)
    assert type(y) is type(q) and tuple(y.shape) == (ROWS, H)
    assert str(y.dtype).replace("torch.", "") == dtype
    q_np = fp4_codes(q).view(np_dtype("float4_e2m1fn"))
    s_np = codes(s).view(np_dtype(FP4_SCALE_FORMAT[format]))
    want = oracle.dequantize_fp4(q_np, s_np, format=format, global_scale=global_scale, dtype=dtype)
    got_f = oracle.as_f32(y, dtype)
    nan = np.isnan(want.astype(np.float32))
    assert nan[5].all() and np.array_equal(np.isnan(got_f), nan)
    check_same(codes(y)[~nan], codes(want)[~nan], "dequantized")
    # the round trip: |y - dec(q) * dec(sf) / gs| is at most one FP4 unit of the block (amax / 6)
    # plus the scale's rounding: relative, or for NVFP4 at most half e4m3's subnormal step (2^-10)
    # per unit of the code (at most 6), divided by gs (a block whose scale underflows to 0 has
    # a < 6 * 2^-10 / gs and loses all of its y)
    y_ref, _ = oracle.normalize(x, w)
    block = FP4_BLOCK[format]
    amax = np.repeat(np.abs(y_ref).reshape(ROWS, -1, block).max(axis=2), block, axis=1)
    err = np.abs(got_f.astype(np.float64) - y_ref)
    bound = amax * (0.25 if dtype == "float32" else 0.3) + 1e-20
    if format == "nvfp4":
        bound += 6 * 2.0 ** -10 / (global_scale or 1.0)
    assert (err[~nan] <= bound[~nan]).all()


@pytest.mark.parametrize("format", FORMATS)
def test_dequantize_swizzled_and_out_form(fw, format):
    x, w = inputs("bfloat16", rows=130, h=3 * FP4_BLOCK[format], seed=11)
    xs, ws = make(fw, x), make(fw, w)
    q, s = fusednorm.rmsnorm_fp4(xs, ws, format=format)
    q_sw, s_sw = fusednorm.rmsnorm_fp4(xs, ws, format=format, scale_layout="swizzled")
    want = fusednorm.dequantize_fp4(q, s, format=format)
    got = fusednorm.dequantize_fp4(q_sw, s_sw, format=format, scale_layout="swizzled")
    check_same(codes(got), codes(want), "swizzled dequantization")
    out = make(fw, np.full(x.shape, np.nan, np.float32))
    assert fusednorm.dequantize_fp4(q, s, format=format, out=out) is out
    check_same(codes(out), codes(want), "out=")
    # packed uint8 codes and uint8 scales are read as the format's types
    q8 = make(fw, codes(q) if fw == "torch" else _pack(codes(q)))
    s8 = make(fw, codes(s))
    out16 = make(fw, np.zeros(x.shape, np.float16))
    fusednorm.dequantize_fp4_into(q8, s8, out16, format=format)
    check_same(codes(out16), codes(want.astype(np.float16) if fw == "numpy" else want.half()), "uint8 inputs")


def _pack(nibbles):
    return (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)


# ------------------------------------------------------------------------------ bad calls


def poisoned(fw, shape, dtype="uint8", byte=0xAB):
    return make(fw, np.full(shape, byte, np.uint8).view(np_dtype(dtype)) if dtype != "float32" else
                np.full(shape + (4,), byte, np.uint8).view(np.float32).reshape(shape))


# (what, changes to a good NVFP4 call on x [4, H], exception, fragments of the library's message)
FP4_BAD = [
    ("H not a multiple of the block", dict(h=40), fusednorm.InvalidArgumentError,
     ["input H = 40 is not a multiple of the NVFP4 block (16)"]),
    ("global scale with MXFP4", dict(format="mxfp4", global_scale=2.0), fusednorm.InvalidArgumentError,
     ["global_scale must be NULL for MXFP4"]),
    ("global scale of two elements", dict(global_scale="two"), fusednorm.InvalidArgumentError,
     ["global_scale has shape [2]: must have exactly one element"]),
    ("negative eps", dict(eps=-1.0), fusednorm.InvalidArgumentError, ["options->eps = -1", ">= 0"]),
    ("row-major scales shape", dict(scales_shape=(4, 3)), fusednorm.InvalidArgumentError,
     ["scales has shape [4, 3] but must end in 16"]),
    ("swizzled scales size", dict(scale_layout="swizzled", scales_shape=(4, 16)), fusednorm.InvalidArgumentError,
     ["SWIZZLED NVFP4 scales of 4 rows x H = 256 take exactly 2048"]),
    ("output shape", dict(q_shape=(4, H)), fusednorm.InvalidArgumentError, ["must end in 256 FP4 elements"]),
]


@pytest.mark.parametrize("what,change,exc,fragments", FP4_BAD, ids=[c[0] for c in FP4_BAD])
@pytest.mark.parametrize("typed", [False, True])
def test_rmsnorm_fp4_bad_call_writes_nothing(fw, what, change, exc, fragments, typed):
    """uint8 outputs, or typed ones (NumPy: ml_dtypes float4 staged; torch: float4_e2m1fn_x2)."""
    h = change.get("h", H)
    fmt = change.get("format", "nvfp4")
    rng = np.random.default_rng(0)
    x = make(fw, rng.standard_normal((4, h)).astype(np.float32))
    w = make(fw, np.ones(h, np.float32))
    q = poisoned(fw, change.get("q_shape", (4, h // 2)))
    s = poisoned(fw, change.get("scales_shape", (4, h // FP4_BLOCK[fmt])))
    if typed:
        if fw == "numpy":
            q = np.full(q.shape[:-1] + (2 * q.shape[-1],), 0xB, np.uint8).view(np_dtype("float4_e2m1fn"))
        else:
            import torch
            q = q.view(torch.float4_e2m1fn_x2)
        s = s.view(np_dtype(FP4_SCALE_FORMAT[fmt])) if fw == "numpy" else s.view(
            getattr(__import__("torch"), FP4_SCALE_FORMAT[fmt]))
    res = poisoned(fw, (4, h), "float32", 0x3C)
    gs = change.get("global_scale")
    if gs == "two":
        gs = make(fw, np.ones(2, np.float32))
    before = [codes(t) for t in (q, s, res)]
    kw = {k: v for k, v in change.items() if k in ("format", "scale_layout", "eps")}
    with pytest.raises(exc) as info:
        fusednorm.rmsnorm_fp4(x, w, out=(q, s), residual=res, global_scale=gs, **kw)
    e = info.value
    assert isinstance(e, fusednorm.Error) and e.status == exc.status
    for f in fragments:
        assert f in e.message, (f, e.message)
    for b, t in zip(before, (q, s, res)):
        assert np.array_equal(b, codes(t))


def test_functional_bad_call_raises(fw):
    x = make(fw, np.ones((4, 48), np.float32))
    with pytest.raises(fusednorm.InvalidArgumentError,
                       match=r"input H = 48 is not a multiple of the MXFP4 block \(32\)"):
        fusednorm.rmsnorm_fp4(x, make(fw, np.ones(48, np.float32)), format="mxfp4")


def test_dequantize_bad_calls_write_nothing(fw):
    q = make(fw, np.zeros((4, H // 2), np.uint8))
    out = poisoned(fw, (4, H), "float32")
    before = codes(out)
    with pytest.raises(fusednorm.InvalidArgumentError, match=r"scales has shape \[4, 8\] but must end in 16"):
        fusednorm.dequantize_fp4(q, make(fw, np.zeros((4, 8), np.uint8)), out=out)
    with pytest.raises(fusednorm.InvalidArgumentError, match="global_scale must be NULL for MXFP4"):
        fusednorm.dequantize_fp4(q, make(fw, np.zeros((4, 8), np.uint8)), format="mxfp4", global_scale=1.0, out=out)
    with pytest.raises(fusednorm.UnsupportedError, match="output.dtype = int8: must be f32, f16 or bf16"):
        fusednorm.dequantize_fp4(q, make(fw, np.zeros((4, 16), np.uint8)), dtype="int8")
    assert np.array_equal(before, codes(out))


def test_swizzled_size_errors_and_package_errors():
    with pytest.raises(fusednorm.InvalidArgumentError, match=r"rows = -1, h = 16: must be >= 0"):
        fusednorm.fp4_swizzled_size(-1, 16)
    with pytest.raises(fusednorm.InvalidArgumentError, match=r"h = 40 is not a multiple of the NVFP4 block \(16\)"):
        fusednorm.fp4_swizzled_size(4, 40, "nvfp4")
    x = np.ones((4, 64), np.float32)
    with pytest.raises(ValueError, match="format='fp4'; expected one of 'nvfp4', 'mxfp4'"):
        fusednorm.rmsnorm_fp4(x, x[0], format="fp4")
    with pytest.raises(ValueError, match="scale_layout='tiled'"):
        fusednorm.rmsnorm_fp4(x, x[0], scale_layout="tiled")


# ------------------------------------------------------------------------------ PyTorch


if TORCH_SKIP is None:
    import torch

FAKE_TESTS = ("test_faketensor", "test_aot_dispatch_dynamic")


def tdata(rows=8, h=H, dtype="bfloat16", seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, h, generator=g).to(getattr(torch, dtype)),
            (torch.rand(h, generator=g) + 0.5).to(getattr(torch, dtype)))


@requires_torch
@pytest.mark.parametrize("case", ["nvfp4", "mxfp4", "swizzled", "global_scale", "residual"])
def test_fp4_ops_opcheck(case):
    import fusednorm.torch  # noqa: F401
    x, w = tdata()
    fmt = "mxfp4" if case == "mxfp4" else "nvfp4"
    layout = "swizzled" if case == "swizzled" else "row_major"
    gs = torch.tensor([4.0]) if case == "global_scale" else None
    res = tdata(seed=1)[0] if case == "residual" else None
    args = (x, w, res, gs, fmt, layout, "rms", None, None)
    torch.library.opcheck(torch.ops.fusednorm.rmsnorm_fp4.default, args, test_utils=FAKE_TESTS)
    q, s = torch.ops.fusednorm.rmsnorm_fp4(*args)
    torch.library.opcheck(torch.ops.fusednorm.dequantize_fp4.default, (q, s, gs, fmt, layout, "float32"),
                          test_utils=FAKE_TESTS)


@requires_torch
def test_fp4_out_ops_schema():
    """The mutating ops' schemas (test_schema compares arguments with torch.allclose: uint8 here)."""
    import fusednorm.torch  # noqa: F401
    x, w = tdata(dtype="float32")
    res = tdata(dtype="float32", seed=2)[0]
    q, s = torch.zeros(8, H // 2, dtype=torch.uint8), torch.zeros(8, H // 16, dtype=torch.uint8)
    torch.library.opcheck(torch.ops.fusednorm.rmsnorm_fp4_out.default,
                          (x, w, res, None, q, s, "nvfp4", "row_major", "rms", None, None))
    torch.library.opcheck(torch.ops.fusednorm.dequantize_fp4_out.default,
                          (q, s, None, torch.empty(8, H), "nvfp4", "row_major", None))


def fp4_fn(x, w, res, gs):
    """Both fp4 operations, both forms, a residual mutated in place and a float global scale."""
    q, s = fusednorm.rmsnorm_fp4(x, w, residual=res, global_scale=gs)
    y = fusednorm.dequantize_fp4(q, s, global_scale=gs)
    qm = torch.empty(x.shape[0], x.shape[1] // 2, dtype=torch.uint8)
    sm = torch.empty(128, 4 * ((x.shape[1] // 32 + 3) // 4), dtype=torch.float8_e8m0fnu)
    fusednorm.rmsnorm_fp4(x, w, format="mxfp4", scale_layout="swizzled", out=(qm, sm))
    ym = fusednorm.dequantize_fp4(qm, sm, format="mxfp4", scale_layout="swizzled", dtype="bfloat16")
    return q, s, y, qm, sm, ym


@requires_torch
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_torch_compile_fullgraph(backend):
    torch._dynamo.reset()
    x, w = tdata()
    r_eager, r_comp = tdata(seed=3)[0], tdata(seed=3)[0]
    want = fp4_fn(x, w, r_eager, 6.0)
    got = torch.compile(fp4_fn, fullgraph=True, backend=backend)(x, w, r_comp, 6.0)
    for g, e in zip(got, want):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert np.array_equal(codes(g), codes(e))
    assert np.array_equal(codes(r_comp), codes(r_eager))


@requires_torch
def test_torch_compile_dynamic_swizzled_shapes():
    torch._dynamo.reset()

    def f(x, w):
        return fusednorm.rmsnorm_fp4(x, w, scale_layout="swizzled")
    fc = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
    for rows in (3, 130, 300):
        x, w = tdata(rows)
        q, s = fc(x, w)
        eq, es = f(x, w)
        assert s.shape == (-(-rows // 128) * 128, 16)
        assert np.array_equal(codes(q), codes(eq)) and np.array_equal(codes(s), codes(es))
