"""fusednorm._C: the C ABI for the package (python/src/fusednorm_ext.cc). Not a public API.

A tensor argument is None (NULL), an array (anything with __dlpack__, a DLPack capsule or the
buffer protocol), or (array, dlpack_code, bits) to replace the array's dtype. An operation
returns None on success and (status, message) on failure."""

from typing import Any, Optional, Tuple, Union

TensorArg = Union[None, Any, Tuple[Any, int, int]]
Failure = Optional[Tuple[int, str]]

def version() -> Tuple[str, int, int, int]: ...
def cpu_target() -> str: ...
def status_string(status: int) -> str: ...
def query_backend(device_type: int) -> Union[dict, Tuple[int, str]]: ...
def dlpack_dtype(array: Any) -> Tuple[int, int, int]: ...

class CastOptions:
    e8m0_rounding: int
    def __init__(self) -> None: ...

def cast(src: TensorArg, dst: TensorArg, options: CastOptions, stream: int) -> Failure: ...

class RmsnormQuantOptions:
    norm: int
    scale_mode: int
    scale_placement: int
    group_size: int
    eps: float
    weight_offset: float
    scale_ub: float
    min_scale: float
    qmax: float
    def __init__(self) -> None: ...

def rmsnorm_quant(input: TensorArg, residual: TensorArg, weight: TensorArg, output: TensorArg, scales: TensorArg,
                  options: RmsnormQuantOptions, stream: int) -> Failure: ...

class RmsnormFp4Options:
    norm: int
    format: int
    scale_layout: int
    eps: float
    weight_offset: float
    def __init__(self) -> None: ...

def rmsnorm_fp4(input: TensorArg, residual: TensorArg, weight: TensorArg, output: TensorArg, scales: TensorArg,
                global_scale: TensorArg, options: RmsnormFp4Options, stream: int) -> Failure: ...

class DequantizeFp4Options:
    format: int
    scale_layout: int
    def __init__(self) -> None: ...

def dequantize_fp4(codes: TensorArg, scales: TensorArg, global_scale: TensorArg, output: TensorArg,
                   options: DequantizeFp4Options, stream: int) -> Failure: ...
def fp4_swizzled_size(rows: int, h: int, format: int) -> Union[int, Tuple[int, str]]: ...

class QkRmsnormOptions:
    stats_kind: int
    q_global_width: int
    k_global_width: int
    head_dim: int
    eps: float
    weight_offset: float
    def __init__(self) -> None: ...

def qk_rmsnorm_stats(q: TensorArg, k: TensorArg, stats: TensorArg, options: QkRmsnormOptions, stream: int) -> Failure: ...
def qk_rmsnorm_apply(q: TensorArg, k: TensorArg, stats: TensorArg, q_weight: TensorArg, k_weight: TensorArg,
                     q_out: TensorArg, k_out: TensorArg, out_scales: TensorArg, options: QkRmsnormOptions,
                     stream: int) -> Failure: ...
def qk_rmsnorm(q: TensorArg, k: TensorArg, q_weight: TensorArg, k_weight: TensorArg, q_out: TensorArg,
               k_out: TensorArg, out_scales: TensorArg, options: QkRmsnormOptions, stream: int) -> Failure: ...

class MlaRopeRmsnormQuantOptions:
    rope_style: int
    eps: float
    weight_offset: float
    def __init__(self) -> None: ...

def mla_rope_rmsnorm_quant(q: TensorArg, q_out: TensorArg, kv: TensorArg, weight: TensorArg, cos_sin: TensorArg,
                           positions: TensorArg, row_offsets: TensorArg, cache_len: TensorArg, page_table: TensorArg,
                           kv_cache: TensorArg, k_scale: TensorArg, invalid_tokens: TensorArg,
                           options: MlaRopeRmsnormQuantOptions, stream: int) -> Failure: ...
