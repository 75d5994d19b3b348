"""fusednorm_qk_rmsnorm_stats, fusednorm_qk_rmsnorm_apply, fusednorm_qk_rmsnorm: qk_rmsnorm_stats,
qk_rmsnorm_apply and qk_rmsnorm, each with _into and _shapes (see _ops_common for the layout of a
module)."""

from . import _C
from ._errors import check
from ._formats import format_of
from ._frameworks import adapter
from ._ops_common import _arg_in, _arg_out, _cached_options, _choice, _opt_format, _stream, _torch_compiling

_QK_STATS_KINDS = {"sums": 0, "mean_squares": 1}


def qk_rmsnorm_stats_shapes(q_shape):
    """The shape of qk_rmsnorm_stats' statistics for q of `q_shape` [..., Nq]: [..., 2]."""
    q_shape = tuple(q_shape)
    return q_shape[:-1] + (2,)


def qk_rmsnorm_shapes(q_shape, k_shape):
    """(q_out shape, k_out shape) of qk_rmsnorm and qk_rmsnorm_apply: q's and k's."""
    return tuple(q_shape), tuple(k_shape)


@_cached_options
def _qk_rmsnorm_options(stats_kind, q_global_width, k_global_width, head_dim, eps, weight_offset):
    o = _C.QkRmsnormOptions()
    if stats_kind is not None:
        o.stats_kind = _choice("stats_kind", stats_kind, _QK_STATS_KINDS)
    for name, value in (("q_global_width", q_global_width), ("k_global_width", k_global_width),
                        ("head_dim", head_dim), ("eps", eps), ("weight_offset", weight_offset)):
        if value is not None:
            setattr(o, name, value)
    return o


def _out_scales(out_scales, x):
    """out_scales as a float32 array [2] on x's device: a pair of floats is made one; arrays (and
    None) unchanged."""
    if isinstance(out_scales, (tuple, list)):
        return adapter(x).floats(x, [float(v) for v in out_scales])
    return out_scales


def _qk_outputs(q_out, k_out, dtype, finishers):
    """_C's q_out and k_out (in place: q and k themselves); FP8 outputs may be raw uint8 codes
    with dtype= naming the format."""
    f = _opt_format(dtype)
    return (_arg_out(q_out, f, finishers, "q_out"), _arg_out(k_out, f, finishers, "k_out"))


def qk_rmsnorm_stats_into(q, k, stats, *, stream=None):
    """One fusednorm_qk_rmsnorm_stats call on arrays the caller owns (see qk_rmsnorm_stats)."""
    finishers = []
    args = (_arg_in(q, None, "q"), _arg_in(k, None, "k"), _arg_out(stats, None, finishers, "stats"))
    check(_C.qk_rmsnorm_stats(*args, _qk_rmsnorm_options(None, None, None, None, None, None), _stream(stream, q)))
    for f in finishers:
        f()


def qk_rmsnorm_stats(q, k, *, out=None, stream=None):
    """The local statistics of a tensor-parallel QK-norm (fusednorm_qk_rmsnorm_stats): stats
    [..., 2] float32, stats[..., 0] = the sum of squares of q's row, stats[..., 1] = k's, each in
    the canonical order over this rank's slice (docs/numerics.md §6).

    q: [..., Nq] float32/float16/bfloat16 (a strided view of a fused QKV projection is fine: the
    last dimension contiguous); k: [..., Nk], q's type and leading dimensions. Sum the stats of
    all ranks (an all-reduce), then qk_rmsnorm_apply(..., stats_kind="sums", q_global_width=,
    k_global_width=). Functional form: a new float32 array of q's framework on q's device. out=: a
    float32 array [..., 2] the caller owns; returned. Raises fusednorm.Error (a subclass per
    status) with the library's message; writes nothing then."""
    if _torch_compiling(q):
        from . import torch as ft
        return ft.qk_rmsnorm_stats(q, k, out=out)
    if out is None:
        a = adapter(q)
        out = a.empty(q, qk_rmsnorm_stats_shapes(a.logical_shape(q, None)), format_of("float32"))
    qk_rmsnorm_stats_into(q, k, out, stream=stream)
    return out


def qk_rmsnorm_apply_into(q, k, stats, q_weight, k_weight, q_out, k_out, *, out_scales=None, dtype=None,
                          stats_kind=None, q_global_width=None, k_global_width=None, eps=None, weight_offset=None,
                          stream=None):
    """One fusednorm_qk_rmsnorm_apply call on arrays the caller owns (see qk_rmsnorm_apply); q_out
    and k_out may be q and k themselves (in place)."""
    o = _qk_rmsnorm_options(stats_kind, q_global_width, k_global_width, None, eps, weight_offset)
    finishers = []
    args = (_arg_in(q, None, "q"), _arg_in(k, None, "k"), _arg_in(stats, None, "stats"),
            _arg_in(q_weight, None, "q_weight"), _arg_in(k_weight, None, "k_weight"),
            *_qk_outputs(q_out, k_out, dtype, finishers),
            _arg_in(_out_scales(out_scales, q), None, "out_scales"))
    check(_C.qk_rmsnorm_apply(*args, o, _stream(stream, q)))
    for f in finishers:
        f()


def _qk_alloc_outputs(q, k, dtype, out, what):
    if out is None:
        a = adapter(q)
        qs, ks = qk_rmsnorm_shapes(a.logical_shape(q, None), a.logical_shape(k, None))
        f = format_of(dtype) if dtype is not None else a.format(q)
        return a.empty(q, qs, f), a.empty(k, ks, f)
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return out[0], out[1]
    raise TypeError("fusednorm.%s: out= takes (q_out, k_out)" % what)


def qk_rmsnorm_apply(q, k, stats, q_weight, k_weight, *, q_global_width=None, k_global_width=None, stats_kind="sums",
                     eps=None, weight_offset=None, dtype=None, out_scales=None, out=None, stream=None):
    """Applies a QK-norm from (all-reduced) statistics (fusednorm_qk_rmsnorm_apply). Returns
    (q_out, k_out).

    q, k: as for qk_rmsnorm_stats; stats: [..., 2] float32, the sums of squares of all ranks
    (stats_kind="sums", the default; q_global_width, k_global_width: Nq and Nk over all ranks,
    required) or mean squares (stats_kind="mean_squares": used as they are). q_weight [Nq],
    k_weight [Nk]: this rank's slices (float32/float16/bfloat16). out = rn((x * inv) * (w +
    weight_offset)), inv = 1 / sqrt(var + eps) (eps 1e-6, weight_offset 0: None means the
    library's default). dtype: None (q's type), or "float8_e4m3fn" / "float8_e4m3fnuz" for FP8
    attention, with out_scales the static dequantization scales of q and k (a float32 array [2]
    on q's device, or a pair of floats). Functional form: new arrays of q's framework on q's
    device. out=: (q_out, k_out) the caller owns, which may be (q, k) themselves (in place).
    Raises fusednorm.Error (a subclass per status) with the library's message; writes nothing
    then."""
    if _torch_compiling(q):
        from . import torch as ft
        return ft.qk_rmsnorm_apply(q, k, stats, q_weight, k_weight, q_global_width=q_global_width,
                                   k_global_width=k_global_width, stats_kind=stats_kind, eps=eps,
                                   weight_offset=weight_offset, dtype=dtype, out_scales=out_scales, out=out)
    qo, ko = _qk_alloc_outputs(q, k, dtype, out, "qk_rmsnorm_apply")
    qk_rmsnorm_apply_into(q, k, stats, q_weight, k_weight, qo, ko, out_scales=out_scales, dtype=dtype,
                          stats_kind=stats_kind, q_global_width=q_global_width, k_global_width=k_global_width,
                          eps=eps, weight_offset=weight_offset, stream=stream)
    return qo, ko


def qk_rmsnorm_into(q, k, q_weight, k_weight, q_out, k_out, *, out_scales=None, dtype=None, head_dim=None, eps=None,
                    weight_offset=None, stream=None):
    """One fusednorm_qk_rmsnorm call on arrays the caller owns (see qk_rmsnorm); q_out and k_out
    may be q and k themselves (in place)."""
    o = _qk_rmsnorm_options(None, None, None, head_dim, eps, weight_offset)
    finishers = []
    args = (_arg_in(q, None, "q"), _arg_in(k, None, "k"), _arg_in(q_weight, None, "q_weight"),
            _arg_in(k_weight, None, "k_weight"), *_qk_outputs(q_out, k_out, dtype, finishers),
            _arg_in(_out_scales(out_scales, q), None, "out_scales"))
    check(_C.qk_rmsnorm(*args, o, _stream(stream, q)))
    for f in finishers:
        f()


def qk_rmsnorm(q, k, q_weight, k_weight, *, head_dim=None, eps=None, weight_offset=None, dtype=None,
               out_scales=None, out=None, stream=None):
    """The single-device QK-norm of attention (fusednorm_qk_rmsnorm): RMSNorm of q and of k, over
    each whole row (head_dim None or 0: MiniMax-M2, OLMo-2; weights [Nq], [Nk]) or over each head
    of head_dim elements (Qwen3, Gemma-3; weights [head_dim], shared by the heads). Returns
    (q_out, k_out).

    q: [..., Nq] float32/float16/bfloat16 (strided views of a fused QKV projection are fine); k:
    [..., Nk], q's type and leading dimensions. out = rn((x * inv) * (w + weight_offset)), inv =
    1 / sqrt(ss / G + eps), ss the sum of squares of the group in the canonical order
    (docs/numerics.md §6); eps (1e-6), weight_offset (0; 1 for Gemma): None means the library's
    default. dtype: None (q's type), or "float8_e4m3fn" / "float8_e4m3fnuz" with out_scales (the
    static dequantization scales of q and k: a float32 array [2] on q's device, or a pair of
    floats). Functional form: new arrays of q's framework on q's device. out=: (q_out, k_out)
    the caller owns, which may be (q, k) themselves (in place). Equals qk_rmsnorm_stats then
    qk_rmsnorm_apply (global widths Nq, Nk) byte for byte when head_dim is 0.
    Raises fusednorm.Error (a subclass per status) with the library's message; writes nothing
    then."""
    if _torch_compiling(q):
        from . import torch as ft
        return ft.qk_rmsnorm(q, k, q_weight, k_weight, head_dim=head_dim, eps=eps, weight_offset=weight_offset,
                             dtype=dtype, out_scales=out_scales, out=out)
    qo, ko = _qk_alloc_outputs(q, k, dtype, out, "qk_rmsnorm")
    qk_rmsnorm_into(q, k, q_weight, k_weight, qo, ko, out_scales=out_scales, dtype=dtype, head_dim=head_dim, eps=eps,
                    weight_offset=weight_offset, stream=stream)
    return qo, ko
