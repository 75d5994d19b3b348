"""fusednorm: fused RMSNorm + quantization kernels (CPU, CUDA, HIP) for any DLPack array.

Operations (each a functional form that allocates its outputs in the caller's framework and on
the caller's device, and an out= form that writes into arrays the caller owns):
  rmsnorm_quant(x, weight, dtype=..., scale_mode=..., ...) -> (q, scales)
  cast(src, dtype) -> dst
  rmsnorm_fp4(x, weight, format="nvfp4"|"mxfp4", scale_layout=..., global_scale=...) -> (q, scales)
  dequantize_fp4(q, scales, format=..., global_scale=...) -> y;  fp4_swizzled_size(rows, h, format)
  qk_rmsnorm(q, k, q_weight, k_weight, head_dim=...) -> (q_out, k_out); tensor parallel:
      qk_rmsnorm_stats(q, k) -> stats, then (all-reduced) qk_rmsnorm_apply(q, k, stats, ...)
  mla_rope_rmsnorm_quant(q, kv, weight, cos_sin, page_table, kv_cache, row_offsets=..., ...) -> q_out
Queries: version(), backends(), cpu_target(). Errors: fusednorm.Error and one subclass per
status of the C library, carrying its status and message. PyTorch: the operations are also
torch.library custom ops (torch.ops.fusednorm.*, registered by importing fusednorm.torch, done
on the first call with a torch tensor), so torch.compile(fullgraph=True) traces them.
The C ABI, its options and the exact arithmetic: include/fusednorm/fusednorm.h,
docs/numerics.md; this package: docs/python.md.
"""

from ._errors import (BackendUnavailableError, DeviceError, Error, InternalError, InvalidArgumentError,
                      UnsupportedError)
from ._formats import FORMATS, Format, format_of
from ._ops_cast import cast, cast_into, cast_shapes
from ._ops_fp4 import (dequantize_fp4, dequantize_fp4_into, dequantize_fp4_shapes, fp4_swizzled_size, rmsnorm_fp4,
                       rmsnorm_fp4_into, rmsnorm_fp4_shapes)
from ._ops_mla import mla_rope_rmsnorm_quant, mla_rope_rmsnorm_quant_into, mla_rope_rmsnorm_quant_shapes
from ._ops_qk import (qk_rmsnorm, qk_rmsnorm_apply, qk_rmsnorm_apply_into, qk_rmsnorm_into, qk_rmsnorm_shapes,
                      qk_rmsnorm_stats, qk_rmsnorm_stats_into, qk_rmsnorm_stats_shapes)
from ._ops_quant import rmsnorm_quant, rmsnorm_quant_into, rmsnorm_quant_shapes
from ._queries import backends, cpu_target, version

__version__ = version()

__all__ = [
    "BackendUnavailableError", "DeviceError", "Error", "FORMATS", "Format", "InternalError",
    "InvalidArgumentError", "UnsupportedError", "backends", "cast", "cast_into", "cast_shapes",
    "cpu_target", "dequantize_fp4", "dequantize_fp4_into", "dequantize_fp4_shapes", "format_of",
    "fp4_swizzled_size", "mla_rope_rmsnorm_quant", "mla_rope_rmsnorm_quant_into",
    "mla_rope_rmsnorm_quant_shapes", "qk_rmsnorm", "qk_rmsnorm_apply", "qk_rmsnorm_apply_into", "qk_rmsnorm_into",
    "qk_rmsnorm_shapes", "qk_rmsnorm_stats", "qk_rmsnorm_stats_into", "qk_rmsnorm_stats_shapes", "rmsnorm_fp4", "rmsnorm_fp4_into", "rmsnorm_fp4_shapes", "rmsnorm_quant",
    "rmsnorm_quant_into", "rmsnorm_quant_shapes", "version",
]
