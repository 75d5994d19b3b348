"""fusednorm.qk_rmsnorm / qk_rmsnorm_stats / qk_rmsnorm_apply from NumPy and PyTorch CPU arrays
against the NumPy oracle (oracle.py, from docs/numerics.md §6), byte for byte: whole-row and
per-head groups, FP8 outputs, in place, strided views of one QKV buffer, a simulated two-rank
split; bad calls (the library's message, nothing written); the torch custom ops (opcheck,
torch.compile(fullgraph=True))."""

import numpy as np
import pytest

import fusednorm
import oracle
from conftest import TORCH_SKIP, requires_torch
from oracle import IN_FORMATS, codes, make, np_dtype
from test_rmsnorm_quant import check_same  # the bytes of two arrays, equal

ROWS, NQ, NK, D = 5, 256, 128, 64


def inputs(in_fmt="float32", rows=ROWS, nq=NQ, nk=NK, seed=0, grid=False):
    """q [rows, nq], k [rows, nk] (rows of magnitudes 1e-2 .. 1e2, a zero row), weights [nq], [nk];
    grid: multiples of 1/16 in [-1, 1] (every partial sum exact in f32)."""
    rng = np.random.default_rng(seed)
    if grid:
        q = rng.integers(-16, 17, (rows, nq)).astype(np.float32) / 16
        k = rng.integers(-16, 17, (rows, nk)).astype(np.float32) / 16
    else:
        q = rng.standard_normal((rows, nq)).astype(np.float32)
        k = rng.standard_normal((rows, nk)).astype(np.float32)
        q *= np.float32(10.0) ** rng.integers(-2, 3, size=(rows, 1)).astype(np.float32)
        k *= np.float32(10.0) ** rng.integers(-2, 3, size=(rows, 1)).astype(np.float32)
        if rows > 1:
            q[1] = 0
    qw = (0.5 + rng.random(nq)).astype(np.float32)
    kw = (0.5 + rng.random(nk)).astype(np.float32)
    t = np_dtype(in_fmt)
    return q.astype(t), k.astype(t), qw.astype(t), kw.astype(t)


def dtype_name(a):
    return str(a.dtype).replace("torch.", "")


@pytest.mark.parametrize("in_fmt", IN_FORMATS)
@pytest.mark.parametrize("head_dim", [None, D])
def test_qk_rmsnorm_matches_oracle(fw, in_fmt, head_dim):
    q, k, qw, kw = inputs(in_fmt)
    if head_dim:
        qw, kw = qw[:D], kw[:D]
    qo, ko = fusednorm.qk_rmsnorm(make(fw, q), make(fw, k), make(fw, qw), make(fw, kw), head_dim=head_dim)
    assert type(qo) is type(make(fw, q)) and dtype_name(qo) == in_fmt and dtype_name(ko) == in_fmt
    want_q, want_k = oracle.qk_rmsnorm(q, k, qw, kw, in_fmt=in_fmt, head_dim=head_dim or 0)
    check_same(qo, want_q, "q_out")
    check_same(ko, want_k, "k_out")


def test_qk_rmsnorm_options_and_leading_dimensions(fw):
    q, k, qw, kw = inputs("bfloat16", rows=6, seed=1)
    q3, k3 = make(fw, q.reshape(2, 3, NQ)), make(fw, k.reshape(2, 3, NK))
    qo, ko = fusednorm.qk_rmsnorm(q3, k3, make(fw, qw[:D]), make(fw, kw[:D]), head_dim=D, eps=1e-3, weight_offset=1.0)
    assert tuple(qo.shape) == (2, 3, NQ) and tuple(ko.shape) == (2, 3, NK)
    want_q, want_k = oracle.qk_rmsnorm(q, k, qw[:D], kw[:D], in_fmt="bfloat16", head_dim=D, eps=1e-3,
                                       weight_offset=1.0)
    check_same(codes(qo).reshape(6, NQ), want_q, "q_out")
    check_same(codes(ko).reshape(6, NK), want_k, "k_out")


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e4m3fnuz"])
@pytest.mark.parametrize("scales", ["pair", "array"])
def test_qk_rmsnorm_fp8_outputs(fw, dtype, scales):
    q, k, qw, kw = inputs("float16", seed=2)
    sc = (0.02, 0.5) if scales == "pair" else make(fw, np.array([0.02, 0.5], np.float32))
    qo, ko = fusednorm.qk_rmsnorm(make(fw, q), make(fw, k), make(fw, qw), make(fw, kw), dtype=dtype, out_scales=sc)
    assert dtype_name(qo) == dtype and dtype_name(ko) == dtype
    want_q, want_k = oracle.qk_rmsnorm(q, k, qw, kw, in_fmt="float16", dtype=dtype, out_scales=(0.02, 0.5))
    check_same(qo, want_q, "q_out")
    check_same(ko, want_k, "k_out")
    # out=: raw uint8 codes named by dtype=
    qb, kb = make(fw, np.zeros((ROWS, NQ), np.uint8)), make(fw, np.zeros((ROWS, NK), np.uint8))
    fusednorm.qk_rmsnorm(make(fw, q), make(fw, k), make(fw, qw), make(fw, kw), dtype=dtype, out_scales=sc,
                         out=(qb, kb))
    check_same(qb, want_q, "q_out (uint8)")
    check_same(kb, want_k, "k_out (uint8)")


def test_qk_rmsnorm_in_place_on_views_of_one_qkv_buffer(fw):
    """q and k as strided column views of a fused QKV projection [rows, Nq + Nk + Nv], normalized
    in place (out=(q, k)); v untouched."""
    q, k, qw, kw = inputs("bfloat16", seed=3)
    v = np.full((ROWS, 64), 3, np.float32).astype(np_dtype("bfloat16"))
    qkv = make(fw, np.concatenate([q, k, v], axis=1))
    qv, kv_ = qkv[:, :NQ], qkv[:, NQ:NQ + NK]
    got = fusednorm.qk_rmsnorm(qv, kv_, make(fw, qw[:D]), make(fw, kw[:D]), head_dim=D, out=(qv, kv_))
    assert got[0] is qv and got[1] is kv_
    want_q, want_k = oracle.qk_rmsnorm(q, k, qw[:D], kw[:D], in_fmt="bfloat16", head_dim=D)
    check_same(qkv[:, :NQ], want_q, "q in place")
    check_same(qkv[:, NQ:NQ + NK], want_k, "k in place")
    check_same(qkv[:, NQ + NK:], v, "v")


@pytest.mark.parametrize("in_fmt", IN_FORMATS)
def test_stats_then_apply_equals_the_fused_call(fw, in_fmt):
    q, k, qw, kw = inputs(in_fmt, seed=4)
    st = fusednorm.qk_rmsnorm_stats(make(fw, q), make(fw, k))
    assert dtype_name(st) == "float32" and tuple(st.shape) == (ROWS, 2)
    check_same(st, oracle.qk_stats(q, k), "stats")
    qo, ko = fusednorm.qk_rmsnorm_apply(make(fw, q), make(fw, k), st, make(fw, qw), make(fw, kw),
                                        q_global_width=NQ, k_global_width=NK)
    fq, fk = fusednorm.qk_rmsnorm(make(fw, q), make(fw, k), make(fw, qw), make(fw, kw))
    check_same(qo, fq, "apply q vs fused")
    check_same(ko, fk, "apply k vs fused")
    want_q, want_k = oracle.qk_rmsnorm(q, k, qw, kw, in_fmt=in_fmt)
    check_same(qo, want_q, "q_out")
    check_same(ko, want_k, "k_out")
    # out= forms
    so = make(fw, np.zeros((ROWS, 2), np.float32))
    assert fusednorm.qk_rmsnorm_stats(make(fw, q), make(fw, k), out=so) is so
    check_same(so, st, "stats out=")


def test_apply_mean_squares_fp8_and_in_place(fw):
    q, k, qw, kw = inputs("float32", seed=5)
    ms = np.stack([np.full(ROWS, 0.25, np.float32), np.full(ROWS, 4.0, np.float32)], axis=-1)
    qo, ko = fusednorm.qk_rmsnorm_apply(make(fw, q), make(fw, k), make(fw, ms), make(fw, qw), make(fw, kw),
                                        stats_kind="mean_squares", eps=0.0, dtype="float8_e4m3fn",
                                        out_scales=(0.1, 0.2))
    want_q, want_k = oracle.qk_rmsnorm_apply(q, k, ms, qw, kw, stats_kind="mean_squares", eps=0.0,
                                             dtype="float8_e4m3fn", out_scales=(0.1, 0.2))
    check_same(qo, want_q, "q_out")
    check_same(ko, want_k, "k_out")
    tq, tk = make(fw, q), make(fw, k)
    fusednorm.qk_rmsnorm_apply(tq, tk, make(fw, ms), make(fw, qw), make(fw, kw), stats_kind="mean_squares",
                               out=(tq, tk))
    want_q, want_k = oracle.qk_rmsnorm_apply(q, k, ms, qw, kw, stats_kind="mean_squares")
    check_same(tq, want_q, "q in place")
    check_same(tk, want_k, "k in place")


@pytest.mark.parametrize("grid", [False, True])
def test_two_rank_split(fw, grid):
    """Heads split unevenly over two simulated ranks (q: 192 + 64, k: 64 + 64): each rank's stats
    are the canonical sums of its slice; apply with the summed stats and the global widths equals
    the oracle on those sums byte for byte, and (grid inputs: every partial sum exact) the
    single-device fused result."""
    q, k, qw, kw = inputs("bfloat16", seed=6, grid=grid)
    splits_q, splits_k = (0, 192, NQ), (0, 64, NK)
    slices = [(slice(splits_q[r], splits_q[r + 1]), slice(splits_k[r], splits_k[r + 1])) for r in range(2)]
    stats = []
    for sq, sk in slices:
        st = fusednorm.qk_rmsnorm_stats(make(fw, q[:, sq]), make(fw, k[:, sk]))
        check_same(st, oracle.qk_stats(q[:, sq], k[:, sk]), "rank stats")
        stats.append(codes(st).view(np.float32))
    total = (stats[0] + stats[1]).astype(np.float32)  # the all-reduce
    fq, fk = oracle.qk_rmsnorm(q, k, qw, kw, in_fmt="bfloat16")
    for sq, sk in slices:
        qo, ko = fusednorm.qk_rmsnorm_apply(make(fw, q[:, sq]), make(fw, k[:, sk]), make(fw, total),
                                            make(fw, qw[sq]), make(fw, kw[sk]), q_global_width=NQ,
                                            k_global_width=NK)
        want_q, want_k = oracle.qk_rmsnorm_apply(q[:, sq], k[:, sk], total, qw[sq], kw[sk], in_fmt="bfloat16",
                                                 q_global_width=NQ, k_global_width=NK)
        check_same(qo, want_q, "rank q_out")
        check_same(ko, want_k, "rank k_out")
        if grid:
            check_same(qo, fq[:, sq], "rank q_out vs single device")
            check_same(ko, fk[:, sk], "rank k_out vs single device")


@pytest.mark.parametrize("in_fmt", IN_FORMATS)
def test_non_finite_rows(fw, in_fmt):
    """§6 edge policy: an Inf or NaN in a row makes its stat +Inf / the canonical NaN and its outputs
    NaN; with eps = 0 an all-zero row gives NaN too (never silent zeros)."""
    q, k, qw, kw = inputs(in_fmt, seed=12)
    q[0, 3] = np.inf
    k[2, 7] = np.nan
    q[3] = 0
    q[4, 5] = -np.inf
    st = fusednorm.qk_rmsnorm_stats(make(fw, q), make(fw, k))
    want = oracle.qk_stats(q, k)
    check_same(st, want, "stats")
    assert codes(want)[0, 0] == 0x7F800000 and codes(want)[2, 1] == 0x7FC00000
    qo, ko = fusednorm.qk_rmsnorm(make(fw, q), make(fw, k), make(fw, qw), make(fw, kw), eps=0.0)
    want_q, want_k = oracle.qk_rmsnorm(q, k, qw, kw, in_fmt=in_fmt, eps=0.0)
    assert np.isnan(want_q[[0, 3, 4]].astype(np.float32)).all() and np.isnan(want_k[2].astype(np.float32)).all()
    check_same(qo, want_q, "q_out")
    check_same(ko, want_k, "k_out")


def test_shapes():
    assert fusednorm.qk_rmsnorm_stats_shapes((2, 3, 256)) == (2, 3, 2)
    assert fusednorm.qk_rmsnorm_shapes((4, 256), (4, 128)) == ((4, 256), (4, 128))


# ------------------------------------------------------------------------------ bad calls


def poisoned(fw, shape, dtype, byte=0xAB):
    a = np.full(shape + (np.dtype(np_dtype(dtype)).itemsize,), byte, np.uint8).view(np_dtype(dtype))
    return make(fw, a.reshape(shape))


QK_CASES = [
    ("head_dim not dividing", dict(head_dim=48), fusednorm.InvalidArgumentError, ["head_dim"]),
    ("weight shape", dict(qw_n=100), fusednorm.InvalidArgumentError, ["q_weight", "[100]"]),
    ("negative eps", dict(eps=-1.0), fusednorm.InvalidArgumentError, ["eps"]),
    ("fp8 without scales", dict(out_dtype="float8_e4m3fn"), fusednorm.InvalidArgumentError, ["out_scales"]),
    ("mixed output types", dict(k_out_dtype="float16"), None, ["k_out"]),
]


@pytest.mark.parametrize("what,change,exc,fragments", QK_CASES, ids=[c[0] for c in QK_CASES])
def test_qk_rmsnorm_bad_call_writes_nothing(fw, what, change, exc, fragments):
    q, k, qw, kw = inputs("bfloat16", seed=7)
    qw = np.ones(change.get("qw_n", NQ), np.float32)
    out_dtype = change.get("out_dtype", "bfloat16")
    qo = poisoned(fw, (ROWS, NQ), out_dtype)
    ko = poisoned(fw, (ROWS, NK), change.get("k_out_dtype", out_dtype))
    before = [codes(t) for t in (qo, ko)]
    kw_ = {n: change[n] for n in ("head_dim", "eps") if n in change}
    with pytest.raises(exc or fusednorm.Error) as info:
        fusednorm.qk_rmsnorm(make(fw, q), make(fw, k), make(fw, qw), make(fw, kw), out=(qo, ko), **kw_)
    e = info.value
    assert isinstance(e, fusednorm.Error) and e.status_name in str(e)
    for f in fragments:
        assert f in e.message, (f, e.message)
    for b, t in zip(before, (qo, ko)):
        assert np.array_equal(b, codes(t))


def test_apply_without_global_widths_raises_and_writes_nothing(fw):
    q, k, qw, kw = inputs("float32", seed=8)
    st = fusednorm.qk_rmsnorm_stats(make(fw, q), make(fw, k))
    qo, ko = poisoned(fw, (ROWS, NQ), "float32"), poisoned(fw, (ROWS, NK), "float32")
    with pytest.raises(fusednorm.InvalidArgumentError) as info:
        fusednorm.qk_rmsnorm_apply(make(fw, q), make(fw, k), st, make(fw, qw), make(fw, kw), out=(qo, ko))
    assert "global_width" in info.value.message
    assert (codes(qo) == 0xABABABAB).all() and (codes(ko) == 0xABABABAB).all()
    with pytest.raises(fusednorm.InvalidArgumentError):  # narrower than the local width
        fusednorm.qk_rmsnorm_apply(make(fw, q), make(fw, k), st, make(fw, qw), make(fw, kw), q_global_width=NQ - 1,
                                   k_global_width=NK, out=(qo, ko))
    assert (codes(qo) == 0xABABABAB).all() and (codes(ko) == 0xABABABAB).all()
    with pytest.raises(ValueError):
        fusednorm.qk_rmsnorm_apply(make(fw, q), make(fw, k), st, make(fw, qw), make(fw, kw), stats_kind="means")


# ------------------------------------------------------------------------------ torch


if TORCH_SKIP is None:
    import torch


@requires_torch
def test_qk_ops_opcheck():
    import fusednorm.torch  # noqa: F401
    q, k, qw, kw = (torch.from_numpy(a.astype(np.float32)) for a in inputs("float32", seed=9))
    ops = torch.ops.fusednorm
    torch.library.opcheck(ops.qk_rmsnorm.default, (q, k, qw[:D], kw[:D], None, None, D, None, None))
    torch.library.opcheck(ops.qk_rmsnorm.default, (q, k, qw, kw, torch.tensor([0.1, 0.2]), "float8_e4m3fn", None,
                                                   None, None))
    torch.library.opcheck(ops.qk_rmsnorm_out.default, (q, k, qw, kw, torch.empty_like(q), torch.empty_like(k), None,
                                                       None, None, None, None))
    torch.library.opcheck(ops.qk_rmsnorm_.default, (q.clone(), k.clone(), qw, kw, None, None, None))
    torch.library.opcheck(ops.qk_rmsnorm_stats.default, (q, k))
    st = ops.qk_rmsnorm_stats(q, k)
    torch.library.opcheck(ops.qk_rmsnorm_stats_out.default, (q, k, torch.empty(ROWS, 2)))
    torch.library.opcheck(ops.qk_rmsnorm_apply.default, (q, k, st, qw, kw, None, None, "sums", NQ, NK, None, None))
    torch.library.opcheck(ops.qk_rmsnorm_apply_out.default, (q, k, st, qw, kw, torch.empty_like(q),
                                                             torch.empty_like(k), None, None, "sums", NQ, NK, None,
                                                             None))
    torch.library.opcheck(ops.qk_rmsnorm_apply_.default, (q.clone(), k.clone(), st, qw, kw, "sums", NQ, NK, None,
                                                          None))


def _qk_layer(qkv, qw, kw):
    q, k = qkv[:, :NQ], qkv[:, NQ:NQ + NK]
    qo, ko = fusednorm.qk_rmsnorm(q, k, qw, kw, head_dim=D)
    return (qo.float() * 2).sum(-1), ko


@requires_torch
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_qk_torch_compile_fullgraph(backend):
    torch._dynamo.reset()
    q, k, qw, kw = inputs("bfloat16", seed=10)
    qkv = torch.cat([make("torch", q), make("torch", k)], dim=1)
    qwt, kwt = make("torch", qw[:D]), make("torch", kw[:D])
    want = _qk_layer(qkv, qwt, kwt)
    got = torch.compile(_qk_layer, fullgraph=True, backend=backend)(qkv, qwt, kwt)
    for g, e in zip(got, want):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert np.array_equal(codes(g), codes(e))


@requires_torch
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_qk_in_place_under_torch_compile(backend):
    """out=(q, k) on column views of one QKV buffer (torch.ops.fusednorm.qk_rmsnorm_ mutating views),
    compiled: the buffer ends as eagerly."""
    torch._dynamo.reset()
    q, k, qw, kw = inputs("bfloat16", seed=11)
    qkv = np.concatenate([q, k, np.ones((ROWS, 64), np.float32).astype(q.dtype)], axis=1)

    def f(qkv, qw, kw):
        q, k = qkv[:, :NQ], qkv[:, NQ:NQ + NK]
        fusednorm.qk_rmsnorm(q, k, qw, kw, head_dim=D, out=(q, k))
        return qkv * 2

    qwt, kwt = make("torch", qw[:D]), make("torch", kw[:D])
    eager, comp = make("torch", qkv), make("torch", qkv)
    want = f(eager, qwt, kwt)
    got = torch.compile(f, fullgraph=True, backend=backend)(comp, qwt, kwt)
    assert np.array_equal(codes(got), codes(want))
    assert np.array_equal(codes(comp), codes(eager))


@requires_torch
def test_qk_torch_compile_dynamic_rows():
    """One graph for several row counts (the fakes allocate from symbolic shapes)."""
    torch._dynamo.reset()
    f = torch.compile(lambda q, k, qw, kw: fusednorm.qk_rmsnorm_stats(q, k), fullgraph=True, dynamic=True)
    for rows in (3, 9):
        q, k, qw, kw = (make("torch", a) for a in inputs("float32", rows=rows, seed=13))
        got = f(q, k, qw, kw)
        assert tuple(got.shape) == (rows, 2)
        check_same(got, oracle.qk_stats(codes(q).view(np.float32), codes(k).view(np.float32)), "stats")
