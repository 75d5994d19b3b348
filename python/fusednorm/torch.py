"""fusednorm's operations as PyTorch custom ops (torch.library), with fake (meta) implementations,
so that torch.compile(fullgraph=True) traces them and CUDA graphs capture them.

Importing this module registers (the package imports it on the first call with a torch tensor):
  torch.ops.fusednorm.cast(src, dtype, src_dtype, e8m0_rounding) -> Tensor
  torch.ops.fusednorm.cast_out(src, dst, src_dtype, dst_dtype, e8m0_rounding) -> ()      mutates dst
  torch.ops.fusednorm.rmsnorm_quant(x, weight, residual, scale, dtype, scale_mode, group_size,
      scale_dtype, scales_column_major, packed_scales, norm, eps, weight_offset, scale_ub,
      min_scale, qmax) -> (Tensor, Tensor)                                            mutates residual
  torch.ops.fusednorm.rmsnorm_quant_out(x, weight, residual, output, scales, dtype, scale_dtype,
      scale_mode, group_size, packed_scales, norm, eps, weight_offset, scale_ub, min_scale,
      qmax) -> ()                                                   mutates output, scales, residual
  torch.ops.fusednorm.rmsnorm_fp4(x, weight, residual, global_scale, format, scale_layout, norm, eps,
      weight_offset) -> (Tensor, Tensor)                                              mutates residual
  torch.ops.fusednorm.rmsnorm_fp4_out(x, weight, residual, global_scale, output, scales, format,
      scale_layout, norm, eps, weight_offset) -> ()                 mutates output, scales, residual
  torch.ops.fusednorm.dequantize_fp4(codes, scales, global_scale, format, scale_layout, dtype) -> Tensor
  torch.ops.fusednorm.dequantize_fp4_out(codes, scales, global_scale, output, format, scale_layout,
      dtype) -> ()                                                                     mutates output
  torch.ops.fusednorm.qk_rmsnorm_stats(q, k) -> Tensor;  qk_rmsnorm_stats_out(q, k, stats) -> ()  mutates stats
  torch.ops.fusednorm.qk_rmsnorm(q, k, q_weight, k_weight, out_scales, dtype, head_dim, eps,
      weight_offset) -> (Tensor, Tensor)
  torch.ops.fusednorm.qk_rmsnorm_out(q, k, q_weight, k_weight, q_out, k_out, out_scales, dtype,
      head_dim, eps, weight_offset) -> ()                                        mutates q_out, k_out
  torch.ops.fusednorm.qk_rmsnorm_(q, k, q_weight, k_weight, head_dim, eps, weight_offset) -> ()
                                                                                 mutates q, k (in place)
  torch.ops.fusednorm.qk_rmsnorm_apply / qk_rmsnorm_apply_out / qk_rmsnorm_apply_: the same, with
      stats after k and stats_kind, q_global_width, k_global_width before eps
  torch.ops.fusednorm.mla_rope_rmsnorm_quant(q, kv, weight, cos_sin, positions, row_offsets,
      cache_len, page_table, kv_cache, k_scale, invalid_tokens, cache_dtype, rope_style, eps,
      weight_offset) -> Tensor (q_out)                              mutates kv_cache, invalid_tokens
  torch.ops.fusednorm.mla_rope_rmsnorm_quant_out(q, q_out, kv, ...) -> ()
                                                           mutates q_out, kv_cache, invalid_tokens
  torch.ops.fusednorm.mla_rope_rmsnorm_quant_(q, kv, ...) -> ()  mutates q, kv_cache, invalid_tokens
Element types are names (str: "float8_e4m3fn", ...; float8_e4m3 has no torch dtype and travels as
uint8; FP4 codes are float4_e2m1fn_x2 [..., H/2], or uint8 as out=; float8_e8m0fnu tensors cross
the mutating ops as uint8 codes, see _codes_in). The functions cast(),
rmsnorm_quant(), rmsnorm_fp4() and dequantize_fp4() below take the package's keyword arguments and
call these ops; the package's functions of the same names call them too while torch.compile traces.
The ops run on PyTorch's current stream of the tensors' device.
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import _ops_cast, _ops_fp4, _ops_mla, _ops_qk, _ops_quant
from ._formats import format_of
from ._frameworks import TorchAdapter

_T = TorchAdapter()
_NO_SCALES = (0,)  # the second output where no scales are written (static scale, packed scales)


def _name(dtype):
    return None if dtype is None else format_of(dtype).name


# float8_e8m0fnu tensors cross the boundary of the mutating ops as uint8 codes: PyTorch's inductor
# (2.15) cannot decompose a mutating custom op (auto_functionalized_v2) that has a float8_e8m0fnu
# tensor among its arguments or outputs ("auto_functionalized_v2 was not removed"). The op is told
# the format by name (rmsnorm_quant's scale_dtype, cast_out's src_dtype and dst_dtype; the fp4 ops
# by format=), and the wrappers below view what it returns back as float8_e8m0fnu.
_E8M0 = "float8_e8m0fnu"


def _codes_in(t: Optional[Tensor], name: Optional[str]) -> Tuple[Optional[Tensor], Optional[str]]:
    """(t, name) as an op takes them: an e8m0 tensor as its uint8 codes, named. A tensor of another
    format than `name` passes unchanged, for the package to report."""
    if t is not None and t.dtype == torch.float8_e8m0fnu and name in (None, _E8M0):
        return t.view(torch.uint8), _E8M0
    return t, name


def _codes_out(t: Tensor, name: Optional[str]) -> Tensor:
    """An op's output as the wrappers return it: e8m0 codes viewed as float8_e8m0fnu."""
    return t.view(torch.float8_e8m0fnu) if name == _E8M0 else t


def _empty(like: Tensor, shape, f, column_major: bool = False) -> Tensor:
    """A new output of format f for a mutating op (and its fake): e8m0 as uint8 codes."""
    t = _T.empty(like, shape, f, column_major)
    return t.view(torch.uint8) if f.name == _E8M0 else t


# ------------------------------------------------------------------------------ cast


def _cast_alloc(src: Tensor, dtype: str, src_dtype: Optional[str]) -> Tensor:
    sfmt = format_of(src_dtype) if src_dtype is not None else _T.format(src)
    return _T.empty(src, _ops_cast.cast_shapes(_T.logical_shape(src, sfmt)), format_of(dtype))


@torch.library.custom_op("fusednorm::cast", mutates_args=())
def _cast_op(src: Tensor, dtype: str, src_dtype: Optional[str], e8m0_rounding: Optional[str]) -> Tensor:
    out = _cast_alloc(src, dtype, src_dtype)
    _ops_cast.cast_into(src, out, src_dtype, dtype, e8m0_rounding)
    return out


@_cast_op.register_fake
def _(src, dtype, src_dtype, e8m0_rounding):
    return _cast_alloc(src, dtype, src_dtype)


@torch.library.custom_op("fusednorm::cast_out", mutates_args=("dst",))
def _cast_out_op(src: Tensor, dst: Tensor, src_dtype: Optional[str], dst_dtype: Optional[str],
                 e8m0_rounding: Optional[str]) -> None:
    _ops_cast.cast_into(src, dst, src_dtype, dst_dtype, e8m0_rounding)


@_cast_out_op.register_fake
def _(src, dst, src_dtype, dst_dtype, e8m0_rounding):
    return None


def cast(src: Tensor, dtype=None, *, out: Optional[Tensor] = None, src_dtype=None, e8m0_rounding=None):
    """fusednorm.cast through torch.ops.fusednorm (traceable by torch.compile)."""
    if out is None:
        return torch.ops.fusednorm.cast(src, _name(dtype), _name(src_dtype), e8m0_rounding)
    s, sname = _codes_in(src, _name(src_dtype))
    d, dname = _codes_in(out, _name(dtype))
    torch.ops.fusednorm.cast_out(s, d, sname, dname, e8m0_rounding)
    return out


# ------------------------------------------------------------------------------ rmsnorm_quant


def _rmsnorm_quant_alloc(x: Tensor, dtype: str, scale_mode: str, group_size: Optional[int], scale_dtype: str,
                         scales_column_major: bool, packed_scales: bool) -> Tuple[Tensor, Tensor]:
    qshape, sshape = _ops_quant.rmsnorm_quant_shapes(_T.logical_shape(x, None), scale_mode, group_size, packed_scales)
    q = _T.empty(x, qshape, format_of(dtype))
    s = _empty(x, sshape if sshape is not None else _NO_SCALES, format_of(scale_dtype),
               scales_column_major and sshape is not None)
    return q, s


@torch.library.custom_op("fusednorm::rmsnorm_quant", mutates_args=("residual",))
def _rmsnorm_quant_op(x: Tensor, weight: Optional[Tensor], residual: Optional[Tensor], scale: Optional[Tensor],
                      dtype: str, scale_mode: str, group_size: Optional[int], scale_dtype: str,
                      scales_column_major: bool, packed_scales: bool, norm: str, eps: Optional[float],
                      weight_offset: Optional[float], scale_ub: Optional[float], min_scale: Optional[float],
                      qmax: Optional[float]) -> Tuple[Tensor, Tensor]:
    q, s = _rmsnorm_quant_alloc(x, dtype, scale_mode, group_size, scale_dtype, scales_column_major, packed_scales)
    scales = scale if scale_mode == "static" else (None if packed_scales else s)
    _ops_quant.rmsnorm_quant_into(x, weight, q, scales, residual=residual, dtype=dtype,
                                  scale_dtype=None if scale_mode == "static" else scale_dtype, scale_mode=scale_mode,
                                  group_size=group_size, packed_scales=packed_scales, norm=norm, eps=eps,
                                  weight_offset=weight_offset, scale_ub=scale_ub, min_scale=min_scale, qmax=qmax)
    return q, s


@_rmsnorm_quant_op.register_fake
def _(x, weight, residual, scale, dtype, scale_mode, group_size, scale_dtype, scales_column_major, packed_scales,
      norm, eps, weight_offset, scale_ub, min_scale, qmax):
    return _rmsnorm_quant_alloc(x, dtype, scale_mode, group_size, scale_dtype, scales_column_major, packed_scales)


@torch.library.custom_op("fusednorm::rmsnorm_quant_out", mutates_args=("output", "scales", "residual"))
def _rmsnorm_quant_out_op(x: Tensor, weight: Optional[Tensor], residual: Optional[Tensor], output: Tensor,
                          scales: Optional[Tensor], dtype: Optional[str], scale_dtype: Optional[str],
                          scale_mode: str, group_size: Optional[int], packed_scales: bool, norm: str,
                          eps: Optional[float], weight_offset: Optional[float], scale_ub: Optional[float],
                          min_scale: Optional[float], qmax: Optional[float]) -> None:
    _ops_quant.rmsnorm_quant_into(x, weight, output, scales, residual=residual, dtype=dtype, scale_dtype=scale_dtype,
                                  scale_mode=scale_mode, group_size=group_size, packed_scales=packed_scales, norm=norm,
                                  eps=eps, weight_offset=weight_offset, scale_ub=scale_ub, min_scale=min_scale,
                                  qmax=qmax)


@_rmsnorm_quant_out_op.register_fake
def _(x, weight, residual, output, scales, dtype, scale_dtype, scale_mode, group_size, packed_scales, norm, eps,
      weight_offset, scale_ub, min_scale, qmax):
    return None


def rmsnorm_quant(x: Tensor, weight: Optional[Tensor] = None, *, dtype=None, scale_mode="row", group_size=None,
                  scale=None, scale_dtype=None, scales_column_major=False, packed_scales=False, residual=None,
                  norm="rms", eps=None, weight_offset=None, scale_ub=None, min_scale=None, qmax=None, out=None):
    """fusednorm.rmsnorm_quant through torch.ops.fusednorm (traceable by torch.compile); the same
    arguments and results."""
    static = scale_mode == "static"
    if static:
        if scale is None:
            raise TypeError("fusednorm.rmsnorm_quant: scale_mode='static' needs scale=")
        if not isinstance(scale, Tensor):
            scale = torch.full((1,), float(scale), dtype=torch.float32, device=x.device)
    if out is None:
        sname = _name(scale_dtype or "float32")
        q, s = torch.ops.fusednorm.rmsnorm_quant(
            x, weight, residual, scale if static else None, _name(dtype or "float8_e4m3fn"), scale_mode, group_size,
            sname, scales_column_major, packed_scales, norm, eps, weight_offset, scale_ub, min_scale, qmax)
        return q, (scale if static else None if packed_scales else _codes_out(s, sname))
    q, s = (out[0], out[1]) if isinstance(out, (tuple, list)) else (out, None)
    if static:
        s = scale
    codes, sname = _codes_in(s, _name(scale_dtype))
    torch.ops.fusednorm.rmsnorm_quant_out(x, weight, residual, q, codes, _name(dtype), sname, scale_mode, group_size,
                                          packed_scales, norm, eps, weight_offset, scale_ub, min_scale, qmax)
    return q, s


# ------------------------------------------------------------------------------ rmsnorm_fp4, dequantize_fp4

_F4 = format_of("float4_e2m1fn")


def _global_scale(global_scale, x: Tensor) -> Optional[Tensor]:
    if global_scale is None or isinstance(global_scale, Tensor):
        return global_scale
    return torch.full((1,), float(global_scale), dtype=torch.float32, device=x.device)


# MXFP4's float8_e8m0fnu scales cross the ops as uint8 codes (_codes_in); NVFP4's float8_e4m3fn
# scales pass as they are.
def _scales_in(s: Optional[Tensor], format: str) -> Optional[Tensor]:
    return _codes_in(s, _ops_fp4._fp4_scale_fmt(format).name)[0]


def _scales_out(s: Tensor, format: str) -> Tensor:
    return _codes_out(s, _ops_fp4._fp4_scale_fmt(format).name)


def _rmsnorm_fp4_alloc(x: Tensor, format: str, scale_layout: str) -> Tuple[Tensor, Tensor]:
    qshape, sshape = _ops_fp4.rmsnorm_fp4_shapes(_T.logical_shape(x, None), format, scale_layout)
    return _T.empty(x, qshape, _F4), _empty(x, sshape, _ops_fp4._fp4_scale_fmt(format))


@torch.library.custom_op("fusednorm::rmsnorm_fp4", mutates_args=("residual",))
def _rmsnorm_fp4_op(x: Tensor, weight: Optional[Tensor], residual: Optional[Tensor], global_scale: Optional[Tensor],
                    format: str, scale_layout: str, norm: str, eps: Optional[float],
                    weight_offset: Optional[float]) -> Tuple[Tensor, Tensor]:
    q, s = _rmsnorm_fp4_alloc(x, format, scale_layout)
    _ops_fp4.rmsnorm_fp4_into(x, weight, q, s, global_scale=global_scale, residual=residual, format=format,
                              scale_layout=scale_layout, norm=norm, eps=eps, weight_offset=weight_offset)
    return q, s


@_rmsnorm_fp4_op.register_fake
def _(x, weight, residual, global_scale, format, scale_layout, norm, eps, weight_offset):
    return _rmsnorm_fp4_alloc(x, format, scale_layout)


@torch.library.custom_op("fusednorm::rmsnorm_fp4_out", mutates_args=("output", "scales", "residual"))
def _rmsnorm_fp4_out_op(x: Tensor, weight: Optional[Tensor], residual: Optional[Tensor],
                        global_scale: Optional[Tensor], output: Tensor, scales: Tensor, format: str,
                        scale_layout: str, norm: str, eps: Optional[float], weight_offset: Optional[float]) -> None:
    _ops_fp4.rmsnorm_fp4_into(x, weight, output, scales, global_scale=global_scale, residual=residual, format=format,
                              scale_layout=scale_layout, norm=norm, eps=eps, weight_offset=weight_offset)


@_rmsnorm_fp4_out_op.register_fake
def _(x, weight, residual, global_scale, output, scales, format, scale_layout, norm, eps, weight_offset):
    return None


def rmsnorm_fp4(x: Tensor, weight: Optional[Tensor] = None, *, format="nvfp4", scale_layout="row_major",
                global_scale=None, residual=None, norm="rms", eps=None, weight_offset=None, out=None):
    """fusednorm.rmsnorm_fp4 through torch.ops.fusednorm (traceable by torch.compile); the same
    arguments and results."""
    gs = _global_scale(global_scale, x)
    if out is None:
        q, s = torch.ops.fusednorm.rmsnorm_fp4(x, weight, residual, gs, format, scale_layout, norm, eps,
                                               weight_offset)
        return q, _scales_out(s, format)
    q, s = out
    torch.ops.fusednorm.rmsnorm_fp4_out(x, weight, residual, gs, q, _scales_in(s, format), format, scale_layout, norm,
                                        eps, weight_offset)
    return q, s


def _dequantize_fp4_alloc(codes: Tensor, dtype: str) -> Tensor:
    return _T.empty(codes, _ops_fp4.dequantize_fp4_shapes(_T.logical_shape(codes, _F4)), format_of(dtype))


@torch.library.custom_op("fusednorm::dequantize_fp4", mutates_args=())
def _dequantize_fp4_op(codes: Tensor, scales: Tensor, global_scale: Optional[Tensor], format: str,
                       scale_layout: str, dtype: str) -> Tensor:
    out = _dequantize_fp4_alloc(codes, dtype)
    _ops_fp4.dequantize_fp4_into(codes, scales, out, global_scale=global_scale, format=format,
                                 scale_layout=scale_layout, dtype=dtype)
    return out


@_dequantize_fp4_op.register_fake
def _(codes, scales, global_scale, format, scale_layout, dtype):
    return _dequantize_fp4_alloc(codes, dtype)


@torch.library.custom_op("fusednorm::dequantize_fp4_out", mutates_args=("output",))
def _dequantize_fp4_out_op(codes: Tensor, scales: Tensor, global_scale: Optional[Tensor], output: Tensor,
                           format: str, scale_layout: str, dtype: Optional[str]) -> None:
    _ops_fp4.dequantize_fp4_into(codes, scales, output, global_scale=global_scale, format=format,
                                 scale_layout=scale_layout, dtype=dtype)


@_dequantize_fp4_out_op.register_fake
def _(codes, scales, global_scale, output, format, scale_layout, dtype):
    return None


def dequantize_fp4(codes: Tensor, scales: Tensor, *, global_scale=None, format="nvfp4", scale_layout="row_major",
                   dtype=None, out: Optional[Tensor] = None):
    """fusednorm.dequantize_fp4 through torch.ops.fusednorm (traceable by torch.compile)."""
    gs = _global_scale(global_scale, codes)
    if out is None:
        return torch.ops.fusednorm.dequantize_fp4(codes, _scales_in(scales, format), gs, format, scale_layout,
                                                  _name(dtype or "float32"))
    torch.ops.fusednorm.dequantize_fp4_out(codes, _scales_in(scales, format), gs, out, format, scale_layout,
                                           _name(dtype))
    return out


# ------------------------------------------------------------------------------ qk_rmsnorm (stats, apply, fused)


def _qk_stats_alloc(q: Tensor) -> Tensor:
    return _T.empty(q, _ops_qk.qk_rmsnorm_stats_shapes(_T.logical_shape(q, None)), format_of("float32"))


@torch.library.custom_op("fusednorm::qk_rmsnorm_stats", mutates_args=())
def _qk_rmsnorm_stats_op(q: Tensor, k: Tensor) -> Tensor:
    stats = _qk_stats_alloc(q)
    _ops_qk.qk_rmsnorm_stats_into(q, k, stats)
    return stats


@_qk_rmsnorm_stats_op.register_fake
def _(q, k):
    return _qk_stats_alloc(q)


@torch.library.custom_op("fusednorm::qk_rmsnorm_stats_out", mutates_args=("stats",))
def _qk_rmsnorm_stats_out_op(q: Tensor, k: Tensor, stats: Tensor) -> None:
    _ops_qk.qk_rmsnorm_stats_into(q, k, stats)


@_qk_rmsnorm_stats_out_op.register_fake
def _(q, k, stats):
    return None


def qk_rmsnorm_stats(q: Tensor, k: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """fusednorm.qk_rmsnorm_stats through torch.ops.fusednorm (traceable by torch.compile)."""
    if out is None:
        return torch.ops.fusednorm.qk_rmsnorm_stats(q, k)
    torch.ops.fusednorm.qk_rmsnorm_stats_out(q, k, out)
    return out


def _qk_alloc(q: Tensor, k: Tensor, dtype: Optional[str]) -> Tuple[Tensor, Tensor]:
    qs, ks = _ops_qk.qk_rmsnorm_shapes(_T.logical_shape(q, None), _T.logical_shape(k, None))
    f = format_of(dtype) if dtype is not None else _T.format(q)
    return _T.empty(q, qs, f), _T.empty(k, ks, f)


def _out_scales(out_scales, q: Tensor) -> Optional[Tensor]:
    if out_scales is None or isinstance(out_scales, Tensor):
        return out_scales
    return torch.tensor([float(v) for v in out_scales], dtype=torch.float32, device=q.device)


def _in_place(out, q: Tensor, k: Tensor) -> bool:
    """out= is (q, k) themselves: the in-place op (one tensor both read and written)."""
    return out[0] is q and out[1] is k


@torch.library.custom_op("fusednorm::qk_rmsnorm", mutates_args=())
def _qk_rmsnorm_op(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, out_scales: Optional[Tensor],
                   dtype: Optional[str], head_dim: Optional[int], eps: Optional[float],
                   weight_offset: Optional[float]) -> Tuple[Tensor, Tensor]:
    qo, ko = _qk_alloc(q, k, dtype)
    _ops_qk.qk_rmsnorm_into(q, k, q_weight, k_weight, qo, ko, out_scales=out_scales, dtype=dtype, head_dim=head_dim,
                            eps=eps, weight_offset=weight_offset)
    return qo, ko


@_qk_rmsnorm_op.register_fake
def _(q, k, q_weight, k_weight, out_scales, dtype, head_dim, eps, weight_offset):
    return _qk_alloc(q, k, dtype)


@torch.library.custom_op("fusednorm::qk_rmsnorm_out", mutates_args=("q_out", "k_out"))
def _qk_rmsnorm_out_op(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, q_out: Tensor, k_out: Tensor,
                       out_scales: Optional[Tensor], dtype: Optional[str], head_dim: Optional[int],
                       eps: Optional[float], weight_offset: Optional[float]) -> None:
    _ops_qk.qk_rmsnorm_into(q, k, q_weight, k_weight, q_out, k_out, out_scales=out_scales, dtype=dtype,
                            head_dim=head_dim, eps=eps, weight_offset=weight_offset)


@_qk_rmsnorm_out_op.register_fake
def _(q, k, q_weight, k_weight, q_out, k_out, out_scales, dtype, head_dim, eps, weight_offset):
    return None


@torch.library.custom_op("fusednorm::qk_rmsnorm_", mutates_args=("q", "k"))
def _qk_rmsnorm_inplace_op(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, head_dim: Optional[int],
                           eps: Optional[float], weight_offset: Optional[float]) -> None:
    _ops_qk.qk_rmsnorm_into(q, k, q_weight, k_weight, q, k, head_dim=head_dim, eps=eps, weight_offset=weight_offset)


@_qk_rmsnorm_inplace_op.register_fake
def _(q, k, q_weight, k_weight, head_dim, eps, weight_offset):
    return None


def qk_rmsnorm(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, *, head_dim=None, eps=None,
               weight_offset=None, dtype=None, out_scales=None, out=None):
    """fusednorm.qk_rmsnorm through torch.ops.fusednorm (traceable by torch.compile); the same
    arguments and results. out=(q, k) runs torch.ops.fusednorm.qk_rmsnorm_ (in place)."""
    sc = _out_scales(out_scales, q)
    if out is None:
        return torch.ops.fusednorm.qk_rmsnorm(q, k, q_weight, k_weight, sc, _name(dtype), head_dim, eps, weight_offset)
    qo, ko = out
    if _in_place(out, q, k) and sc is None and dtype is None:
        torch.ops.fusednorm.qk_rmsnorm_(q, k, q_weight, k_weight, head_dim, eps, weight_offset)
    else:
        torch.ops.fusednorm.qk_rmsnorm_out(q, k, q_weight, k_weight, qo, ko, sc, _name(dtype), head_dim, eps,
                                           weight_offset)
    return qo, ko


@torch.library.custom_op("fusednorm::qk_rmsnorm_apply", mutates_args=())
def _qk_rmsnorm_apply_op(q: Tensor, k: Tensor, stats: Tensor, q_weight: Tensor, k_weight: Tensor,
                         out_scales: Optional[Tensor], dtype: Optional[str], stats_kind: str,
                         q_global_width: Optional[int], k_global_width: Optional[int], eps: Optional[float],
                         weight_offset: Optional[float]) -> Tuple[Tensor, Tensor]:
    qo, ko = _qk_alloc(q, k, dtype)
    _ops_qk.qk_rmsnorm_apply_into(q, k, stats, q_weight, k_weight, qo, ko, out_scales=out_scales, dtype=dtype,
                                  stats_kind=stats_kind, q_global_width=q_global_width, k_global_width=k_global_width,
                                  eps=eps, weight_offset=weight_offset)
    return qo, ko


@_qk_rmsnorm_apply_op.register_fake
def _(q, k, stats, q_weight, k_weight, out_scales, dtype, stats_kind, q_global_width, k_global_width, eps,
      weight_offset):
    return _qk_alloc(q, k, dtype)


@torch.library.custom_op("fusednorm::qk_rmsnorm_apply_out", mutates_args=("q_out", "k_out"))
def _qk_rmsnorm_apply_out_op(q: Tensor, k: Tensor, stats: Tensor, q_weight: Tensor, k_weight: Tensor, q_out: Tensor,
                             k_out: Tensor, out_scales: Optional[Tensor], dtype: Optional[str], stats_kind: str,
                             q_global_width: Optional[int], k_global_width: Optional[int], eps: Optional[float],
                             weight_offset: Optional[float]) -> None:
    _ops_qk.qk_rmsnorm_apply_into(q, k, stats, q_weight, k_weight, q_out, k_out, out_scales=out_scales, dtype=dtype,
                                  stats_kind=stats_kind, q_global_width=q_global_width, k_global_width=k_global_width,
                                  eps=eps, weight_offset=weight_offset)


@_qk_rmsnorm_apply_out_op.register_fake
def _(q, k, stats, q_weight, k_weight, q_out, k_out, out_scales, dtype, stats_kind, q_global_width, k_global_width,
      eps, weight_offset):
    return None


@torch.library.custom_op("fusednorm::qk_rmsnorm_apply_", mutates_args=("q", "k"))
def _qk_rmsnorm_apply_inplace_op(q: Tensor, k: Tensor, stats: Tensor, q_weight: Tensor, k_weight: Tensor,
                                 stats_kind: str, q_global_width: Optional[int], k_global_width: Optional[int],
                                 eps: Optional[float], weight_offset: Optional[float]) -> None:
    _ops_qk.qk_rmsnorm_apply_into(q, k, stats, q_weight, k_weight, q, k, stats_kind=stats_kind,
                                  q_global_width=q_global_width, k_global_width=k_global_width, eps=eps,
                                  weight_offset=weight_offset)


@_qk_rmsnorm_apply_inplace_op.register_fake
def _(q, k, stats, q_weight, k_weight, stats_kind, q_global_width, k_global_width, eps, weight_offset):
    return None


def qk_rmsnorm_apply(q: Tensor, k: Tensor, stats: Tensor, q_weight: Tensor, k_weight: Tensor, *,
                     q_global_width=None, k_global_width=None, stats_kind="sums", eps=None, weight_offset=None,
                     dtype=None, out_scales=None, out=None):
    """fusednorm.qk_rmsnorm_apply through torch.ops.fusednorm (traceable by torch.compile); the
    same arguments and results. out=(q, k) runs torch.ops.fusednorm.qk_rmsnorm_apply_ (in place)."""
    sc = _out_scales(out_scales, q)
    if out is None:
        return torch.ops.fusednorm.qk_rmsnorm_apply(q, k, stats, q_weight, k_weight, sc, _name(dtype), stats_kind,
                                                    q_global_width, k_global_width, eps, weight_offset)
    qo, ko = out
    if _in_place(out, q, k) and sc is None and dtype is None:
        torch.ops.fusednorm.qk_rmsnorm_apply_(q, k, stats, q_weight, k_weight, stats_kind, q_global_width,
                                              k_global_width, eps, weight_offset)
    else:
        torch.ops.fusednorm.qk_rmsnorm_apply_out(q, k, stats, q_weight, k_weight, qo, ko, sc, _name(dtype), stats_kind,
                                                 q_global_width, k_global_width, eps, weight_offset)
    return qo, ko


# ------------------------------------------------------------------------------ mla_rope_rmsnorm_quant


def _mla_into(q, q_out, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table, kv_cache, k_scale,
              invalid_tokens, cache_dtype, rope_style, eps, weight_offset):
    """The ops' arguments, in their schema's order, to mla_rope_rmsnorm_quant_into (q_out None: in place)."""
    _ops_mla.mla_rope_rmsnorm_quant_into(q, q_out, kv, weight, cos_sin, page_table, kv_cache, positions=positions,
                                         row_offsets=row_offsets, cache_len=cache_len, k_scale=k_scale,
                                         invalid_tokens=invalid_tokens, cache_dtype=cache_dtype, rope_style=rope_style,
                                         eps=eps, weight_offset=weight_offset)


def _mla_alloc(q: Tensor) -> Tensor:
    return _T.empty(q, _ops_mla.mla_rope_rmsnorm_quant_shapes(_T.logical_shape(q, None)), _T.format(q))


@torch.library.custom_op("fusednorm::mla_rope_rmsnorm_quant", mutates_args=("kv_cache", "invalid_tokens"))
def _mla_op(q: Tensor, kv: Tensor, weight: Tensor, cos_sin: Tensor, positions: Optional[Tensor],
            row_offsets: Tensor, cache_len: Optional[Tensor], page_table: Tensor, kv_cache: Tensor,
            k_scale: Optional[Tensor], invalid_tokens: Optional[Tensor], cache_dtype: Optional[str], rope_style: str,
            eps: Optional[float], weight_offset: Optional[float]) -> Tensor:
    q_out = _mla_alloc(q)
    _mla_into(q, q_out, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table, kv_cache, k_scale,
              invalid_tokens, cache_dtype, rope_style, eps, weight_offset)
    return q_out


@_mla_op.register_fake
def _(q, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table, kv_cache, k_scale, invalid_tokens,
      cache_dtype, rope_style, eps, weight_offset):
    return _mla_alloc(q)


@torch.library.custom_op("fusednorm::mla_rope_rmsnorm_quant_out",
                         mutates_args=("q_out", "kv_cache", "invalid_tokens"))
def _mla_out_op(q: Tensor, q_out: Tensor, kv: Tensor, weight: Tensor, cos_sin: Tensor, positions: Optional[Tensor],
                row_offsets: Tensor, cache_len: Optional[Tensor], page_table: Tensor, kv_cache: Tensor,
                k_scale: Optional[Tensor], invalid_tokens: Optional[Tensor], cache_dtype: Optional[str],
                rope_style: str, eps: Optional[float], weight_offset: Optional[float]) -> None:
    _mla_into(q, q_out, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table, kv_cache, k_scale,
              invalid_tokens, cache_dtype, rope_style, eps, weight_offset)


@_mla_out_op.register_fake
def _(q, q_out, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table, kv_cache, k_scale,
      invalid_tokens, cache_dtype, rope_style, eps, weight_offset):
    return None


@torch.library.custom_op("fusednorm::mla_rope_rmsnorm_quant_", mutates_args=("q", "kv_cache", "invalid_tokens"))
def _mla_inplace_op(q: Tensor, kv: Tensor, weight: Tensor, cos_sin: Tensor, positions: Optional[Tensor],
                    row_offsets: Tensor, cache_len: Optional[Tensor], page_table: Tensor, kv_cache: Tensor,
                    k_scale: Optional[Tensor], invalid_tokens: Optional[Tensor], cache_dtype: Optional[str],
                    rope_style: str, eps: Optional[float], weight_offset: Optional[float]) -> None:
    _mla_into(q, None, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table, kv_cache, k_scale,
              invalid_tokens, cache_dtype, rope_style, eps, weight_offset)


@_mla_inplace_op.register_fake
def _(q, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table, kv_cache, k_scale, invalid_tokens,
      cache_dtype, rope_style, eps, weight_offset):
    return None


def mla_rope_rmsnorm_quant(q: Tensor, kv: Tensor, weight: Tensor, cos_sin: Tensor, page_table: Tensor,
                           kv_cache: Tensor, *, row_offsets=None, positions=None, cache_len=None, k_scale=None,
                           invalid_tokens=None, cache_dtype=None, rope_style="interleaved", eps=None,
                           weight_offset=None, inplace=False, out=None):
    """fusednorm.mla_rope_rmsnorm_quant through torch.ops.fusednorm (traceable by torch.compile);
    the same arguments and results (the cache, and invalid_tokens, are written in place)."""
    if k_scale is not None and not isinstance(k_scale, Tensor):
        k_scale = torch.full((1,), float(k_scale), dtype=torch.float32, device=kv.device)
    rest = (positions, row_offsets, cache_len, page_table, kv_cache, k_scale, invalid_tokens, _name(cache_dtype),
            rope_style, eps, weight_offset)
    if inplace:
        if out is not None:
            raise TypeError("fusednorm.mla_rope_rmsnorm_quant: inplace=True and out= exclude each other")
        torch.ops.fusednorm.mla_rope_rmsnorm_quant_(q, kv, weight, cos_sin, *rest)
        return q
    if out is None:
        return torch.ops.fusednorm.mla_rope_rmsnorm_quant(q, kv, weight, cos_sin, *rest)
    torch.ops.fusednorm.mla_rope_rmsnorm_quant_out(q, out, kv, weight, cos_sin, *rest)
    return out


__all__: List[str] = ["cast", "dequantize_fp4", "mla_rope_rmsnorm_quant", "qk_rmsnorm", "qk_rmsnorm_apply",
                    "qk_rmsnorm_stats", "rmsnorm_fp4", "rmsnorm_quant"]
