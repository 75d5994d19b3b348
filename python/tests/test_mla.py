"""fusednorm.mla_rope_rmsnorm_quant from NumPy and PyTorch CPU arrays against the NumPy oracle
(oracle.py, from docs/numerics.md §5), byte for byte: every q type and cache type, both rope
styles, positions or cache_len, int32/int64 indices, k_scale, eps and weight_offset, a new q_out,
out= and in place, strided views; bad index values and bad calls (the library's message, q and the
cache unchanged); the torch custom ops (opcheck, torch.compile(fullgraph=True))."""

import numpy as np
import pytest

import fusednorm
import oracle
from conftest import TORCH_SKIP, requires_torch
from oracle import IN_FORMATS, codes, make, np_dtype
from test_rmsnorm_quant import check_same  # the bytes of two arrays, equal

T, HQ, L, R = 7, 3, 64, 16
ROW_OFFSETS = [0, 3, 7]           # two sequences: tokens 0..2 and 3..6
CACHE_LEN = [5, 2]                # positions 5, 6, 7 and 2, 3, 4, 5
POSITIONS = [5, 6, 7, 2, 3, 4, 5]
PAGE_TABLE = [[4, 1, 0], [2, 5, 3]]
NUM_PAGES, PAGE_SIZE, MAX_POS = 6, 4, 12
CACHE_FORMATS = ["bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3", "float8_e5m2",
                 "float8_e5m2fnuz"]


def inputs(in_fmt="bfloat16", table_fmt="float32", seed=0, l=L, r=R):
    """q [T, HQ, r], kv [T, l + r] (rows of magnitudes 1e-2 .. 1e2), weight [l], cos_sin
    [MAX_POS, r] (cos, sin of pos * 10000^(-2j/r), interleaved)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((T, HQ, r)).astype(np.float32) * 3
    kv = rng.standard_normal((T, l + r)).astype(np.float32)
    kv *= np.float32(10.0) ** rng.integers(-2, 3, size=(T, 1)).astype(np.float32)
    w = (0.5 + rng.random(l)).astype(np.float32)
    ang = np.arange(MAX_POS)[:, None] * 10000.0 ** (-2.0 * np.arange(r // 2)[None, :] / r)
    cs = np.empty((MAX_POS, r), np.float32)
    cs[:, 0::2], cs[:, 1::2] = np.cos(ang), np.sin(ang)
    t = np_dtype(in_fmt)
    return q.astype(t), kv.astype(t), w.astype(t), cs.astype(np_dtype(table_fmt))


def old_cache(cache_fmt, seed=1, l=L, r=R):
    """The cache's previous contents: random bytes (so any stray write shows)."""
    size = np.dtype(np_dtype(cache_fmt)).itemsize
    raw = np.random.default_rng(seed).integers(0, 256, (NUM_PAGES, PAGE_SIZE, l + r, size), dtype=np.uint8)
    return raw.view(np_dtype(cache_fmt)).reshape(NUM_PAGES, PAGE_SIZE, l + r)


def index(fw, values, dtype=np.int32):
    a = np.array(values, dtype)
    if fw == "numpy":
        return a
    import torch
    return torch.from_numpy(a)


def cache_arg(fw, cache, cache_fmt):
    """The cache in fw, and the cache_dtype= it needs: PyTorch has no float8_e4m3 (uint8 codes)."""
    if fw == "torch" and cache_fmt == "float8_e4m3":
        return make(fw, cache.view(np.uint8)), cache_fmt
    return make(fw, cache), None


def run(fw, in_fmt="bfloat16", cache_fmt="bfloat16", table_fmt="float32", index_dtype=np.int32, by="cache_len",
        seed=0, **kw):
    q, kv, w, cs = inputs(in_fmt, table_fmt, seed)
    cache = old_cache(cache_fmt, seed + 1)
    tc, cd = cache_arg(fw, cache, cache_fmt)
    where = dict(positions=index(fw, POSITIONS, index_dtype)) if by == "positions" else dict(
        cache_len=index(fw, CACHE_LEN, index_dtype))
    tq = make(fw, q)
    got = fusednorm.mla_rope_rmsnorm_quant(tq, make(fw, kv), make(fw, w), make(fw, cs),
                                           index(fw, PAGE_TABLE, index_dtype), tc,
                                           row_offsets=index(fw, ROW_OFFSETS, index_dtype), cache_dtype=cd, **where,
                                           **kw)
    opts = {n: kw[n] for n in ("rope_style", "eps", "weight_offset") if n in kw}
    ks = kw.get("k_scale")
    want_q, want_cache = oracle.mla_rope_rmsnorm_quant(
        q, kv, w, cs, PAGE_TABLE, cache, ROW_OFFSETS, cache_len=CACHE_LEN, in_fmt=in_fmt, cache_fmt=cache_fmt,
        k_scale=None if ks is None or not isinstance(ks, float) else ks, **opts)
    return got, tq, tc, want_q, want_cache


@pytest.mark.parametrize("in_fmt", IN_FORMATS)
@pytest.mark.parametrize("cache_fmt", CACHE_FORMATS)
def test_matches_oracle(fw, in_fmt, cache_fmt):
    got, tq, tc, want_q, want_cache = run(fw, in_fmt, cache_fmt)
    assert got is not tq and type(got) is type(tq) and str(got.dtype) == str(tq.dtype)
    check_same(got, want_q, "q_out")
    check_same(tc, want_cache, "cache")


@pytest.mark.parametrize("rope_style", ["interleaved", "neox"])
@pytest.mark.parametrize("by", ["positions", "cache_len"])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_rope_styles_and_positions(fw, rope_style, by, index_dtype):
    got, _, tc, want_q, want_cache = run(fw, "float32", "float8_e4m3fn", table_fmt="bfloat16", index_dtype=index_dtype,
                                         by=by, rope_style=rope_style, seed=2)
    check_same(got, want_q, "q_out")
    check_same(tc, want_cache, "cache")


def test_options_and_k_scale(fw):
    got, _, tc, want_q, want_cache = run(fw, "bfloat16", "float8_e4m3fn", eps=1e-2, weight_offset=1.0,
                                         k_scale=0.05, seed=3)
    check_same(got, want_q, "q_out")
    check_same(tc, want_cache, "cache")


def test_in_place_and_out(fw):
    q, kv, w, cs = inputs("float16", seed=4)
    want_q, want_cache = oracle.mla_rope_rmsnorm_quant(q, kv, w, cs, PAGE_TABLE, old_cache("bfloat16"), ROW_OFFSETS,
                                                       positions=POSITIONS, in_fmt="float16", k_scale=2.0)
    args = lambda: (make(fw, kv), make(fw, w), make(fw, cs), index(fw, PAGE_TABLE))  # noqa: E731
    for mode in ("inplace", "out"):
        tq, cache = make(fw, q), make(fw, old_cache("bfloat16"))
        out = make(fw, np.zeros_like(q))
        kw = dict(inplace=True) if mode == "inplace" else dict(out=out)
        got = fusednorm.mla_rope_rmsnorm_quant(tq, *args(), cache, row_offsets=index(fw, ROW_OFFSETS),
                                               positions=index(fw, POSITIONS, np.int64),
                                               k_scale=make(fw, np.array([2.0], np.float32)), **kw)
        assert got is (tq if mode == "inplace" else out)
        check_same(got, want_q, "q_out " + mode)
        check_same(cache, want_cache, "cache " + mode)
        if mode == "out":
            check_same(tq, q, "q unchanged")


def test_invalid_tokens_on_the_cpu(fw):
    """invalid_tokens is counted by the GPU; the CPU validates instead and leaves it as given."""
    inv = index(fw, [0])
    got, _, tc, want_q, want_cache = run(fw, "float32", "float16", invalid_tokens=inv, seed=11)
    check_same(got, want_q, "q_out")
    check_same(tc, want_cache, "cache")
    assert codes(inv).tolist() == [0]


def test_strided_views_and_large_latent(fw):
    """q a head slice of a wider projection [T, HQ, 128 + R], kv a column slice, the cache one layer
    of [2, pages, page_size, L + R]; L = 512, R = 64 (DeepSeek's sizes)."""
    l, r = 512, 64
    q, kv, w, cs = inputs("bfloat16", seed=5, l=l, r=r)
    proj = np.zeros((T, HQ, 128 + r), q.dtype)
    proj[:, :, 128:] = q
    wide_kv = np.zeros((T, l + r + 8), kv.dtype)
    wide_kv[:, 8:] = kv
    layers = np.stack([old_cache("float8_e4m3fn", 6, l, r), old_cache("float8_e4m3fn", 7, l, r)])
    tp, tkv, tl = make(fw, proj), make(fw, wide_kv), make(fw, layers)
    got = fusednorm.mla_rope_rmsnorm_quant(tp[:, :, 128:], tkv[:, 8:], make(fw, w), make(fw, cs),
                                           index(fw, PAGE_TABLE), tl[1], row_offsets=index(fw, ROW_OFFSETS),
                                           cache_len=index(fw, CACHE_LEN), inplace=True)
    want_q, want_cache = oracle.mla_rope_rmsnorm_quant(q, kv, w, cs, PAGE_TABLE, layers[1], ROW_OFFSETS,
                                                       cache_len=CACHE_LEN, in_fmt="bfloat16",
                                                       cache_fmt="float8_e4m3fn")
    check_same(got, want_q, "q in place")
    check_same(codes(tp)[:, :, :128], np.zeros((T, HQ, 128), np.uint16), "the rest of the projection")
    check_same(tl[1], want_cache, "cache layer 1")
    check_same(tl[0], layers[0], "cache layer 0")


def test_rotation_of_the_oracle():
    """The oracle's rotation: position 0 is the identity; a quarter turn maps (1, 0) to (0, 1)."""
    x = np.array([[1.0, 0.0, 2.0, 3.0]], np.float32)
    ident = np.array([[1.0, 0.0, 1.0, 0.0]], np.float32)
    assert np.array_equal(oracle.rope(x, ident), x)
    quarter = np.array([[0.0, 1.0, 0.0, 1.0]], np.float32)
    assert oracle.rope(x, quarter).tolist() == [[0.0, 1.0, -3.0, 2.0]]
    assert oracle.rope(x, quarter, "neox").tolist() == [[-2.0, -3.0, 1.0, 0.0]]


# ------------------------------------------------------------------------------ bad calls

BAD = [
    ("position out of the table", dict(positions=[5, 6, 7, 2, 3, 99, 5]), ["positions", "99"]),
    ("two tokens on one slot", dict(positions=[5, 6, 7, 2, 3, 5, 5]), ["slot"]),
    ("page id out of range", dict(page_table=[[4, 1, 0], [2, 9, 3]]), ["page_table", "9"]),
    ("row_offsets not ending at T", dict(row_offsets=[0, 3, 6]), ["row_offsets"]),
    ("positions and cache_len", dict(both=True), ["cache_len"]),
    ("weight shape", dict(weight_n=60), ["weight"]),
]


@pytest.mark.parametrize("what,change,fragments", BAD, ids=[c[0] for c in BAD])
def test_bad_call_raises_and_writes_nothing(fw, what, change, fragments):
    q, kv, w, cs = inputs("bfloat16", seed=8)
    cache = old_cache("float8_e4m3fn", 9)
    tq, tc = make(fw, q), make(fw, cache)
    where = dict(positions=index(fw, change.get("positions", POSITIONS)))
    if change.get("both"):
        where["cache_len"] = index(fw, CACHE_LEN)
    with pytest.raises(fusednorm.InvalidArgumentError) as info:
        fusednorm.mla_rope_rmsnorm_quant(tq, make(fw, kv), make(fw, np.ones(change.get("weight_n", L), np.float32)),
                                         make(fw, cs), index(fw, change.get("page_table", PAGE_TABLE)), tc,
                                         row_offsets=index(fw, change.get("row_offsets", ROW_OFFSETS)), inplace=True,
                                         **where)
    e = info.value
    assert e.status_name in str(e)
    for f in fragments:
        assert f in e.message, (f, e.message)
    check_same(tq, q, "q")
    check_same(tc, cache, "cache")


def test_python_argument_errors(fw):
    q, kv, w, cs = inputs()
    with pytest.raises(ValueError):
        fusednorm.mla_rope_rmsnorm_quant(make(fw, q), make(fw, kv), make(fw, w), make(fw, cs), index(fw, PAGE_TABLE),
                                         make(fw, old_cache("bfloat16")), row_offsets=index(fw, ROW_OFFSETS),
                                         positions=index(fw, POSITIONS), rope_style="gptj")
    with pytest.raises(TypeError):
        fusednorm.mla_rope_rmsnorm_quant(make(fw, q), make(fw, kv), make(fw, w), make(fw, cs), index(fw, PAGE_TABLE),
                                         make(fw, old_cache("bfloat16")), row_offsets=index(fw, ROW_OFFSETS),
                                         positions=index(fw, POSITIONS), inplace=True, out=make(fw, q))


# ------------------------------------------------------------------------------ torch


if TORCH_SKIP is None:
    import torch


def _torch_args(seed=10, cache_fmt="float8_e4m3fn"):
    q, kv, w, cs = (make("torch", a) for a in inputs("bfloat16", seed=seed))
    cache = make("torch", old_cache(cache_fmt, seed))
    return q, kv, w, cs, index("torch", PAGE_TABLE), cache


@requires_torch
def test_mla_ops_opcheck():
    import fusednorm.torch  # noqa: F401
    q, kv, w, cs, pt, cache = _torch_args(cache_fmt="float32")  # opcheck's schema test cannot compare FP8
    cache[...] = 0
    rest = (None, index("torch", ROW_OFFSETS), index("torch", CACHE_LEN), pt, cache, None, None, None, "interleaved",
            None, None)
    ops = torch.ops.fusednorm
    torch.library.opcheck(ops.mla_rope_rmsnorm_quant.default, (q, kv, w, cs) + rest)
    torch.library.opcheck(ops.mla_rope_rmsnorm_quant_out.default, (q, torch.empty_like(q), kv, w, cs) + rest)
    torch.library.opcheck(ops.mla_rope_rmsnorm_quant_.default, (q.clone(), kv, w, cs) + rest)


def _mla_step(q, kv, w, cs, pt, cache, ro, cl):
    q_out = fusednorm.mla_rope_rmsnorm_quant(q, kv, w, cs, pt, cache, row_offsets=ro, cache_len=cl, k_scale=0.5)
    return q_out.float().sum(-1)


@requires_torch
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_mla_torch_compile_fullgraph(backend):
    torch._dynamo.reset()
    eager_args, comp_args = _torch_args(), _torch_args()
    ro, cl = index("torch", ROW_OFFSETS), index("torch", CACHE_LEN)
    want = _mla_step(*eager_args, ro, cl)
    got = torch.compile(_mla_step, fullgraph=True, backend=backend)(*comp_args, ro, cl)
    assert np.array_equal(codes(got), codes(want))
    assert np.array_equal(codes(comp_args[5]), codes(eager_args[5]))  # the cache was written in the graph too
