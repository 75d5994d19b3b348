"""An independent NumPy + ml_dtypes computation of fusednorm's operations, from the spec
(docs/numerics.md), and the helpers the tests share: arrays of each framework from NumPy data,
and the bytes of any array."""

import numpy as np
import ml_dtypes

FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0, "float8_e4m3": 240.0, "float8_e5m2": 57344.0,
           "float8_e5m2fnuz": 57344.0, "int8": 127.0}
OUT_FORMATS = list(FP8_MAX)
IN_FORMATS = ["float32", "float16", "bfloat16"]
SCALE_FORMATS = ["float32", "float16", "bfloat16", "float8_e8m0fnu"]


def np_dtype(name):
    return np.dtype(name) if name in ("float32", "float16", "int8", "uint8") else np.dtype(getattr(ml_dtypes, name))


def codes(a):
    """The bytes of a NumPy or torch array as a NumPy integer array of its element size (a copy)."""
    if type(a).__module__.split(".")[0] == "torch":
        import torch
        t = a.detach().cpu()
        size = t.element_size()
        raw = t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[size]).numpy()
        return raw.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[size]).copy()
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize]).copy()


def as_f32(a, fmt=None):
    """Decoded values (float32) of an array of NumPy/ml_dtypes or torch elements."""
    if type(a).__module__.split(".")[0] == "torch":
        fmt = fmt or str(a.dtype).replace("torch.", "")
        return codes(a).view(np_dtype(fmt)).astype(np.float32)
    return np.asarray(a).astype(np.float32)


# ------------------------------------------------------------------------------ encoders


def enc(values_f32, fmt):
    """enc_T of numerics.md §1 for finite or special f32 values, as ml_dtypes/NumPy elements:
    round to nearest even, saturating (±Inf and finite values beyond the largest finite give
    ±largest), NaN to the format's NaN (int8: 0)."""
    v = np.asarray(values_f32, np.float32)
    if fmt == "float32":
        return v.copy()
    if fmt in ("float16", "bfloat16"):
        with np.errstate(all="ignore"):
            return v.astype(np_dtype(fmt))  # IEEE: overflow to Inf
    if fmt == "int8":
        with np.errstate(all="ignore"):
            return np.clip(np.rint(np.where(np.isnan(v), 0, v)), -128, 127).astype(np.int8)
    if fmt == "float8_e8m0fnu":
        return e8m0_up(v).view(np_dtype(fmt))
    m = FP8_MAX[fmt] if fmt in FP8_MAX else float(ml_dtypes.finfo(np_dtype(fmt)).max)
    with np.errstate(all="ignore"):
        clipped = np.where(np.isnan(v), v, np.clip(v, -m, m)).astype(np.float32)
        out = clipped.astype(np_dtype(fmt))
    if fmt == "float8_e4m3fn":  # canonical NaN of an operation: 0x7F
        out = np.where(np.isnan(v), np.array(0x7F, np.uint8).view(out.dtype), out)
    return out


def e8m0_up(v):
    """enc_e8m0_up: the smallest power of two >= v; v <= 2^-127 (or <= 0) -> 0x00; above 2^127 -> 0xFE;
    NaN -> 0xFF."""
    x = np.asarray(v, np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        m, e = np.frexp(np.where(np.isfinite(x) & (x > 0), x, 1.0))
    k = np.where(m == 0.5, e - 1, e)
    code = np.clip(k + 127, 0, 0xFE)
    code = np.where(x > 0, code, 0)
    code = np.where(np.isposinf(x), 0xFE, code)
    code = np.where(np.isnan(x), 0xFF, code)
    return code.astype(np.uint8)


# ------------------------------------------------------------------------------ rmsnorm_quant


def reduction_partials(h):
    p = 1 << max(int(h // 4).bit_length() - 1, 0) if h >= 4 else 1
    return int(min(max(p, 8), 4096))


def sum_squares(x):
    """Σ x² of each row of f32 x [rows, H] in the canonical order (numerics.md §2)."""
    rows, h = x.shape
    p = reduction_partials(h)
    steps = -(-h // p)
    padded = np.zeros((rows, steps * p), np.float32)
    padded[:, :h] = x
    part = np.zeros((rows, p), np.float32)
    with np.errstate(all="ignore"):
        for k in range(steps):
            sl = padded[:, k * p:(k + 1) * p]
            part = (part + sl * sl).astype(np.float32)
        while part.shape[1] > 1:
            part = (part[:, 0::2] + part[:, 1::2]).astype(np.float32)
    return part[:, 0]


def normalize(x, weight, residual=None, *, in_fmt="float32", norm="rms", eps=1e-6, weight_offset=0.0):
    """Steps 1 and 2 of numerics.md §3 for x [rows, H]: (y as float32, the new residual as in_fmt
    elements or None). Quant-only (norm="none"): y = x."""
    f32 = np.float32
    xf = np.asarray(x).astype(f32)
    h = xf.shape[1]
    new_res = None
    if residual is not None:
        with np.errstate(all="ignore"):
            new_res = enc((xf + np.asarray(residual).astype(f32)).astype(f32), in_fmt)
        xf = new_res.astype(f32)
    with np.errstate(all="ignore"):
        if norm == "rms":
            ss = sum_squares(xf)
            root = np.sqrt((ss / f32(h) + f32(eps)).astype(f32)).astype(f32)
            inv = np.where(np.isfinite(root), (f32(1) / root).astype(f32), f32(np.nan)).astype(f32)
            g = (np.asarray(weight).astype(f32) + f32(weight_offset)).astype(f32)
            y = ((xf * inv[:, None]).astype(f32) * g[None, :]).astype(f32)
        else:
            y = xf.copy()
    return y, new_res


def rmsnorm_quant(x, weight, residual=None, *, in_fmt="float32", dtype="float8_e4m3fn", scale_mode="row",
                  group_size=128, scale=None, scale_dtype="float32", norm="rms", eps=1e-6, weight_offset=0.0,
                  scale_ub=np.inf, min_scale=0.0, qmax=None):
    """numerics.md §3 for x [rows, H] (NumPy/ml_dtypes elements of in_fmt). Returns (q, scales,
    new residual): q as ml_dtypes/NumPy elements, scales [rows, units] as scale_dtype elements
    (None for a static scale)."""
    f32 = np.float32
    y, new_res = normalize(x, weight, residual, in_fmt=in_fmt, norm=norm, eps=eps, weight_offset=weight_offset)
    rows, h = y.shape
    default_qmax = FP8_MAX[dtype]
    qm = f32(default_qmax if qmax is None else qmax)
    if scale_mode == "static":
        with np.errstate(all="ignore"):
            r = np.full((rows, 1), f32(1) / f32(scale), f32)
        unit = h
        stored = None
    else:
        unit = h if scale_mode == "row" else group_size
        yu = y.reshape(rows, h // unit, unit)
        amax_bits = (yu.view(np.uint32) & 0x7FFFFFFF).max(axis=2)
        amax = amax_bits.astype(np.uint32).view(f32)
        nonfinite = amax_bits >= 0x7F800000
        with np.errstate(all="ignore"):
            a = np.minimum(amax, f32(scale_ub)).astype(f32)
            s32 = np.maximum((a / qm).astype(f32), f32(min_scale)).astype(f32)
            s32 = np.where(nonfinite, f32(np.nan), s32)
            stored = enc(s32, scale_dtype)
            if scale_dtype == "float8_e8m0fnu":
                stored = np.where(nonfinite, np.array(0xFF, np.uint8).view(stored.dtype), stored)
            dec = stored.astype(f32)
            r = (f32(1) / dec).astype(f32)
            r = np.where(np.isfinite(r) & (dec != 0) & ~nonfinite, r, f32(0)).astype(f32)
    r = np.repeat(r, unit, axis=1)
    with np.errstate(all="ignore"):
        v = (y * r.reshape(rows, h)).astype(f32)
        if qmax is not None:
            v = np.where(np.isnan(v), v, np.clip(v, -qm, qm)).astype(f32)
    return enc(v, dtype), stored, new_res


# ------------------------------------------------------------------------------ rmsnorm_fp4

FP4_BLOCK = {"nvfp4": 16, "mxfp4": 32}
FP4_SCALE_FORMAT = {"nvfp4": "float8_e4m3fn", "mxfp4": "float8_e8m0fnu"}


def e4m3fn_saturating(v):
    """enc_f8e4m3fn: ml_dtypes' f32 -> float8_e4m3fn cast does not saturate (it gives NaN, 0x7F,
    from 464 up and for Inf), so |v| is clamped to 448 first; NaN gives 0x7F."""
    v = np.asarray(v, np.float32)
    with np.errstate(all="ignore"):
        out = np.where(np.isnan(v), v, np.clip(v, -448.0, 448.0)).astype(np.float32).astype(np_dtype("float8_e4m3fn"))
    return np.where(np.isnan(v), np.uint8(0x7F), out.view(np.uint8)).view(np_dtype("float8_e4m3fn"))


def e2m1(v):
    """enc_f4e2m1 as ml_dtypes.float4_e2m1fn elements: ml_dtypes' cast saturates (beyond ±6, ±Inf:
    ±6) but sends NaN to -0 (0x8), where the spec says +0."""
    v = np.asarray(v, np.float32)
    with np.errstate(all="ignore"):
        out = v.astype(np_dtype("float4_e2m1fn")).view(np.uint8)
    return np.where(np.isnan(v), np.uint8(0), out).view(np_dtype("float4_e2m1fn"))


def e8m0_up_bits(v):
    """enc_e8m0_up (the smallest power of two >= v) on the f32 bits alone: a normal v = 1.m x 2^(e-127)
    rounds up to 2^(e-127) when m = 0, else to 2^(e-126): code e + (m != 0); a subnormal m x 2^-149
    rounds up to 2^(bit_length(m-1) - 149): code bit_length(m-1) - 22, at least 0 (2^-127).
    v <= 0 -> 0; above 2^127 (and +Inf) -> 0xFE; NaN -> 0xFF."""
    bits = np.asarray(v, np.float32).reshape(-1).view(np.uint32)
    out = np.empty(bits.shape, np.uint8)
    for i, b in enumerate(bits.tolist()):
        e, m = (b >> 23) & 0xFF, b & 0x7FFFFF
        if b >> 31 or b == 0:
            code = 0xFF if e == 0xFF and m else 0
        elif e == 0xFF:
            code = 0xFF if m else 0xFE
        elif e == 0:
            code = max((m - 1).bit_length() - 22, 0)
        else:
            code = min(e + (m != 0), 0xFE)
        out[i] = code
    return out.reshape(np.shape(v)).view(np_dtype("float8_e8m0fnu"))


def rmsnorm_fp4(x, weight, residual=None, *, in_fmt="float32", format="nvfp4", global_scale=None, norm="rms",
                eps=1e-6, weight_offset=0.0):
    """numerics.md §3b for x [rows, H]. Returns (q [rows, H] as ml_dtypes.float4_e2m1fn elements, one
    a byte; row-major scales [rows, H/block] as float8_e4m3fn / float8_e8m0fnu; the new residual)."""
    f32 = np.float32
    y, new_res = normalize(x, weight, residual, in_fmt=in_fmt, norm=norm, eps=eps, weight_offset=weight_offset)
    rows, h = y.shape
    block = FP4_BLOCK[format]
    amax_bits = (y.reshape(rows, h // block, block).view(np.uint32) & 0x7FFFFFFF).max(axis=2).astype(np.uint32)
    a = amax_bits.view(f32)
    nonfinite = amax_bits >= 0x7F800000
    with np.errstate(all="ignore"):
        if format == "nvfp4":
            gs = f32(1.0 if global_scale is None else global_scale)
            sf = e4m3fn_saturating(((gs * a).astype(f32) / f32(6)).astype(f32))
            sf = np.where(nonfinite, np.uint8(0x7F), sf.view(np.uint8)).view(sf.dtype)
            dec = sf.astype(f32)
            r = np.where(nonfinite | (dec == 0), f32(0), (gs / dec).astype(f32)).astype(f32)
        else:
            sf = e8m0_up_bits((a / f32(6)).astype(f32))
            sf = np.where(nonfinite, np.uint8(0xFF), sf.view(np.uint8)).view(sf.dtype)
            dec = sf.astype(f32)
            zero = (sf.view(np.uint8) == 0) & (a == 0)
            r = np.where(nonfinite | zero, f32(0), (f32(1) / dec).astype(f32)).astype(f32)
        v = (y * np.repeat(r, block, axis=1)).astype(f32)
    return e2m1(v), sf, new_res


def swizzle(scales):
    """Row-major scales [rows, blocks] in the 128x4 tiled layout (numerics.md §3b): a uint8 array
    [ceil(rows/128)*128, 4*kt], kt = ceil(blocks/4), padding 0."""
    b = codes(scales)
    rows, blocks = b.shape
    kt = -(-blocks // 4)
    out = np.zeros(-(-rows // 128) * 128 * 4 * kt, np.uint8)
    m, k = np.meshgrid(np.arange(rows), np.arange(blocks), indexing="ij")
    off = (m // 128) * kt * 512 + (k // 4) * 512 + (m % 32) * 16 + ((m % 128) // 32) * 4 + k % 4
    out[off] = b
    return out.reshape(-1, 4 * kt)


def dequantize_fp4(q, scales, *, format="nvfp4", global_scale=None, dtype="float32"):
    """rn_out((dec(q) x dec(sf)) / gs) for q [rows, H] (float4_e2m1fn elements, one a byte) and
    row-major scales [rows, H/block] (ml_dtypes elements)."""
    f32 = np.float32
    gs = f32(1.0 if global_scale is None else global_scale)
    s = np.repeat(np.asarray(scales).astype(f32), FP4_BLOCK[format], axis=1)
    with np.errstate(all="ignore"):
        v = ((np.asarray(q).astype(f32) * s).astype(f32) / gs).astype(f32)
    return enc(v, dtype)


# ------------------------------------------------------------------------------ frameworks


def make(fw, a):
    """A copy of NumPy array a (NumPy or ml_dtypes elements) in framework fw ("numpy" or "torch")."""
    a = np.ascontiguousarray(a)
    if fw == "numpy":
        return a.copy()
    import torch
    name = a.dtype.name
    if name in ("float32", "float16", "int8", "uint8"):
        return torch.from_numpy(a.copy())
    raw = torch.from_numpy(a.view(np.uint8 if a.dtype.itemsize == 1 else np.int16).copy())
    return raw.view(getattr(torch, name))


# ------------------------------------------------------------------------------ qk_rmsnorm (numerics.md §6)


def _inv_rms(ss, d, eps):
    """inv = 1 / sqrt(ss / d + eps) in f32; NaN where the root is not finite (numerics.md §3)."""
    f32 = np.float32
    with np.errstate(all="ignore"):
        root = np.sqrt((np.asarray(ss, f32) / f32(d) + f32(eps)).astype(f32)).astype(f32)
        return np.where(np.isfinite(root), (f32(1) / root).astype(f32), f32(np.nan)).astype(f32)


def _inv_of_mean(var, eps):
    f32 = np.float32
    with np.errstate(all="ignore"):
        root = np.sqrt((np.asarray(var, f32) + f32(eps)).astype(f32)).astype(f32)
        return np.where(np.isfinite(root), (f32(1) / root).astype(f32), f32(np.nan)).astype(f32)


def _qk_out(xf, inv, weight, weight_offset, out_fmt, scale):
    """rn_out((x * inv) * g') of x [rows, G] with inv [rows]; FP8 outputs: enc(y * (1 / s))."""
    f32 = np.float32
    g = (np.asarray(weight).astype(f32) + f32(weight_offset)).astype(f32)
    with np.errstate(all="ignore"):
        y = ((xf * inv[:, None]).astype(f32) * g[None, :]).astype(f32)
        if scale is not None:
            y = (y * (f32(1) / f32(scale)).astype(f32)).astype(f32)
    return enc(_canonical_nan(y), out_fmt)


def _canonical_nan(v):
    """NaN as the positive canonical f32 NaN 0x7FC00000 (whatever sign and payload it had)."""
    return np.where(np.isnan(v), np.uint32(0x7FC00000).view(np.float32), v).astype(np.float32)


def qk_stats(q, k):
    """stats [rows, 2]: the canonical sums of squares of q's and k's rows (f32)."""
    return _canonical_nan(np.stack([sum_squares(np.asarray(q).astype(np.float32)),
                                    sum_squares(np.asarray(k).astype(np.float32))], axis=-1))


def qk_rmsnorm(q, k, q_weight, k_weight, *, in_fmt="float32", head_dim=0, eps=1e-6, weight_offset=0.0, dtype=None,
               out_scales=None):
    """The fused QK-norm of q [rows, Nq], k [rows, Nk]: one RMS group per row (head_dim 0) or per
    head of head_dim elements. Returns (q_out, k_out) as in_fmt (or dtype: FP8) elements."""
    out_fmt = dtype or in_fmt
    res = []
    for side, (x, w) in enumerate(((q, q_weight), (k, k_weight))):
        xf = np.asarray(x).astype(np.float32)
        rows, n = xf.shape
        g = head_dim or n
        groups = xf.reshape(rows * (n // g), g)
        inv = _inv_rms(sum_squares(groups), g, eps)
        s = None if out_scales is None else out_scales[side]
        res.append(_qk_out(groups, inv, w, weight_offset, out_fmt, s).reshape(rows, n))
    return tuple(res)


def qk_rmsnorm_apply(q, k, stats, q_weight, k_weight, *, in_fmt="float32", stats_kind="sums", q_global_width=None,
                     k_global_width=None, eps=1e-6, weight_offset=0.0, dtype=None, out_scales=None):
    """Apply from stats [rows, 2] (sums over the global widths, or mean squares)."""
    out_fmt = dtype or in_fmt
    res = []
    for side, (x, w, width) in enumerate(((q, q_weight, q_global_width), (k, k_weight, k_global_width))):
        st = np.asarray(stats, np.float32)[:, side]
        inv = _inv_rms(st, width, eps) if stats_kind == "sums" else _inv_of_mean(st, eps)
        s = None if out_scales is None else out_scales[side]
        res.append(_qk_out(np.asarray(x).astype(np.float32), inv, w, weight_offset, out_fmt, s))
    return tuple(res)


# ------------------------------------------------------------------------------ mla_rope_rmsnorm_quant (numerics.md §5)


def rope(x, cs_rows, style="interleaved"):
    """Rotation of x [T, ..., R] (f32) with cos/sin rows cs_rows [T, R] (f32, interleaved):
    re' = re*c + (-(im*s)), im' = re*s + im*c, every product and sum rounded to f32."""
    f32 = np.float32
    r = x.shape[-1]
    c = cs_rows[:, 0::2].reshape((x.shape[0],) + (1,) * (x.ndim - 2) + (r // 2,))
    s = cs_rows[:, 1::2].reshape(c.shape)
    if style == "interleaved":
        re, im = x[..., 0::2], x[..., 1::2]
    else:
        re, im = x[..., :r // 2], x[..., r // 2:]
    with np.errstate(all="ignore"):
        re2 = ((re * c).astype(f32) + (-(im * s).astype(f32))).astype(f32)
        im2 = ((re * s).astype(f32) + (im * c).astype(f32)).astype(f32)
    out = np.empty_like(x)
    if style == "interleaved":
        out[..., 0::2], out[..., 1::2] = re2, im2
    else:
        out[..., :r // 2], out[..., r // 2:] = re2, im2
    return out


def mla_rope_rmsnorm_quant(q, kv, weight, cos_sin, page_table, cache, row_offsets, *, positions=None,
                           cache_len=None, in_fmt="float32", cache_fmt="bfloat16", rope_style="interleaved",
                           eps=1e-6, weight_offset=0.0, k_scale=None):
    """numerics.md §5: q [T, Hq, R], kv [T, L + R], cache [num_pages, page_size, L + R] (its old
    contents; a copy is returned with the T addressed slots written). Returns (q_out as in_fmt
    elements, new cache)."""
    f32 = np.float32
    t, _, r = q.shape
    big_l = kv.shape[1] - r
    ro = np.asarray(row_offsets, np.int64)
    seq = np.searchsorted(ro, np.arange(t), side="right") - 1
    if positions is not None:
        pos = np.asarray(positions, np.int64)
    else:
        pos = np.asarray(cache_len, np.int64)[seq] + np.arange(t) - ro[seq]
    cs = np.asarray(cos_sin).astype(f32)[pos]
    q_out = enc(rope(np.asarray(q).astype(f32), cs, rope_style), in_fmt)
    kvf = np.asarray(kv).astype(f32)
    latent = kvf[:, :big_l]
    inv = _inv_rms(sum_squares(latent), big_l, eps)
    g = (np.asarray(weight).astype(f32) + f32(weight_offset)).astype(f32)
    with np.errstate(all="ignore"):
        y = ((latent * inv[:, None]).astype(f32) * g[None, :]).astype(f32)
    row = np.concatenate([y, rope(kvf[:, big_l:], cs, rope_style)], axis=1)
    if k_scale is not None:
        with np.errstate(all="ignore"):
            row = (row / f32(k_scale)).astype(f32)
    codes_ = enc(row, cache_fmt)
    new = np.array(cache, copy=True)
    page_size = cache.shape[1]
    pt = np.asarray(page_table, np.int64)
    for i in range(t):
        new[pt[seq[i], pos[i] // page_size], pos[i] % page_size] = codes_[i]
    return q_out, new
