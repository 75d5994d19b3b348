"""The C ABI of libfusednorm.so through ctypes, for the test and benchmark scripts (the oracle test
tests/python/test_cast_oracle.py and tests/bench/torch_compare.py): DLPack 0.6 structs, the option
structs of include/fusednorm/fusednorm.h, the type codes, and a loader that declares every entry
point's signature. Plain Python (no numpy or torch needed to import it)."""

import ctypes

kDLCPU, kDLCUDA, kDLROCM = 1, 2, 10
kDLInt, kDLUInt, kDLFloat, kDLBfloat = 0, 1, 2, 4
# DLPack 1.1 codes of the FP8/FP4 types (fusednorm.h defines them for DLPack 0.6).
kDLFloat8_e4m3, kDLFloat8_e4m3fn, kDLFloat8_e4m3fnuz = 8, 10, 11
kDLFloat8_e5m2, kDLFloat8_e5m2fnuz, kDLFloat8_e8m0fnu, kDLFloat4_e2m1fn = 12, 13, 14, 17

SUCCESS = 0
E8M0_NEAREST, E8M0_UP = 0, 1
NORM_RMS, NORM_NONE = 0, 1
SCALE_STATIC, SCALE_ROW, SCALE_GROUP = 0, 1, 2
SCALES_TENSOR, SCALES_PACKED_ROW_END = 0, 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def dl_tensor(data, device, code, bits, shape, strides=None, byte_offset=0):
    """A DLTensor over memory at address `data` (an int); keeps its shape and strides alive."""
    t = DLTensor()
    t.data = data
    t.device = DLDevice(*device)
    t.ndim = len(shape)
    t.dtype = DLDataType(code, bits, 1)
    t._shape = (ctypes.c_int64 * len(shape))(*shape)
    t.shape = t._shape
    if strides is not None:
        t._strides = (ctypes.c_int64 * len(strides))(*strides)
        t.strides = t._strides
    t.byte_offset = byte_offset
    return t


class CastOptions(ctypes.Structure):  # fusednorm_cast_options
    _fields_ = [("struct_size", ctypes.c_size_t), ("e8m0_rounding", ctypes.c_int32)]


class RmsnormQuantOptions(ctypes.Structure):  # fusednorm_rmsnorm_quant_options
    _fields_ = [("struct_size", ctypes.c_size_t), ("norm", ctypes.c_int32), ("scale_mode", ctypes.c_int32),
                ("scale_placement", ctypes.c_int32), ("reserved0", ctypes.c_int32), ("group_size", ctypes.c_int64),
                ("eps", ctypes.c_float), ("weight_offset", ctypes.c_float), ("scale_ub", ctypes.c_float),
                ("min_scale", ctypes.c_float), ("qmax", ctypes.c_float)]


ROPE_INTERLEAVED, ROPE_NEOX = 0, 1


class MlaRopeRmsnormQuantOptions(ctypes.Structure):  # fusednorm_mla_rope_rmsnorm_quant_options
    _fields_ = [("struct_size", ctypes.c_size_t), ("rope_style", ctypes.c_int32), ("reserved0", ctypes.c_int32),
                ("eps", ctypes.c_float), ("weight_offset", ctypes.c_float)]


def load(path):
    """ctypes.CDLL(path) with the signature of every entry point used by the scripts declared."""
    lib = ctypes.CDLL(path)
    P = ctypes.POINTER
    lib.fusednorm_cast.argtypes = [P(DLTensor), P(DLTensor), P(CastOptions), ctypes.c_void_p]
    lib.fusednorm_cast.restype = ctypes.c_int
    lib.fusednorm_cast_options_init.argtypes = [P(CastOptions)]
    lib.fusednorm_cast_options_init.restype = None
    lib.fusednorm_rmsnorm_quant.argtypes = [P(DLTensor)] * 5 + [P(RmsnormQuantOptions), ctypes.c_void_p]
    lib.fusednorm_rmsnorm_quant.restype = ctypes.c_int
    lib.fusednorm_rmsnorm_quant_options_init.argtypes = [P(RmsnormQuantOptions)]
    lib.fusednorm_rmsnorm_quant_options_init.restype = None
    # q, q_out, kv, weight, cos_sin, positions, row_offsets, cache_len, page_table, kv_cache, k_scale,
    # invalid_tokens (NULL: None), options, stream
    lib.fusednorm_mla_rope_rmsnorm_quant.argtypes = [P(DLTensor)] * 12 + [P(MlaRopeRmsnormQuantOptions),
                                                                         ctypes.c_void_p]
    lib.fusednorm_mla_rope_rmsnorm_quant.restype = ctypes.c_int
    lib.fusednorm_mla_rope_rmsnorm_quant_options_init.argtypes = [P(MlaRopeRmsnormQuantOptions)]
    lib.fusednorm_mla_rope_rmsnorm_quant_options_init.restype = None
    lib.fusednorm_last_error.argtypes = []
    lib.fusednorm_last_error.restype = ctypes.c_char_p
    lib.fusednorm_version.argtypes = [ctypes.c_void_p] * 3
    lib.fusednorm_version.restype = ctypes.c_char_p
    return lib
