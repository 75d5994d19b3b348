"""fusednorm_mla_rope_rmsnorm_quant: mla_rope_rmsnorm_quant, mla_rope_rmsnorm_quant_into,
mla_rope_rmsnorm_quant_shapes (see _ops_common for the layout of a module)."""

import numbers

from . import _C
from ._errors import check
from ._frameworks import adapter
from ._ops_common import _arg_in, _arg_out, _cached_options, _choice, _opt_format, _stream, _torch_compiling

_ROPE_STYLES = {"interleaved": 0, "neox": 1}


def mla_rope_rmsnorm_quant_shapes(q_shape):
    """The shape of the q_out that mla_rope_rmsnorm_quant allocates: q's [T, Hq, R]."""
    return tuple(q_shape)


@_cached_options
def _mla_rope_rmsnorm_quant_options(rope_style, eps, weight_offset):
    o = _C.MlaRopeRmsnormQuantOptions()
    if rope_style is not None:
        o.rope_style = _choice("rope_style", rope_style, _ROPE_STYLES)
    if eps is not None:
        o.eps = eps
    if weight_offset is not None:
        o.weight_offset = weight_offset
    return o


def mla_rope_rmsnorm_quant_into(q, q_out, kv, weight, cos_sin, page_table, kv_cache, *, positions=None,
                                row_offsets=None, cache_len=None, k_scale=None, invalid_tokens=None, cache_dtype=None,
                                rope_style=None, eps=None, weight_offset=None, stream=None):
    """One fusednorm_mla_rope_rmsnorm_quant call on arrays the caller owns (see
    mla_rope_rmsnorm_quant); q_out None rotates q in place."""
    o = _mla_rope_rmsnorm_quant_options(rope_style, eps, weight_offset)
    finishers = []
    if isinstance(k_scale, numbers.Real):
        k_scale = adapter(kv).scalar(kv, float(k_scale))
    args = (_arg_out(q, None, finishers, "q") if q_out is None else _arg_in(q, None, "q"),
            _arg_out(q_out, None, finishers, "q_out"), _arg_in(kv, None, "kv"), _arg_in(weight, None, "weight"),
            _arg_in(cos_sin, None, "cos_sin"), _arg_in(positions, None, "positions"),
            _arg_in(row_offsets, None, "row_offsets"), _arg_in(cache_len, None, "cache_len"),
            _arg_in(page_table, None, "page_table"),
            _arg_out(kv_cache, _opt_format(cache_dtype), finishers, "kv_cache"),
            _arg_in(k_scale, None, "k_scale"), _arg_out(invalid_tokens, None, finishers, "invalid_tokens"))
    check(_C.mla_rope_rmsnorm_quant(*args, o, _stream(stream, kv)))
    for f in finishers:
        f()


def mla_rope_rmsnorm_quant(q, kv, weight, cos_sin, page_table, kv_cache, *, row_offsets=None, positions=None,
                           cache_len=None, k_scale=None, invalid_tokens=None, cache_dtype=None, rope_style="interleaved",
                           eps=None, weight_offset=None, inplace=False, out=None, stream=None):
    """The DeepSeek-style MLA KV-cache write in one pass (fusednorm_mla_rope_rmsnorm_quant): for
    each token t of a ragged batch at position pos(t), q's rope part is rotated, and the latent
    kv row is RMS-normalized (its first L elements) and rotated (its last R), encoded to the
    cache's type and written into the paged cache at page page_table[b, pos // page_size], slot
    pos % page_size (docs/numerics.md §5). Returns the rotated q: a new array (default), out=, or
    q itself (inplace=True).

    q: [T, Hq, R] float32/float16/bfloat16 (any strides but the last: a view of the q
    projection); kv: [T, L + R], q's type (c_kv then k_pe); weight: [L] (gamma of the latent
    norm); cos_sin: [max_pos, R] float32 or bfloat16, row p = cos, sin interleaved per pair;
    page_table: [B, max_pages] int32/int64 page ids; kv_cache: [num_pages, page_size, L + R]
    bfloat16, float16, float32 or FP8 (float8_e4m3fn, float8_e4m3fnuz, float8_e4m3, float8_e5m2,
    float8_e5m2fnuz; cache_dtype= names the format of a raw uint8 cache), caller-owned: only the
    T addressed slots are written. row_offsets: [B + 1] int32/int64 (0, ..., T; sequence b owns
    tokens row_offsets[b] <= t < row_offsets[b+1]); positions: [T] int32/int64, or cache_len: [B]
    (pos = cache_len[b] + t - row_offsets[b]): exactly one of the two. k_scale: the cache's
    dequantization scale (a float or a float32 array [1]; None: 1): the cache holds enc(v /
    k_scale). invalid_tokens: int32 [1] the GPU counts skipped tokens into (the caller zeroes it).
    rope_style: "interleaved" (default; pairs (x[2j], x[2j+1])) or "neox" (pairs (x[j],
    x[j + R/2])). eps (1e-6), weight_offset (0): None means the library's default.
    Raises fusednorm.Error (a subclass per status) with the library's message (CPU: bad index
    values name the tensor, index and value); writes nothing then (q and the cache included)."""
    if _torch_compiling(kv):
        from . import torch as ft
        return ft.mla_rope_rmsnorm_quant(q, kv, weight, cos_sin, page_table, kv_cache, row_offsets=row_offsets,
                                         positions=positions, cache_len=cache_len, k_scale=k_scale,
                                         invalid_tokens=invalid_tokens, cache_dtype=cache_dtype,
                                         rope_style=rope_style, eps=eps, weight_offset=weight_offset,
                                         inplace=inplace, out=out)
    if inplace:
        if out is not None:
            raise TypeError("fusednorm.mla_rope_rmsnorm_quant: inplace=True and out= exclude each other")
        q_out = None
    elif out is None:
        a = adapter(q)
        q_out = a.empty(q, mla_rope_rmsnorm_quant_shapes(a.logical_shape(q, None)), a.format(q))
    else:
        q_out = out
    mla_rope_rmsnorm_quant_into(q, q_out, kv, weight, cos_sin, page_table, kv_cache, positions=positions,
                                row_offsets=row_offsets, cache_len=cache_len, k_scale=k_scale,
                                invalid_tokens=invalid_tokens, cache_dtype=cache_dtype, rope_style=rope_style,
                                eps=eps, weight_offset=weight_offset, stream=stream)
    return q if q_out is None else q_out
