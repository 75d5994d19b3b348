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
Element types are names (str: "float8_e4m3fn", ...; float8_e4m3 has no torch dtype and travels as
uint8). The functions cast() and rmsnorm_quant() below take the package's keyword arguments and
call these ops; fusednorm.cast / fusednorm.rmsnorm_quant call them too while torch.compile traces.
The ops run on PyTorch's current stream of the tensors' device.
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import _ops
from ._formats import format_of
from ._frameworks import TorchAdapter

_T = TorchAdapter()
_NO_SCALES = (0,)  # the second output where no scales are written (static scale, packed scales)


def _name(dtype):
    return None if dtype is None else format_of(dtype).name


# ------------------------------------------------------------------------------ cast


def _cast_alloc(src: Tensor, dtype: str, src_dtype: Optional[str]) -> Tensor:
    sfmt = format_of(src_dtype) if src_dtype is not None else _T.format(src)
    return _T.empty(src, _ops.cast_shapes(_T.logical_shape(src, sfmt)), format_of(dtype))


@torch.library.custom_op("fusednorm::cast", mutates_args=())
def _cast_op(src: Tensor, dtype: str, src_dtype: Optional[str], e8m0_rounding: Optional[str]) -> Tensor:
    out = _cast_alloc(src, dtype, src_dtype)
    _ops.cast_into(src, out, src_dtype, dtype, e8m0_rounding)
    return out


@_cast_op.register_fake
def _(src, dtype, src_dtype, e8m0_rounding):
    return _cast_alloc(src, dtype, src_dtype)


@torch.library.custom_op("fusednorm::cast_out", mutates_args=("dst",))
def _cast_out_op(src: Tensor, dst: Tensor, src_dtype: Optional[str], dst_dtype: Optional[str],
                 e8m0_rounding: Optional[str]) -> None:
    _ops.cast_into(src, dst, src_dtype, dst_dtype, e8m0_rounding)


@_cast_out_op.register_fake
def _(src, dst, src_dtype, dst_dtype, e8m0_rounding):
    return None


def cast(src: Tensor, dtype=None, *, out: Optional[Tensor] = None, src_dtype=None, e8m0_rounding=None):
    """fusednorm.cast through torch.ops.fusednorm (traceable by torch.compile)."""
    if out is None:
        return torch.ops.fusednorm.cast(src, _name(dtype), _name(src_dtype), e8m0_rounding)
    torch.ops.fusednorm.cast_out(src, out, _name(src_dtype), _name(dtype), e8m0_rounding)
    return out


# ------------------------------------------------------------------------------ rmsnorm_quant


def _rmsnorm_quant_alloc(x: Tensor, dtype: str, scale_mode: str, group_size: Optional[int], scale_dtype: str,
                         scales_column_major: bool, packed_scales: bool) -> Tuple[Tensor, Tensor]:
    qshape, sshape = _ops.rmsnorm_quant_shapes(_T.logical_shape(x, None), scale_mode, group_size, packed_scales)
    q = _T.empty(x, qshape, format_of(dtype))
    s = _T.empty(x, sshape if sshape is not None else _NO_SCALES, format_of(scale_dtype),
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
    _ops.rmsnorm_quant_into(x, weight, q, scales,
                            residual=residual, dtype=dtype, scale_dtype=None if scale_mode == "static" else scale_dtype,
                            scale_mode=scale_mode, group_size=group_size, packed_scales=packed_scales, norm=norm,
                            eps=eps, weight_offset=weight_offset, scale_ub=scale_ub, min_scale=min_scale, qmax=qmax)
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
    _ops.rmsnorm_quant_into(x, weight, output, scales, residual=residual, dtype=dtype, scale_dtype=scale_dtype,
                            scale_mode=scale_mode, group_size=group_size, packed_scales=packed_scales, norm=norm,
                            eps=eps, weight_offset=weight_offset, scale_ub=scale_ub, min_scale=min_scale, qmax=qmax)


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
        q, s = torch.ops.fusednorm.rmsnorm_quant(
            x, weight, residual, scale if static else None, _name(dtype or "float8_e4m3fn"), scale_mode, group_size,
            _name(scale_dtype or "float32"), scales_column_major, packed_scales, norm, eps, weight_offset, scale_ub,
            min_scale, qmax)
        return q, (scale if static else None if packed_scales else s)
    q, s = (out[0], out[1]) if isinstance(out, (tuple, list)) else (out, None)
    if static:
        s = scale
    torch.ops.fusednorm.rmsnorm_quant_out(x, weight, residual, q, s, _name(dtype), _name(scale_dtype), scale_mode,
                                          group_size, packed_scales, norm, eps, weight_offset, scale_ub, min_scale,
                                          qmax)
    return q, s


__all__: List[str] = ["cast", "rmsnorm_quant"]
