"""The PyTorch integration: torch.ops.fusednorm custom ops, their fake implementations (checked
by torch.library.opcheck), torch.compile(fullgraph=True), and the example."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fusednorm
from conftest import TORCH_SKIP, requires_torch
from oracle import codes

pytestmark = requires_torch

if TORCH_SKIP is None:
    import torch
    import fusednorm.torch  # noqa: F401  (registers torch.ops.fusednorm)

H = 256
OPTS = (None, None, None, None, None)  # eps, weight_offset, scale_ub, min_scale, qmax: the library's


def data(rows=8, dtype="bfloat16", seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, H, generator=g).to(getattr(torch, dtype))
    w = (torch.rand(H, generator=g) + 0.5).to(getattr(torch, dtype))
    return x, w


def rq_args(x, w, residual=None, dtype="float8_e4m3fn", mode="group", col=False, packed=False, scale_dtype="float32"):
    return (x, w, residual, None, dtype, mode, 64, scale_dtype, col, packed, "rms") + OPTS


FAKE_TESTS = ("test_faketensor", "test_aot_dispatch_dynamic")


@pytest.mark.parametrize("case", ["group", "row_col_major", "residual", "packed", "e8m0_scales"])
def test_rmsnorm_quant_op_opcheck(case):
    x, w = data()
    kw = {"group": {}, "row_col_major": dict(mode="row", col=True), "packed": dict(mode="row", packed=True),
          "residual": dict(residual=data(seed=1)[0]), "e8m0_scales": dict(scale_dtype="float8_e8m0fnu")}[case]
    torch.library.opcheck(torch.ops.fusednorm.rmsnorm_quant.default, rq_args(x, w, **kw), test_utils=FAKE_TESTS)


def test_schema_of_the_mutating_ops():
    """test_schema compares arguments before and after the call with torch.allclose, which PyTorch
    lacks for float8 tensors: int8 outputs here; the fake tests above cover float8."""
    x, w = data(dtype="float32")
    res = data(dtype="float32", seed=2)[0]
    torch.library.opcheck(torch.ops.fusednorm.rmsnorm_quant.default, rq_args(x, w, res, dtype="int8"))
    q, s = torch.empty(8, H, dtype=torch.int8), torch.empty(8, 1)
    torch.library.opcheck(torch.ops.fusednorm.rmsnorm_quant_out.default,
                          (x, w, res, q, s, None, None, "row", None, False, "rms") + OPTS)
    torch.library.opcheck(torch.ops.fusednorm.cast_out.default, (x, torch.empty(8, H, dtype=torch.float16),
                                                                 None, None, None))


@pytest.mark.parametrize("dtype", ["float8_e5m2", "float4_e2m1fn", "float8_e4m3", "int8"])
def test_cast_op_opcheck(dtype):
    x, _ = data(dtype="float32")
    torch.library.opcheck(torch.ops.fusednorm.cast.default, (x, dtype, None, None), test_utils=FAKE_TESTS)


def test_custom_ops_equal_the_direct_calls():
    x, w = data()
    q1, s1 = fusednorm.rmsnorm_quant(x, w, scale_mode="group", group_size=64)
    q2, s2 = fusednorm.torch.rmsnorm_quant(x, w, scale_mode="group", group_size=64)
    assert np.array_equal(codes(q1), codes(q2)) and np.array_equal(codes(s1), codes(s2))
    q3, s3 = torch.empty_like(q1), torch.empty_like(s1)
    fusednorm.torch.rmsnorm_quant(x, w, scale_mode="group", group_size=64, out=(q3, s3))
    assert np.array_equal(codes(q1), codes(q3)) and np.array_equal(codes(s1), codes(s3))
    scale = torch.tensor([0.01])
    q4, s4 = fusednorm.torch.rmsnorm_quant(x, w, scale_mode="static", scale=scale)
    q5, _ = fusednorm.rmsnorm_quant(x, w, scale_mode="static", scale=0.01)
    assert s4 is scale and np.array_equal(codes(q4), codes(q5))


def fused(x, w, res):
    """A function with both forms, a residual (mutated in place) and a cast."""
    q, s = fusednorm.rmsnorm_quant(x, w, scale_mode="group", group_size=64, residual=res)
    y = fusednorm.cast(q, "float32") * s.repeat_interleave(64, dim=-1)
    q8, s8 = fusednorm.rmsnorm_quant(x, w, dtype="int8", out=(torch.empty(x.shape, dtype=torch.int8),
                                                              torch.empty(x.shape[0], 1)))
    return q, s, y, q8, s8


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_torch_compile_fullgraph(backend):
    torch._dynamo.reset()
    x, w = data()
    r_eager, r_comp = data(seed=3)[0], data(seed=3)[0]
    want = fused(x, w, r_eager)
    got = torch.compile(fused, fullgraph=True, backend=backend)(x, w, r_comp)
    for g, e in zip(got, want):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert np.array_equal(codes(g), codes(e))
    assert np.array_equal(codes(r_comp), codes(r_eager))  # the residual was updated in the graph too


def test_torch_compile_dynamic_shapes():
    torch._dynamo.reset()
    f = torch.compile(lambda x, w: torch.ops.fusednorm.rmsnorm_quant(*rq_args(x, w, col=True)), fullgraph=True,
                      dynamic=True, backend="aot_eager")
    for rows in (3, 17, 64):
        x, w = data(rows)
        q, s = f(x, w)
        eq, es = torch.ops.fusednorm.rmsnorm_quant(*rq_args(x, w, col=True))
        assert s.shape == (rows, H // 64) and s.stride() == (1, rows)
        assert np.array_equal(codes(q), codes(eq)) and np.array_equal(codes(s), codes(es))


def test_errors_inside_the_custom_op():
    x, _ = data()
    with pytest.raises(fusednorm.InvalidArgumentError, match=r"weight has shape \[100\]"):
        torch.ops.fusednorm.rmsnorm_quant(*rq_args(x, torch.ones(100, dtype=torch.bfloat16)))


def test_example_swaps_and_compiles():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    try:
        import swap_rmsnorm_fp8
    finally:
        sys.path.pop(0)
    torch._dynamo.reset()
    r = swap_rmsnorm_fp8.main(["--hidden", "256", "--tokens", "4", "--blocks", "2"])
    assert r["swapped"] == 2
    assert 0 < r["relative_difference"] < 0.05  # FP8 rounding of slightly different y: close, not equal
    assert r["compiled_op_equal"]  # the fused op under torch.compile: eager's bytes
    # The surrounding ops are inductor's: a bfloat16 rounding that differs moves FP8 codes downstream.
    assert r["compiled_relative_difference"] < 0.05


def test_raw_codes_under_torch_compile():
    """float8_e4m3 has no torch dtype: uint8 codes named by src_dtype=, eagerly and compiled."""
    torch._dynamo.reset()
    codes_u8 = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(4, 64)

    def decode(c):
        return fusednorm.cast(c, "float32", src_dtype="float8_e4m3")
    eager = decode(codes_u8)
    compiled = torch.compile(decode, fullgraph=True, backend="aot_eager")(codes_u8)
    assert np.array_equal(codes(eager), codes(compiled))
    assert eager[0, 0] == 0 and eager[0, 0x38] == 1.0


# The first fusednorm call of a process inside a compiled function, before any eager call: the
# package sets up its PyTorch side on first use, which must not happen inside the traced code.
# Each case runs in a fresh interpreter (the set-up happens once a process).
FIRST_CALL = {
    "rmsnorm_quant": ("inductor", "fusednorm.rmsnorm_quant(x, w, scale_mode='group', group_size=64)"),
    "cast": ("aot_eager", "(fusednorm.cast(x, 'float8_e5m2'),)"),
    "rmsnorm_fp4": ("aot_eager", "fusednorm.rmsnorm_fp4(x, w, format='mxfp4')"),
    "qk_rmsnorm": ("aot_eager", "fusednorm.qk_rmsnorm(x, x[:, :128], w[:64], w[:64], head_dim=64)"),
    "qk_rmsnorm_stats": ("aot_eager", "(fusednorm.qk_rmsnorm_stats(x, x[:, :128]),)"),
    "mla_rope_rmsnorm_quant": ("aot_eager", "(fusednorm.mla_rope_rmsnorm_quant(x[:4, :64].reshape(4, 8, 8), "
                                            "x[4:, :72], w[:64], w[64:128].reshape(8, 8), pages, cache, "
                                            "row_offsets=offsets, positions=positions), cache.clone())"),
}

FIRST_CALL_SCRIPT = """
import sys, torch, fusednorm
assert "fusednorm.torch" not in sys.modules
g = torch.Generator().manual_seed(0)
x = torch.randn(8, 256, generator=g).to(torch.bfloat16)
w = (torch.rand(256, generator=g) + 0.5).to(torch.bfloat16)
pages, offsets = torch.tensor([[0, 1]], dtype=torch.int32), torch.tensor([0, 4], dtype=torch.int32)
positions, cache = torch.arange(4, dtype=torch.int32), torch.zeros(2, 2, 72, dtype=torch.bfloat16)

def f(x, w):
    return {call}

got = torch.compile(f, fullgraph=True, backend={backend!r})(x, w)
want = f(x, w)
assert len(got) == len(want)
for a, b in zip(got, want):
    assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride(), (a, b)
    assert torch.equal(a.view(torch.uint8), b.view(torch.uint8)), (a, b)
"""


@pytest.mark.parametrize("op", sorted(FIRST_CALL))
def test_first_call_of_a_process_compiled(op, tmp_path):
    backend, call = FIRST_CALL[op]
    script = FIRST_CALL_SCRIPT.format(call=call, backend=backend)
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-6000:]


@pytest.mark.parametrize("form", ["functional", "out"])
def test_e8m0_scales_under_inductor(form):
    """rmsnorm_quant with float8_e8m0fnu scales compiled by inductor (a mutating custom op with an
    e8m0 tensor is one inductor cannot decompose: the op takes and returns uint8 codes)."""
    torch._dynamo.reset()
    x, w = data()

    def f(x, w, res):
        if form == "functional":
            return fusednorm.rmsnorm_quant(x, w, scale_mode="group", group_size=32, scale_dtype="float8_e8m0fnu",
                                           scales_column_major=True, residual=res)
        out = (torch.empty(x.shape, dtype=torch.float8_e4m3fn),
               torch.empty(x.shape[0], H // 32, dtype=torch.float8_e8m0fnu))
        return fusednorm.rmsnorm_quant(x, w, scale_mode="group", group_size=32, residual=res, out=out)
    r_eager, r_comp = data(seed=4)[0], data(seed=4)[0]
    want = f(x, w, r_eager)
    got = torch.compile(f, fullgraph=True)(x, w, r_comp)
    for g, e in zip(got, want):
        assert g.dtype == e.dtype and g.shape == e.shape and g.stride() == e.stride()
        assert np.array_equal(codes(g), codes(e))
    assert got[1].dtype == torch.float8_e8m0fnu
    assert np.array_equal(codes(r_comp), codes(r_eager))


@pytest.mark.parametrize("side", ["src", "dst"])
def test_cast_out_of_e8m0_under_inductor(side):
    """cast with out= where src or dst is float8_e8m0fnu, compiled by inductor (cast_out mutates dst)."""
    torch._dynamo.reset()
    x = data(dtype="float32")[0].abs() + 0.25
    e = fusednorm.cast(x, "float8_e8m0fnu")

    def f(x, e):
        if side == "dst":
            return fusednorm.cast(x, out=torch.empty(x.shape, dtype=torch.float8_e8m0fnu), e8m0_rounding="up")
        return fusednorm.cast(e, out=torch.empty(e.shape))
    want = f(x, e)
    got = torch.compile(f, fullgraph=True)(x, e)
    assert got.dtype == want.dtype and np.array_equal(codes(got), codes(want))
