"""Type stubs of the package fusednorm (docs/python.md)."""

from typing import Any, Dict, List, Literal, NamedTuple, Optional, Sequence, Tuple, Union

Array = Any  # NumPy array, torch.Tensor, or any object with __dlpack__
DType = Union[str, Any]  # a name ("float8_e4m3fn", "f8e4m3fn"), a NumPy/ml_dtypes dtype, a torch.dtype
Stream = Union[None, int, Any]  # a handle, torch.cuda.Stream or a CuPy stream; None: the framework's current
ScaleMode = Literal["row", "group", "static", "dynamic_row", "dynamic_group"]
Fp4Format = Literal["nvfp4", "mxfp4"]
Fp4ScaleLayout = Literal["row_major", "row-major", "swizzled"]

__version__: str

class Error(RuntimeError):
    status: int
    status_name: str
    message: str
    def __init__(self, message: str, status: Optional[int] = ...) -> None: ...

class InvalidArgumentError(Error, ValueError): ...
class UnsupportedError(Error, NotImplementedError): ...
class BackendUnavailableError(Error): ...
class DeviceError(Error): ...
class InternalError(Error): ...

class Format(NamedTuple):
    name: str
    code: int
    bits: int
    numpy: str
    torch: Optional[str]
    native_numpy: bool

FORMATS: Dict[str, Format]

def format_of(dtype: DType) -> Format: ...
def version() -> str: ...
def cpu_target() -> str: ...
def backends() -> List[Dict[str, Any]]: ...

def cast(src: Array, dtype: Optional[DType] = ..., *, out: Optional[Array] = ..., src_dtype: Optional[DType] = ...,
         e8m0_rounding: Optional[Literal["nearest", "up"]] = ..., stream: Stream = ...) -> Array: ...
def cast_into(src: Array, dst: Array, src_dtype: Optional[DType] = ..., dst_dtype: Optional[DType] = ...,
              e8m0_rounding: Optional[Literal["nearest", "up"]] = ..., stream: Stream = ...) -> Array: ...
def cast_shapes(shape: Sequence[int]) -> Tuple[int, ...]: ...

def rmsnorm_quant(x: Array, weight: Optional[Array] = ..., *, dtype: Optional[DType] = ...,
                  scale_mode: ScaleMode = ..., group_size: Optional[int] = ..., scale: Union[None, float, Array] = ...,
                  scale_dtype: Optional[DType] = ..., scales_column_major: bool = ..., packed_scales: bool = ...,
                  residual: Optional[Array] = ..., norm: Literal["rms", "none"] = ..., eps: Optional[float] = ...,
                  weight_offset: Optional[float] = ..., scale_ub: Optional[float] = ...,
                  min_scale: Optional[float] = ..., qmax: Optional[float] = ...,
                  out: Union[None, Array, Tuple[Array, Optional[Array]]] = ...,
                  stream: Stream = ...) -> Tuple[Array, Optional[Array]]: ...
def rmsnorm_quant_into(x: Array, weight: Optional[Array], output: Array, scales: Optional[Array], *,
                       residual: Optional[Array] = ..., dtype: Optional[DType] = ..., scale_dtype: Optional[DType] = ...,
                       scale_mode: ScaleMode = ..., group_size: Optional[int] = ..., packed_scales: bool = ...,
                       norm: Literal["rms", "none"] = ..., eps: Optional[float] = ...,
                       weight_offset: Optional[float] = ..., scale_ub: Optional[float] = ...,
                       min_scale: Optional[float] = ..., qmax: Optional[float] = ..., stream: Stream = ...) -> None: ...
def rmsnorm_quant_shapes(shape: Sequence[int], scale_mode: ScaleMode = ..., group_size: Optional[int] = ...,
                         packed_scales: bool = ...) -> Tuple[Tuple[int, ...], Optional[Tuple[int, ...]]]: ...

def rmsnorm_fp4(x: Array, weight: Optional[Array] = ..., *, format: Fp4Format = ..., scale_layout: Fp4ScaleLayout = ...,
                global_scale: Union[None, float, Array] = ..., residual: Optional[Array] = ...,
                norm: Literal["rms", "none"] = ..., eps: Optional[float] = ..., weight_offset: Optional[float] = ...,
                out: Optional[Tuple[Array, Array]] = ..., stream: Stream = ...) -> Tuple[Array, Array]: ...
def rmsnorm_fp4_into(x: Array, weight: Optional[Array], output: Array, scales: Array, *,
                     global_scale: Union[None, float, Array] = ..., residual: Optional[Array] = ...,
                     format: Fp4Format = ..., scale_layout: Fp4ScaleLayout = ..., norm: Literal["rms", "none"] = ...,
                     eps: Optional[float] = ..., weight_offset: Optional[float] = ...,
                     stream: Stream = ...) -> None: ...
def rmsnorm_fp4_shapes(shape: Sequence[int], format: Fp4Format = ...,
                       scale_layout: Fp4ScaleLayout = ...) -> Tuple[Tuple[int, ...], Tuple[int, ...]]: ...
def dequantize_fp4(codes: Array, scales: Array, *, global_scale: Union[None, float, Array] = ...,
                   format: Fp4Format = ..., scale_layout: Fp4ScaleLayout = ..., dtype: Optional[DType] = ...,
                   out: Optional[Array] = ..., stream: Stream = ...) -> Array: ...
def dequantize_fp4_into(codes: Array, scales: Array, output: Array, *, global_scale: Union[None, float, Array] = ...,
                        format: Fp4Format = ..., scale_layout: Fp4ScaleLayout = ..., dtype: Optional[DType] = ...,
                        stream: Stream = ...) -> None: ...
def dequantize_fp4_shapes(shape: Sequence[int]) -> Tuple[int, ...]: ...
def fp4_swizzled_size(rows: int, h: int, format: Fp4Format = ...) -> int: ...

QkStatsKind = Literal["sums", "mean_squares"]
OutScales = Union[None, Array, Tuple[float, float]]

def qk_rmsnorm_stats(q: Array, k: Array, *, out: Optional[Array] = ..., stream: Stream = ...) -> Array: ...
def qk_rmsnorm_stats_into(q: Array, k: Array, stats: Array, *, stream: Stream = ...) -> None: ...
def qk_rmsnorm_stats_shapes(q_shape: Sequence[int]) -> Tuple[int, ...]: ...
def qk_rmsnorm_apply(q: Array, k: Array, stats: Array, q_weight: Array, k_weight: Array, *,
                     q_global_width: Optional[int] = ..., k_global_width: Optional[int] = ...,
                     stats_kind: QkStatsKind = ..., eps: Optional[float] = ..., weight_offset: Optional[float] = ...,
                     dtype: Optional[DType] = ..., out_scales: OutScales = ..., out: Optional[Tuple[Array, Array]] = ...,
                     stream: Stream = ...) -> Tuple[Array, Array]: ...
def qk_rmsnorm_apply_into(q: Array, k: Array, stats: Array, q_weight: Array, k_weight: Array, q_out: Array,
                          k_out: Array, *, out_scales: OutScales = ..., dtype: Optional[DType] = ...,
                          stats_kind: Optional[QkStatsKind] = ..., q_global_width: Optional[int] = ...,
                          k_global_width: Optional[int] = ..., eps: Optional[float] = ...,
                          weight_offset: Optional[float] = ..., stream: Stream = ...) -> None: ...
def qk_rmsnorm(q: Array, k: Array, q_weight: Array, k_weight: Array, *, head_dim: Optional[int] = ...,
               eps: Optional[float] = ..., weight_offset: Optional[float] = ..., dtype: Optional[DType] = ...,
               out_scales: OutScales = ..., out: Optional[Tuple[Array, Array]] = ...,
               stream: Stream = ...) -> Tuple[Array, Array]: ...
def qk_rmsnorm_into(q: Array, k: Array, q_weight: Array, k_weight: Array, q_out: Array, k_out: Array, *,
                    out_scales: OutScales = ..., dtype: Optional[DType] = ..., head_dim: Optional[int] = ...,
                    eps: Optional[float] = ..., weight_offset: Optional[float] = ..., stream: Stream = ...) -> None: ...
def qk_rmsnorm_shapes(q_shape: Sequence[int], k_shape: Sequence[int]) -> Tuple[Tuple[int, ...], Tuple[int, ...]]: ...

RopeStyle = Literal["interleaved", "neox"]

def mla_rope_rmsnorm_quant(q: Array, kv: Array, weight: Array, cos_sin: Array, page_table: Array, kv_cache: Array, *,
                           row_offsets: Optional[Array] = ..., positions: Optional[Array] = ...,
                           cache_len: Optional[Array] = ..., k_scale: Union[None, float, Array] = ...,
                           invalid_tokens: Optional[Array] = ..., cache_dtype: Optional[DType] = ...,
                           rope_style: RopeStyle = ..., eps: Optional[float] = ..., weight_offset: Optional[float] = ...,
                           inplace: bool = ..., out: Optional[Array] = ..., stream: Stream = ...) -> Array: ...
def mla_rope_rmsnorm_quant_into(q: Array, q_out: Optional[Array], kv: Array, weight: Array, cos_sin: Array,
                                page_table: Array, kv_cache: Array, *, positions: Optional[Array] = ...,
                                row_offsets: Optional[Array] = ..., cache_len: Optional[Array] = ...,
                                k_scale: Union[None, float, Array] = ..., invalid_tokens: Optional[Array] = ...,
                                cache_dtype: Optional[DType] = ..., rope_style: Optional[RopeStyle] = ...,
                                eps: Optional[float] = ..., weight_offset: Optional[float] = ...,
                                stream: Stream = ...) -> None: ...
def mla_rope_rmsnorm_quant_shapes(q_shape: Sequence[int]) -> Tuple[int, ...]: ...
