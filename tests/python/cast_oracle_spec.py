"""Formats, oracle and inputs of tests/python/test_cast_oracle.py (fusednorm_cast against ml_dtypes).

The spec facts of every tested element type (Fmt, FMT), the oracle's decoding and expected
encoding (ml_dtypes / numpy, and the spec rules of docs/numerics.md section 1 where ml_dtypes has
no defined answer or differs), an exact float64 grid rounding that cross-checks the oracle, and
the input sets of the encoding tests. Imported by the test module, which holds every test;
_SKIP_REASON says why the tests skip (numpy or ml_dtypes missing, $FUSEDNORM_LIBRARY unset).
"""

import os
import warnings

from fusednorm_ctypes import E8M0_NEAREST, E8M0_UP, kDLBfloat, kDLFloat, kDLInt

_SKIP_REASON = None
try:
    import numpy as np
except Exception as e:  # pragma: no cover - environment dependent
    np = None
    _SKIP_REASON = "numpy cannot be imported (%s)" % (e,)
try:
    import ml_dtypes as md
except Exception as e:  # pragma: no cover - environment dependent
    md = None
    _SKIP_REASON = _SKIP_REASON or "ml_dtypes cannot be imported (%s)" % (e,)
if _SKIP_REASON is None:
    _missing = [t for t in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3", "float8_e5m2",
                            "float8_e5m2fnuz", "float4_e2m1fn", "float8_e8m0fnu", "bfloat16")
                if not hasattr(md, t)]
    if _missing:
        _SKIP_REASON = "ml_dtypes %s lacks %s (need ml_dtypes >= 0.5)" % (
            getattr(md, "__version__", "?"), ", ".join(_missing))
if _SKIP_REASON is None and not os.environ.get("FUSEDNORM_LIBRARY"):
    _SKIP_REASON = "FUSEDNORM_LIBRARY is not set"


# ------------------------------------------------------------------------------ formats


class Fmt:
    """One element type: its DLPack code, storage and the spec's facts about it."""

    def __init__(self, name, code, bits, kind, oracle=None, exp=0, man=0, bias=0, qmax=None,
                 nan_code=None, signed_nan=False, unique_nan=False, neg_zero=True,
                 saturating=False):
        self.name, self.code, self.bits, self.kind = name, code, bits, kind
        self.oracle = oracle  # numpy / ml_dtypes scalar type
        self.exp, self.man, self.bias, self.qmax = exp, man, bias, qmax
        self.nan_code = nan_code  # positive code NaN encodes to (spec); None: any NaN code
        self.signed_nan = signed_nan
        self.unique_nan = unique_nan  # the format has exactly one NaN code per sign
        self.neg_zero = neg_zero
        self.saturating = saturating
        self.sign_bit = (bits - 1) if bits < 32 else 31

    @property
    def ncodes(self):
        return 1 << self.bits

    @property
    def code_dtype(self):
        return {4: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32}[self.bits]

    def __repr__(self):
        return self.name


def _formats():
    F = {}
    F["f32"] = Fmt("f32", kDLFloat, 32, "f32", np.float32, 8, 23, 127, signed_nan=True)
    F["f16"] = Fmt("f16", kDLFloat, 16, "ieee", np.float16, 5, 10, 15, 65504.0,
                   signed_nan=True)
    F["bf16"] = Fmt("bf16", kDLBfloat, 16, "ieee", md.bfloat16, 8, 7, 127,
                    float.fromhex("0x1.fep127"), signed_nan=True)
    F["int8"] = Fmt("int8", kDLInt, 8, "int8", np.int8, qmax=127.0, nan_code=0x00)
    # The table of docs/numerics.md section 1.
    F["f8e4m3fn"] = Fmt("f8e4m3fn", 10, 8, "mini", md.float8_e4m3fn, 4, 3, 7, 448.0,
                        nan_code=0x7F, signed_nan=True, unique_nan=True, saturating=True)
    F["f8e4m3fnuz"] = Fmt("f8e4m3fnuz", 11, 8, "mini", md.float8_e4m3fnuz, 4, 3, 8, 240.0,
                          nan_code=0x80, unique_nan=True, neg_zero=False, saturating=True)
    F["f8e4m3"] = Fmt("f8e4m3", 8, 8, "mini", md.float8_e4m3, 4, 3, 7, 240.0,
                      signed_nan=True, saturating=True)
    F["f8e5m2"] = Fmt("f8e5m2", 12, 8, "mini", md.float8_e5m2, 5, 2, 15, 57344.0,
                      signed_nan=True, saturating=True)
    F["f8e5m2fnuz"] = Fmt("f8e5m2fnuz", 13, 8, "mini", md.float8_e5m2fnuz, 5, 2, 16, 57344.0,
                          nan_code=0x80, unique_nan=True, neg_zero=False, saturating=True)
    F["f4e2m1"] = Fmt("f4e2m1", 17, 4, "mini", md.float4_e2m1fn, 2, 1, 1, 6.0, nan_code=0x00,
                      saturating=True)
    F["e8m0"] = Fmt("e8m0", 14, 8, "e8m0", md.float8_e8m0fnu, 8, 0, 127, 2.0 ** 127,
                    nan_code=0xFF, unique_nan=True, neg_zero=False, saturating=True)
    return F


FMT = _formats() if _SKIP_REASON is None else {}
TESTED = ["f8e4m3fn", "f8e4m3fnuz", "f8e4m3", "f8e5m2", "f8e5m2fnuz", "f4e2m1", "e8m0", "bf16",
          "f16", "int8"]
MINI = ["f8e4m3fn", "f8e4m3fnuz", "f8e4m3", "f8e5m2", "f8e5m2fnuz", "f4e2m1"]

# ------------------------------------------------------------------------------ the oracle


def f32_bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def from_bits(u):
    return np.asarray(u, dtype=np.uint32).view(np.float32)


def oracle_decode(fmt, codes):
    """ml_dtypes / numpy decode of codes (one per element) to f32."""
    codes = np.asarray(codes)
    if fmt.kind == "f32":
        return codes.astype(np.uint32).view(np.float32)
    if fmt.kind == "int8":
        return codes.astype(np.uint8).view(np.int8).astype(np.float32)
    return codes.astype(fmt.code_dtype).view(fmt.oracle).astype(np.float32)


def all_codes(fmt):
    return np.arange(fmt.ncodes, dtype=np.uint32).astype(fmt.code_dtype)


def nan_code_mask(fmt, codes):
    if fmt.kind == "int8" or fmt.name == "f4e2m1":
        return np.zeros(np.shape(codes), bool)
    return np.isnan(oracle_decode(fmt, codes))


def grid_round(fmt, x):
    """Exact round-to-nearest-even of f32 x onto the grid of fmt (exp/man/bias, subnormals,
    unbounded exponent range above): computed in float64, where every step is exact."""
    x = np.asarray(x, dtype=np.float64)
    emin = 1 - fmt.bias
    with np.errstate(all="ignore"):
        _, e = np.frexp(x)  # |x| = m * 2^e, m in [0.5, 1): floor(log2|x|) = e - 1
        e = np.maximum(e - 1, emin)
        q = np.ldexp(1.0, e - fmt.man)
        r = np.rint(x / q) * q  # np.rint: ties to even = even last mantissa bit
    return np.where(x == 0, x, r)


def _ml_convert(fmt, x):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(x, np.float32).astype(fmt.oracle)


def e8m0_spec(x, rounding):
    """The spec's e8m0 encoders (docs/numerics.md section 1, quant_math.h), from exact
    frexp arithmetic: up = smallest power of two >= v; rn = nearest power of two, ties up;
    v <= 0 or v < 2^-127 -> 0x00; above 2^127 -> 0xFE; NaN -> 0xFF."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    out = np.zeros(x.shape, np.int64)
    with np.errstate(all="ignore"):
        m, e = np.frexp(np.where(np.isfinite(x), x, 1.0))  # x = m 2^e, m in [0.5, 1)
    if rounding == E8M0_UP:
        k = np.where(m == 0.5, e - 1, e)
    else:
        k = np.where(m < 0.75, e - 1, e)  # m == 0.5 exact power; m == 0.75 tie goes up
    code = np.clip(k + 127, 0, 0xFE)
    pos = x > 0
    out = np.where(pos & np.isfinite(x), code, out)
    out = np.where(x < 2.0 ** -127, 0, out)
    out = np.where(np.isposinf(x), 0xFE, out)
    out = np.where(np.isnan(x), 0xFF, out)
    return out.astype(np.uint8)


def e8m0_is_tie(x):
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        m, _ = np.frexp(np.where(np.isfinite(x), x, 1.0))
    return np.isfinite(x) & (x > 0) & (m == 0.75)


class Expected:
    """Expected codes for inputs x; NaN inputs are checked by rule, not by code."""

    def __init__(self, codes, source, nan_in, nan_sign):
        self.codes = codes        # expected code per element (ignored where nan_in)
        self.source = source      # per element: which oracle decided ("ml_dtypes", "spec", ...)
        self.nan_in = nan_in      # input is NaN
        self.nan_sign = nan_sign  # sign of the NaN input, or -1 where the source gave no sign


def expected_encode(fmt, x, rounding=E8M0_NEAREST, nan_sign=None):
    """Oracle codes for f32 x. nan_sign: per-element NaN sign override (-1 = unspecified)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    xb = x.view(np.uint32)
    nan_in = np.isnan(x)
    sign = (xb >> 31).astype(np.int64)
    nsign = np.where(nan_in, sign, -1) if nan_sign is None else np.asarray(nan_sign)
    src = np.full(x.shape, "ml_dtypes", dtype=object)
    if fmt.kind == "int8":
        with np.errstate(all="ignore"):
            r = np.clip(np.rint(np.where(nan_in, 0.0, x)), -128, 127).astype(np.int64)
        src[:] = "numpy rint+clip"
        return Expected((r & 0xFF).astype(np.uint8), src, nan_in, nsign)
    if fmt.kind == "e8m0":
        src[:] = "spec e8m0_%s" % ("up" if rounding == E8M0_UP else "rn")
        return Expected(e8m0_spec(x, rounding), src, nan_in, nsign)
    if fmt.kind == "ieee":  # f16, bf16: oracle everywhere except NaN (Inf on overflow)
        codes = _ml_convert(fmt, np.where(nan_in, 0, x)).view(fmt.code_dtype)
        return Expected(codes.copy(), src, nan_in, nsign)
    # minifloats: ml_dtypes in range, spec beyond (saturation)
    codes = _ml_convert(fmt, np.where(nan_in, 0, x)).view(np.uint8).astype(np.uint8)
    over = ~nan_in & (np.abs(x.astype(np.float64)) > fmt.qmax)
    maxcode = np.uint8(_max_code(fmt))
    sat = (maxcode | (sign.astype(np.uint8) << fmt.sign_bit)).astype(np.uint8)
    codes = np.where(over, sat, codes).astype(np.uint8)
    src[over] = "spec (saturate)"
    return Expected(codes, src, nan_in, nsign)


_MAX_CODE_CACHE = {}


def _max_code(fmt):
    """Positive code of the largest finite value, found from the oracle's decoding."""
    if fmt.name not in _MAX_CODE_CACHE:
        c = np.arange(1 << (fmt.bits - 1), dtype=np.uint8)  # positive codes
        v = oracle_decode(fmt, c)
        hits = np.nonzero(v == fmt.qmax)[0]
        assert hits.size == 1, (fmt, hits)
        _MAX_CODE_CACHE[fmt.name] = int(hits[0])
    return _MAX_CODE_CACHE[fmt.name]


# ------------------------------------------------------------------------------ input sets

RNG_SEED = 20240611


def _f32(v):
    with np.errstate(all="ignore"):
        return np.asarray(v, dtype=np.float64).astype(np.float32)


def _with_neighbours_and_signs(v):
    v = np.asarray(v, dtype=np.float32)
    with np.errstate(all="ignore"):
        up = np.nextafter(v, np.float32(np.inf))
        dn = np.nextafter(v, np.float32(-np.inf))
    s = np.concatenate([v, up, dn])
    return np.concatenate([s, -s])


def _special_inputs(qmax):
    bits = [0x00000000, 0x80000000,  # zeros
            0x00000001, 0x80000001, 0x00000002, 0x007FFFFF, 0x807FFFFF, 0x00400000, 0x00600000,
            0x00123456, 0x80654321,  # f32 subnormals
            0x7F7FFFFF, 0xFF7FFFFF,  # f32 max
            0x7F800000, 0xFF800000,  # Inf
            0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF,
            0x7FA00000, 0xFFB12345, 0x7FE00001]  # NaNs: quiet, signalling, payloads
    v = from_bits(np.array(bits, dtype=np.uint32))
    big = _f32(np.array([qmax * (1 + 2.0 ** -20), qmax * 1.01, qmax * 1.5, qmax * 2, qmax * 4,
                         qmax * 1e3, 1e30, 3e38], dtype=np.float64))
    big = big[np.isfinite(big)]
    return np.concatenate([v, _with_neighbours_and_signs(big)])


def _random_inputs(fmt, n=100_000):
    rng = np.random.default_rng(RNG_SEED + fmt.code * 31 + fmt.bits)
    raw = from_bits(rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32))
    emin = 1 - fmt.bias
    emax = int(np.floor(np.log2(fmt.qmax))) if fmt.qmax else 8
    lo = max(emin - fmt.man - 3, -149)
    e = rng.integers(lo, emax + 3, size=n)
    m = rng.uniform(1.0, 2.0, size=n)
    s = np.where(rng.integers(0, 2, size=n) == 1, -1.0, 1.0)
    with np.errstate(all="ignore"):
        logu = _f32(s * np.ldexp(m, e))
    return np.concatenate([raw, logu])


def float_encode_inputs(fmt):
    """Representable values, midpoints, +-1 ulp of both, both signs, specials, random."""
    codes = all_codes(fmt)
    vals = oracle_decode(fmt, codes).astype(np.float64)
    vals = np.unique(np.abs(vals[np.isfinite(vals)]))  # sorted, includes 0
    # next grid point beyond the largest finite (the overflow rounding boundary)
    emax = int(np.floor(np.log2(fmt.qmax)))
    beyond = fmt.qmax + 2.0 ** (emax - fmt.man)
    grid = np.concatenate([vals, [beyond]])
    mids = (grid[:-1] + grid[1:]) / 2
    mids32 = _f32(mids)
    assert np.array_equal(mids32.astype(np.float64), mids), "midpoints must be exact in f32"
    base = np.concatenate([_f32(grid), mids32])
    x = np.concatenate([_with_neighbours_and_signs(base), _special_inputs(fmt.qmax),
                        _random_inputs(fmt)])
    return x


def int8_encode_inputs():
    ints = np.arange(-140, 141, dtype=np.float64)
    mids = np.arange(-140, 140, dtype=np.float64) + 0.5
    quarter = np.concatenate([ints + 0.25, ints + 0.75, [0.49999997, 0.5, 1e-3, 1e-30]])
    base = _f32(np.concatenate([ints, mids, quarter]))
    fmt = FMT["int8"]
    rng = np.random.default_rng(RNG_SEED)
    rnd = _f32(rng.uniform(-300, 300, size=100_000))
    rawb = from_bits(rng.integers(0, 1 << 32, size=100_000, dtype=np.uint64).astype(np.uint32))
    return np.concatenate([_with_neighbours_and_signs(base), _special_inputs(fmt.qmax), rnd, rawb])


def e8m0_encode_inputs():
    k = np.arange(-149, 128)
    pows = np.ldexp(1.0, k)  # every f32 power of two, subnormals included
    ties = 1.5 * pows        # the rounding midpoints of e8m0_rn (exact in f32)
    quarters = np.concatenate([1.25 * pows, 1.75 * pows])
    base = _f32(np.concatenate([pows, ties[:-1], quarters[np.isfinite(quarters)],
                                [1.5 * 2.0 ** 127, 2.0 ** 127 * (1 + 2.0 ** -23)]]))
    base = base[np.isfinite(base)]
    return np.concatenate([_with_neighbours_and_signs(base), _special_inputs(2.0 ** 127),
                           _random_inputs(FMT["e8m0"])])


def encode_inputs(fmt):
    if fmt.kind == "int8":
        return int8_encode_inputs()
    if fmt.kind == "e8m0":
        return e8m0_encode_inputs()
    return float_encode_inputs(fmt)
