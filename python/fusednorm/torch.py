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
Element types are names (str: "float8_e4m3fn", ...; float8_e4m3 has no torch dtype and travels as
uint8; FP4 codes are float4_e2m1fn_x2 [..., H/2], or uint8 as out=; the fp4 ops take and return
MXFP4 scales as uint8 codes, see _scales_in). The functions cast(),
rmsnorm_quant(), rmsnorm_fp4() and dequantize_fp4() below take the package's keyword arguments and
call these ops; the package's functions of the same names call them too while torch.compile traces.
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


# ------------------------------------------------------------------------------ rmsnorm_fp4, dequantize_fp4

_F4 = format_of("float4_e2m1fn")


def _global_scale(global_scale, x: Tensor) -> Optional[Tensor]:
    if global_scale is None or isinstance(global_scale, Tensor):
        return global_scale
    return torch.full((1,), float(global_scale), dtype=torch.float32, device=x.device)


# MXFP4 scales cross the op boundary as uint8 codes, viewed as float8_e8m0fnu by the wrappers
# below: PyTorch's inductor (2.15) cannot decompose a mutating custom op (auto_functionalized_v2)
# that has a float8_e8m0fnu tensor among its arguments or outputs ("auto_functionalized_v2 was
# not removed"). NVFP4's float8_e4m3fn scales pass as they are.
def _scales_in(s: Optional[Tensor]) -> Optional[Tensor]:
    return s.view(torch.uint8) if s is not None and s.dtype == torch.float8_e8m0fnu else s


def _scales_out(s: Tensor, format: str) -> Tensor:
    return s.view(torch.float8_e8m0fnu) if format == "mxfp4" else s


def _rmsnorm_fp4_alloc(x: Tensor, format: str, scale_layout: str) -> Tuple[Tensor, Tensor]:
    qshape, sshape = _ops.rmsnorm_fp4_shapes(_T.logical_shape(x, None), format, scale_layout)
    if format == "mxfp4":
        s = torch.empty(sshape, dtype=torch.uint8, device=x.device)
    else:
        s = _T.empty(x, sshape, _ops._fp4_scale_fmt(format))
    return _T.empty(x, qshape, _F4), s


@torch.library.custom_op("fusednorm::rmsnorm_fp4", mutates_args=("residual",))
def _rmsnorm_fp4_op(x: Tensor, weight: Optional[Tensor], residual: Optional[Tensor], global_scale: Optional[Tensor],
                    format: str, scale_layout: str, norm: str, eps: Optional[float],
                    weight_offset: Optional[float]) -> Tuple[Tensor, Tensor]:
    q, s = _rmsnorm_fp4_alloc(x, format, scale_layout)
    _ops.rmsnorm_fp4_into(x, weight, q, s, global_scale=global_scale, residual=residual, format=format,
                          scale_layout=scale_layout, norm=norm, eps=eps, weight_offset=weight_offset)
    return q, s


@_rmsnorm_fp4_op.register_fake
def _(x, weight, residual, global_scale, format, scale_layout, norm, eps, weight_offset):
    return _rmsnorm_fp4_alloc(x, format, scale_layout)


@torch.library.custom_op("fusednorm::rmsnorm_fp4_out", mutates_args=("output", "scales", "residual"))
def _rmsnorm_fp4_out_op(x: Tensor, weight: Optional[Tensor], residual: Optional[Tensor],
                        global_scale: Optional[Tensor], output: Tensor, scales: Tensor, format: str,
                        scale_layout: str, norm: str, eps: Optional[float], weight_offset: Optional[float]) -> None:
    _ops.rmsnorm_fp4_into(x, weight, output, scales, global_scale=global_scale, residual=residual, format=format,
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
    torch.ops.fusednorm.rmsnorm_fp4_out(x, weight, residual, gs, q, _scales_in(s), format, scale_layout, norm, eps,
                                        weight_offset)
    return q, s


def _dequantize_fp4_alloc(codes: Tensor, dtype: str) -> Tensor:
    return _T.empty(codes, _ops.dequantize_fp4_shapes(_T.logical_shape(codes, _F4)), format_of(dtype))


@torch.library.custom_op("fusednorm::dequantize_fp4", mutates_args=())
def _dequantize_fp4_op(codes: Tensor, scales: Tensor, global_scale: Optional[Tensor], format: str,
                       scale_layout: str, dtype: str) -> Tensor:
    out = _dequantize_fp4_alloc(codes, dtype)
    _ops.dequantize_fp4_into(codes, scales, out, global_scale=global_scale, format=format, scale_layout=scale_layout,
                             dtype=dtype)
    return out


@_dequantize_fp4_op.register_fake
def _(codes, scales, global_scale, format, scale_layout, dtype):
    return _dequantize_fp4_alloc(codes, dtype)


@torch.library.custom_op("fusednorm::dequantize_fp4_out", mutates_args=("output",))
def _dequantize_fp4_out_op(codes: Tensor, scales: Tensor, global_scale: Optional[Tensor], output: Tensor,
                           format: str, scale_layout: str, dtype: Optional[str]) -> None:
    _ops.dequantize_fp4_into(codes, scales, output, global_scale=global_scale, format=format,
                             scale_layout=scale_layout, dtype=dtype)


@_dequantize_fp4_out_op.register_fake
def _(codes, scales, global_scale, output, format, scale_layout, dtype):
    return None


def dequantize_fp4(codes: Tensor, scales: Tensor, *, global_scale=None, format="nvfp4", scale_layout="row_major",
                   dtype=None, out: Optional[Tensor] = None):
    """fusednorm.dequantize_fp4 through torch.ops.fusednorm (traceable by torch.compile)."""
    gs = _global_scale(global_scale, codes)
    if out is None:
        return torch.ops.fusednorm.dequantize_fp4(codes, _scales_in(scales), gs, format, scale_layout,
                                                  _name(dtype or "float32"))
    torch.ops.fusednorm.dequantize_fp4_out(codes, _scales_in(scales), gs, out, format, scale_layout, _name(dtype))
    return out


__all__: List[str] = ["cast", "dequantize_fp4", "rmsnorm_fp4", "rmsnorm_quant"]
